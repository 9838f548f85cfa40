//! Built-in storage functions used by the benchmarks, each with its argument encoding and a
//! deterministic data set for `ferry load`.
//!
//! - [`noop`]: returns nothing; measures the bare cost of an invocation.
//! - [`traverse`]: pointer chasing, `depth` dependent gets with emulated work after each.
//! - [`ycsbt`]: read one account, or transfer one unit between two (read-modify-write).
//! - [`aggregate`]: multiget N keys and reduce them.
//! - [`auth`]: verify a password against a stored salted scrypt hash.

pub mod aggregate;
pub mod auth;
pub mod noop;
pub mod social;
pub mod traverse;
pub mod ycsbt;

use crate::registry::{RouteFn, StorageFn};

/// Every built-in function with its registered name and routing key.
pub const ALL: &[(&str, StorageFn, RouteFn)] = &[
    (noop::NAME, noop::run, noop::route),
    (traverse::NAME, traverse::run, traverse::route),
    (ycsbt::NAME, ycsbt::run, ycsbt::route),
    (aggregate::NAME, aggregate::run, aggregate::route),
    (auth::NAME, auth::run, auth::route),
    (social::AGGR_V, social::aggr_v, social::route),
    (social::TOP_K, social::top_k, social::route),
    (social::AGGR_S, social::aggr_s, social::route),
];

/// Largest emulated work per access a built-in accepts (1 ms): beyond that a "storage
/// function" is a batch job, and the storage node's CPU budget would cut it off anyway.
pub const MAX_COMPUTE_NS_PER_ACCESS: u64 = 1_000_000;

fn check_compute(compute_ns: u64) -> Result<(), crate::FnError> {
    if compute_ns > MAX_COMPUTE_NS_PER_ACCESS {
        return Err(crate::FnError::BadArgs(format!(
            "compute of {compute_ns} ns per access exceeds {MAX_COMPUTE_NS_PER_ACCESS} ns"
        )));
    }
    Ok(())
}
