//! Typed errors of the control plane: every one is a bad configuration, caught at
//! construction so a running controller never fails.

use thiserror::Error;

/// Why a controller configuration was rejected.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ControlError {
    /// A numeric parameter lies outside the range the algorithm is defined for.
    #[error("{name} must be in {range}, got {value}")]
    OutOfRange {
        /// Parameter name as the user knows it.
        name: &'static str,
        /// Human-readable allowed range.
        range: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// The dual loop needs its inner loop to iterate faster than its outer loop: the outer
    /// loop reads the inner loop's converged output (Kayak §4.3, §6.5).
    #[error(
        "the inner loop ({inner}) must run faster than the outer loop ({outer}): \
         inner period {inner_period_ns} ns is not shorter than outer period {outer_period_ns} ns"
    )]
    InnerNotFaster {
        /// Which loop is inner ("R loop" or "X loop").
        inner: &'static str,
        /// Which loop is outer.
        outer: &'static str,
        /// The inner loop's period.
        inner_period_ns: u64,
        /// The outer loop's period.
        outer_period_ns: u64,
    },
    /// A MIN..MAX range whose ends are out of order or out of bounds.
    #[error("{name} {min}..{max} is infeasible: it needs 1 <= MIN <= MAX <= {limit}")]
    Range {
        /// What the range bounds.
        name: &'static str,
        /// The lower end given.
        min: u64,
        /// The upper end given.
        max: u64,
        /// The largest upper end allowed.
        limit: u64,
    },
    /// Something the policy cannot work without was not given.
    #[error("this policy needs {what}")]
    Missing {
        /// What is missing.
        what: &'static str,
    },
    /// A named part that does not exist (a guard to switch off, say).
    #[error("unknown {what} '{name}' (allowed: {allowed})")]
    Unknown {
        /// What kind of part.
        what: &'static str,
        /// The name given.
        name: String,
        /// The names allowed.
        allowed: &'static str,
    },
}

/// Checks `lo <= value <= hi` (and finiteness) for a named parameter.
pub(crate) fn check_range(
    name: &'static str,
    range: &'static str,
    value: f64,
    lo: f64,
    hi: f64,
) -> Result<(), ControlError> {
    if value.is_finite() && value >= lo && value <= hi {
        Ok(())
    } else {
        Err(ControlError::OutOfRange { name, range, value })
    }
}
