//! The crate's one error: why a flag value could not be parsed, in words that say what
//! was expected.

use thiserror::Error;

/// Why a flag value could not be parsed.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SpecError {
    /// Nothing was given.
    #[error("empty {what}")]
    Empty {
        /// What was expected.
        what: &'static str,
    },
    /// A number did not parse.
    #[error("cannot parse {what} '{input}': not a number")]
    BadNumber {
        /// What was expected.
        what: &'static str,
        /// The offending text.
        input: String,
    },
    /// A negative value where only non-negative ones make sense.
    #[error("{what} '{input}' is negative")]
    Negative {
        /// What was expected.
        what: &'static str,
        /// The offending text.
        input: String,
    },
    /// A duration without unit.
    #[error("duration '{input}' has no unit (use ns, us, ms or s, e.g. '10us')")]
    MissingUnit {
        /// The offending text.
        input: String,
    },
    /// A duration with a unit we do not know.
    #[error("duration '{input}' has unknown unit '{unit}' (use ns, us, ms or s)")]
    UnknownUnit {
        /// The offending text.
        input: String,
        /// The unit found.
        unit: String,
    },
    /// A value outside its allowed range.
    #[error("{what} {value} is out of range {range}")]
    OutOfRange {
        /// What was expected.
        what: &'static str,
        /// The offending value, as text.
        value: String,
        /// The allowed range.
        range: &'static str,
    },
    /// An unknown workload name.
    #[error("unknown workload '{name}' (expected {expected})")]
    UnknownWorkload {
        /// The name found.
        name: String,
        /// The forms a workload may take.
        expected: &'static str,
    },
    /// An unknown policy name.
    #[error("unknown policy '{name}' (expected one of {})", crate::policy::POLICIES)]
    UnknownPolicy {
        /// The name found.
        name: String,
    },
    /// A `key=value` parameter that the form does not take.
    #[error("unknown parameter '{key}' for {what} (allowed: {allowed})")]
    UnknownParam {
        /// The form (e.g. `traverse`).
        what: &'static str,
        /// The key found.
        key: String,
        /// The keys allowed.
        allowed: &'static str,
    },
    /// A required parameter is missing.
    #[error("{what} needs parameter '{key}'")]
    MissingParam {
        /// The form.
        what: &'static str,
        /// The missing key.
        key: &'static str,
    },
    /// A parameter given twice.
    #[error("parameter '{key}' given twice")]
    DuplicateParam {
        /// The key.
        key: String,
    },
    /// A parameter without `=`.
    #[error("parameter '{input}' is not of the form key=value")]
    NotKeyValue {
        /// The offending text.
        input: String,
    },
    /// Something valid in isolation but not in this position.
    #[error("{0}")]
    Invalid(String),
}
