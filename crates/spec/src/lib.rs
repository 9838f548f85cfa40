//! The flag values every process shares, parsed into typed values: durations (`10us`,
//! `1.5ms`), bounded numbers, `key=value` lists, and the placement policy a `--policy` flag
//! names with the factory that builds it. The gateway, the storage node's settings, the
//! simulator and the benchmarks all read their flags through this one grammar. No I/O, no
//! clock.
//!
//! Layout:
//! - [`grammar`]: durations, bounded numbers and `key=value` lists.
//! - [`policy`]: the policy flag value ([`PolicySpec`]) and [`PolicySpec::build`].
//! - [`error`]: [`SpecError`], what a malformed value was expected to be.

pub mod error;
pub mod grammar;
pub mod policy;

pub use error::SpecError;
pub use grammar::{parse_duration, parse_f64_in, parse_params, parse_u64_max, DURATION_MAX};
pub use policy::{default_policy, parse_policy, BalanceParams, KayakParams, PolicySpec, PyxisParams, RateParams};
