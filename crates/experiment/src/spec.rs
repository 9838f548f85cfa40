//! Parsers for the scenario flag values shared by `ferry sim`, `ferry sim-sweep` and
//! `ferry bench`: durations and workloads (policies: [`crate::policy_spec`]). Every
//! malformed input yields a typed [`SpecError`] whose message says what was expected.
//!
//! Grammar:
//! - duration: `NUMBER UNIT`, UNIT one of `ns`, `us` (or `µs`), `ms`, `s`; e.g. `10us`, `1.5ms`.
//! - workload: `ELEMENT ('+' ELEMENT)*` or `bimodal:a=PRESET,b=PRESET,period=DURATION`.
//!   ELEMENT is `BASE ('@' WEIGHT)?` (weights below 1 are fractions and must sum to 1;
//!   otherwise they are relative, `A@1+B@3`); BASE is a preset (`light`, `medium`, `heavy`: depth 2
//!   with 100 ns, 1 µs, 10 µs of compute per access),
//!   `traverse:depth=N,compute=DURATION[,size=BYTES][,dist=fixed|exp]` (compute per access)
//!   or `task:accesses=N,compute=DURATION[,size=BYTES][,dist=fixed|exp]` (Pyxis' task:
//!   compute per task); or `random-tasks:n=N,seed=S` (see [`crate::tasks`]); or
//!   `phases:period=DURATION;MIX;MIX[;...]` (see [`crate::phases`]).

use ferry_control::Nanos;
use thiserror::Error;

pub use crate::policy_spec::{default_policy, parse_policy, BalanceParams, KayakParams, PolicySpec, RateParams};

use crate::model::{FunctionKind, FunctionSpec, PhaseMix, Workload, OBJECT_BYTES_DEFAULT};

/// Largest accepted duration: 10⁶ s, far beyond any simulated or benchmark run.
pub const DURATION_MAX: Nanos = Nanos::from_secs(1_000_000);

/// Most elements a `+`-mix may have.
pub const MIX_ELEMENTS_MAX: usize = 256;

/// Compute per access of the `light` preset (Kayak §2).
pub const LIGHT_COMPUTE: Nanos = Nanos(100);
/// Compute per access of the `medium` preset.
pub const MEDIUM_COMPUTE: Nanos = Nanos::from_us(1);
/// Compute per access of the `heavy` preset.
pub const HEAVY_COMPUTE: Nanos = Nanos::from_us(10);
/// Traversal depth of every preset (the paper's default).
pub const PRESET_DEPTH: u32 = 2;

/// The workload presets, for messages.
const PRESETS: &str = "light, medium, heavy";

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
    #[error("unknown workload '{name}' (expected {PRESETS}, traverse:..., task:..., random-tasks:..., phases:..., ycsbt:..., social[:...] or bimodal:...)")]
    UnknownWorkload {
        /// The name found.
        name: String,
    },
    /// An unknown policy name.
    #[error("unknown policy '{name}' (expected one of {})", crate::policy_spec::POLICIES)]
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

/// Parses a duration such as `10us`, `1.5ms`, `5s`, `200ns`.
pub fn parse_duration(input: &str) -> Result<Nanos, SpecError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(SpecError::Empty { what: "duration" });
    }
    if s.starts_with('-') {
        return Err(SpecError::Negative {
            what: "duration",
            input: input.to_string(),
        });
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    if num.is_empty() {
        return Err(SpecError::BadNumber {
            what: "duration",
            input: input.to_string(),
        });
    }
    let value: f64 = num.parse().map_err(|_| SpecError::BadNumber {
        what: "duration",
        input: input.to_string(),
    })?;
    let scale = match unit {
        "" => {
            return Err(SpecError::MissingUnit {
                input: input.to_string(),
            })
        }
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => {
            return Err(SpecError::UnknownUnit {
                input: input.to_string(),
                unit: other.to_string(),
            })
        }
    };
    let ns = (value * scale).round();
    if !ns.is_finite() || ns > DURATION_MAX.0 as f64 {
        return Err(SpecError::OutOfRange {
            what: "duration",
            value: input.to_string(),
            range: "[0, 1000000s]",
        });
    }
    Ok(Nanos(ns as u64))
}

/// Parses a number in `[lo, hi]`.
pub(crate) fn parse_f64_in(
    what: &'static str,
    input: &str,
    lo: f64,
    hi: f64,
    range: &'static str,
) -> Result<f64, SpecError> {
    let v: f64 = input.trim().parse().map_err(|_| SpecError::BadNumber {
        what,
        input: input.to_string(),
    })?;
    if !v.is_finite() || v < lo || v > hi {
        return Err(SpecError::OutOfRange {
            what,
            value: input.to_string(),
            range,
        });
    }
    Ok(v)
}

/// Parses a non-negative integer no larger than `max`.
pub(crate) fn parse_u64_max(what: &'static str, input: &str, max: u64, range: &'static str) -> Result<u64, SpecError> {
    let t = input.trim();
    if t.starts_with('-') {
        return Err(SpecError::Negative {
            what,
            input: input.to_string(),
        });
    }
    let v: u64 = t.parse().map_err(|_| SpecError::BadNumber {
        what,
        input: input.to_string(),
    })?;
    if v > max {
        return Err(SpecError::OutOfRange {
            what,
            value: input.to_string(),
            range,
        });
    }
    Ok(v)
}

/// Splits `k=v,k=v` into pairs, rejecting duplicates and keys outside `allowed`.
pub(crate) fn parse_params<'a>(
    what: &'static str,
    input: &'a str,
    allowed: &'static str,
) -> Result<Vec<(&'a str, &'a str)>, SpecError> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for part in input.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let Some((k, v)) = part.split_once('=') else {
            return Err(SpecError::NotKeyValue {
                input: part.to_string(),
            });
        };
        let (k, v) = (k.trim(), v.trim());
        if !allowed.split(", ").any(|a| a == k) {
            return Err(SpecError::UnknownParam {
                what,
                key: k.to_string(),
                allowed,
            });
        }
        if out.iter().any(|(x, _)| *x == k) {
            return Err(SpecError::DuplicateParam { key: k.to_string() });
        }
        out.push((k, v));
    }
    Ok(out)
}

/// The function of a preset name, if it is one.
pub fn preset(name: &str) -> Option<FunctionSpec> {
    let compute = match name {
        "light" => LIGHT_COMPUTE,
        "medium" => MEDIUM_COMPUTE,
        "heavy" => HEAVY_COMPUTE,
        _ => return None,
    };
    Some(FunctionSpec::traverse(name, PRESET_DEPTH, compute))
}

fn parse_traverse(params: &str) -> Result<FunctionSpec, SpecError> {
    const WHAT: &str = "traverse";
    let kv = parse_params(WHAT, params, "depth, compute, size, dist")?;
    let get = |k: &str| kv.iter().find(|(x, _)| *x == k).map(|(_, v)| *v);
    let depth = get("depth").ok_or(SpecError::MissingParam {
        what: WHAT,
        key: "depth",
    })?;
    let depth = parse_u64_max("depth", depth, 1024, "[1, 1024]")?;
    if depth == 0 {
        return Err(SpecError::OutOfRange {
            what: "depth",
            value: "0".into(),
            range: "[1, 1024]",
        });
    }
    let compute = get("compute").ok_or(SpecError::MissingParam {
        what: WHAT,
        key: "compute",
    })?;
    let compute = parse_duration(compute)?;
    let object_bytes = match get("size") {
        Some(v) => parse_u64_max("size", v, 64 << 20, "[0, 67108864] bytes")?,
        None => OBJECT_BYTES_DEFAULT,
    };
    let dist = match get("dist") {
        None | Some("fixed") => crate::model::ComputeDist::Fixed,
        Some("exp") => crate::model::ComputeDist::Exp,
        Some(other) => return Err(SpecError::Invalid(format!("dist '{other}' is not one of fixed, exp"))),
    };
    Ok(FunctionSpec {
        name: "traverse".into(),
        kind: FunctionKind::Traverse,
        accesses: depth as u32,
        writes: 0,
        object_bytes,
        compute,
        dist,
        slo: None,
    })
}

/// `task:accesses=N,compute=DURATION[,size=BYTES][,dist=fixed|exp]`: Pyxis' task tuple
/// (§VI: storage accesses, object size, computation). `compute` is the task's whole
/// computation; the model spreads it over the accesses (to the nanosecond: a remainder
/// below `accesses` ns is dropped), which leaves each side's CPU per request as the tuple
/// says. Named by its tuple, so the tasks of a mix tell apart in reports.
fn parse_task(params: &str) -> Result<FunctionSpec, SpecError> {
    const WHAT: &str = "task";
    let kv = parse_params(WHAT, params, "accesses, compute, size, dist")?;
    let get = |k: &str| kv.iter().find(|(x, _)| *x == k).map(|(_, v)| *v);
    let accesses = get("accesses").ok_or(SpecError::MissingParam {
        what: WHAT,
        key: "accesses",
    })?;
    let accesses = parse_u64_max("accesses", accesses, 1024, "[1, 1024]")?;
    if accesses == 0 {
        return Err(SpecError::OutOfRange {
            what: "accesses",
            value: "0".into(),
            range: "[1, 1024]",
        });
    }
    let traverse = [
        format!("depth={accesses}"),
        get("size").map(|v| format!("size={v}")).unwrap_or_default(),
        get("dist").map(|v| format!("dist={v}")).unwrap_or_default(),
        format!(
            "compute={}ns",
            parse_duration(get("compute").ok_or(SpecError::MissingParam {
                what: WHAT,
                key: "compute",
            })?)?
            .0 / accesses
        ),
    ];
    let mut f = parse_traverse(&traverse.join(","))?;
    f.name = format!("task:{}", params.trim());
    Ok(f)
}

/// Default YCSB-T accounts.
pub const YCSBT_ACCOUNTS_DEFAULT: u64 = 100_000;
/// Most YCSB-T accounts (the real benchmark loads them all).
pub const YCSBT_ACCOUNTS_MAX: u64 = 10_000_000;
/// Default share of YCSB-T requests that are transfers.
pub const YCSBT_TRANSFER_DEFAULT: f64 = 0.5;
/// Default YCSB-T record size (the YCSB default record is 100 bytes here: one field).
pub const YCSBT_RECORD_BYTES_DEFAULT: u64 = 100;

/// `ycsbt:accounts=N,transfer=F,compute=C[,size=B]`: reads of one account and transfers
/// between two (Zipfian keys on the real system), `compute` inside each transaction.
fn parse_ycsbt(params: &str) -> Result<Workload, SpecError> {
    const WHAT: &str = "ycsbt";
    let kv = parse_params(WHAT, params, "accounts, transfer, compute, size")?;
    let get = |k: &str| kv.iter().find(|(x, _)| *x == k).map(|(_, v)| *v);
    let accounts = match get("accounts") {
        Some(v) => parse_u64_max("accounts", v, YCSBT_ACCOUNTS_MAX, "[2, 10000000]")?,
        None => YCSBT_ACCOUNTS_DEFAULT,
    };
    if accounts < 2 {
        return Err(SpecError::OutOfRange {
            what: "accounts",
            value: accounts.to_string(),
            range: "[2, 10000000]",
        });
    }
    let transfer = match get("transfer") {
        Some(v) => parse_f64_in("transfer", v, 0.0, 1.0, "[0, 1]")?,
        None => YCSBT_TRANSFER_DEFAULT,
    };
    let compute = match get("compute") {
        Some(v) => parse_duration(v)?,
        None => Nanos::ZERO,
    };
    let object_bytes = match get("size") {
        Some(v) => parse_u64_max("size", v, 1 << 20, "[8, 1048576] bytes")?.max(8),
        None => YCSBT_RECORD_BYTES_DEFAULT,
    };
    let function = |name: &str, kind, accesses, writes| FunctionSpec {
        name: name.to_string(),
        kind,
        accesses,
        writes,
        object_bytes,
        compute,
        dist: crate::model::ComputeDist::Fixed,
        slo: None,
    };
    Ok(Workload {
        label: format!("ycsbt:{params}"),
        functions: vec![
            function("ycsbt-read", FunctionKind::YcsbtRead { accounts }, 1, 0),
            function("ycsbt-transfer", FunctionKind::YcsbtTransfer { accounts }, 2, 2),
        ],
        phases: vec![PhaseMix {
            // A phase lists only functions that run (weights must be positive).
            entries: [(0, 1.0 - transfer), (1, transfer)]
                .into_iter()
                .filter(|&(_, w)| w > 0.0)
                .collect(),
        }],
        phase_period: Nanos::MAX,
        demand: None,
    })
}

pub(crate) fn parse_element(input: &str) -> Result<(FunctionSpec, f64), SpecError> {
    let (base, weight) = match input.split_once('@') {
        Some((b, w)) => (
            b.trim(),
            parse_f64_in("mix weight", w, f64::MIN_POSITIVE, 1e12, "(0, 1e12]")?,
        ),
        None => (input.trim(), 1.0),
    };
    if base.is_empty() {
        return Err(SpecError::Empty { what: "workload" });
    }
    if let Some(f) = preset(base) {
        return Ok((f, weight));
    }
    match base.split_once(':') {
        Some(("traverse", params)) => Ok((parse_traverse(params)?, weight)),
        Some(("task", params)) => Ok((parse_task(params)?, weight)),
        None if base == "traverse" => Err(SpecError::MissingParam {
            what: "traverse",
            key: "depth",
        }),
        None if base == "task" => Err(SpecError::MissingParam {
            what: "task",
            key: "accesses",
        }),
        _ => Err(SpecError::UnknownWorkload {
            name: base.split(':').next().unwrap_or(base).to_string(),
        }),
    }
}

fn parse_bimodal(params: &str) -> Result<Workload, SpecError> {
    const WHAT: &str = "bimodal";
    let kv = parse_params(WHAT, params, "a, b, period")?;
    let get = |k: &'static str| {
        kv.iter()
            .find(|(x, _)| *x == k)
            .map(|(_, v)| *v)
            .ok_or(SpecError::MissingParam { what: WHAT, key: k })
    };
    let mut fns = Vec::new();
    for k in ["a", "b"] {
        let name = get(k)?;
        fns.push(
            preset(name)
                .ok_or_else(|| SpecError::Invalid(format!("bimodal {k}='{name}' must be a preset ({PRESETS})")))?,
        );
    }
    let period = parse_duration(get("period")?)?;
    if period == Nanos::ZERO {
        return Err(SpecError::OutOfRange {
            what: "bimodal period",
            value: "0".into(),
            range: "(0, 1000000s]",
        });
    }
    Ok(Workload {
        label: format!("bimodal:{params}"),
        functions: fns,
        phases: vec![
            PhaseMix {
                entries: vec![(0, 1.0)],
            },
            PhaseMix {
                entries: vec![(1, 1.0)],
            },
        ],
        phase_period: period,
        demand: None,
    })
}

/// The shares of a mix's elements from their `@` weights: fractions (every element weighted
/// below 1) must sum to 1; otherwise the weights are relative (`A@1+B@3`) and normalised.
/// A mix that weights some elements with fractions and leaves others bare is ambiguous
/// and refused.
pub(crate) fn mix_shares(elements: &[&str], weights: &[f64]) -> Result<Vec<f64>, SpecError> {
    let explicit = elements.iter().filter(|e| e.contains('@')).count();
    let fractions = weights.iter().all(|&w| w < 1.0);
    if elements.len() > 1 && explicit > 0 && explicit < elements.len() && weights.iter().any(|&w| w < 1.0) {
        return Err(SpecError::Invalid(format!(
            "mix '{}' weights some elements with fractions and not others: give every element a weight \
             (fractions summing to 1, or relative weights such as A@1+B@3)",
            elements.join("+")
        )));
    }
    let total: f64 = weights.iter().sum();
    if explicit == elements.len() && fractions && (total - 1.0).abs() > 1e-6 {
        return Err(SpecError::Invalid(format!(
            "mix fractions {} sum to {total}, not 1 (or give relative weights such as A@1+B@3)",
            weights.iter().map(|w| w.to_string()).collect::<Vec<_>>().join(" + ")
        )));
    }
    Ok(weights.iter().map(|w| w / total).collect())
}

/// Parses a workload spec (see the module docs for the grammar).
pub fn parse_workload(input: &str) -> Result<Workload, SpecError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(SpecError::Empty { what: "workload" });
    }
    if let Some(params) = s.strip_prefix("bimodal:") {
        return parse_bimodal(params);
    }
    if s == "ycsbt" {
        return parse_ycsbt("");
    }
    if s == "social" {
        return crate::social::parse_social("");
    }
    if let Some(params) = s.strip_prefix("social:") {
        return crate::social::parse_social(params);
    }
    if let Some(params) = s.strip_prefix("ycsbt:") {
        return parse_ycsbt(params);
    }
    if let Some(params) = s.strip_prefix("random-tasks:") {
        return crate::tasks::parse_random_tasks(params);
    }
    if let Some(params) = s.strip_prefix("phases:") {
        return crate::phases::parse_phases(params);
    }
    if s == "bimodal" {
        return Err(SpecError::MissingParam {
            what: "bimodal",
            key: "a",
        });
    }
    let parts: Vec<&str> = s.split('+').collect();
    if parts.len() > MIX_ELEMENTS_MAX {
        return Err(SpecError::OutOfRange {
            what: "mix elements",
            value: parts.len().to_string(),
            range: "[1, 256]",
        });
    }
    let mut functions = Vec::new();
    let mut weights = Vec::new();
    for p in &parts {
        let (f, w) = parse_element(p)?;
        functions.push(f);
        weights.push(w);
    }
    let weights = mix_shares(&parts, &weights)?;
    Ok(Workload {
        label: s.to_string(),
        phases: vec![PhaseMix {
            entries: weights.into_iter().enumerate().collect(),
        }],
        functions,
        phase_period: Nanos::MAX,
        demand: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ComputeDist;

    #[test]
    fn ycsbt_parses_into_reads_and_transfers() {
        let w = parse_workload("ycsbt:accounts=1000,transfer=0.25,compute=1us").unwrap();
        assert_eq!(w.functions.len(), 2);
        assert_eq!(w.functions[1].writes, 2);
        assert_eq!(w.functions[1].local_round_trips(), 3, "two reads and the commit");
        assert_eq!(w.phases[0].entries, vec![(0, 0.75), (1, 0.25)]);
        assert!(w.validate().is_ok());
        let reads_only = parse_workload("ycsbt:transfer=0").unwrap();
        assert_eq!(reads_only.phases[0].entries, vec![(0, 1.0)]);
        assert!(reads_only.validate().is_ok());
        assert!(parse_workload("ycsbt:accounts=1").is_err());
        assert!(parse_workload("ycsbt:transfer=2").is_err());
        assert!(parse_workload("ycsbt:bogus=1").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10us").unwrap(), Nanos::from_us(10));
        assert_eq!(parse_duration("10µs").unwrap(), Nanos::from_us(10));
        assert_eq!(parse_duration("5s").unwrap(), Nanos::from_secs(5));
        assert_eq!(parse_duration("1.5ms").unwrap(), Nanos(1_500_000));
        assert_eq!(parse_duration(" 200ns ").unwrap(), Nanos(200));
        assert_eq!(parse_duration("0s").unwrap(), Nanos::ZERO);
        assert!(matches!(parse_duration("10"), Err(SpecError::MissingUnit { .. })));
        assert!(matches!(parse_duration("10x"), Err(SpecError::UnknownUnit { .. })));
        assert!(matches!(parse_duration("-5s"), Err(SpecError::Negative { .. })));
        assert!(matches!(parse_duration("us"), Err(SpecError::BadNumber { .. })));
        assert!(matches!(parse_duration("1.2.3s"), Err(SpecError::BadNumber { .. })));
        assert!(matches!(parse_duration(""), Err(SpecError::Empty { .. })));
        assert!(parse_duration("1e30s").is_err());
        assert!(matches!(
            parse_duration("99999999999s"),
            Err(SpecError::OutOfRange { .. })
        ));
    }

    #[test]
    fn workloads() {
        let w = parse_workload("traverse:depth=2,compute=1us").unwrap();
        assert_eq!(w.functions.len(), 1);
        assert_eq!(w.functions[0].accesses, 2);
        assert_eq!(w.functions[0].compute, Nanos::from_us(1));
        let w = parse_workload("heavy").unwrap();
        assert_eq!(w.functions[0].compute, Nanos::from_us(10));
        let w = parse_workload("traverse:depth=1,compute=5us,size=4096,dist=exp@1+light@3").unwrap();
        assert_eq!(w.functions[0].object_bytes, 4096);
        assert_eq!(w.functions[0].dist, ComputeDist::Exp);
        assert_eq!(w.phases[0].entries, vec![(0, 0.25), (1, 0.75)]);
        let w = parse_workload("bimodal:a=medium,b=light,period=5s").unwrap();
        assert_eq!(w.phases.len(), 2);
        assert_eq!(w.phase_period, Nanos::from_secs(5));
        assert_eq!(w.phase_at(Nanos::from_secs(6)), 1);
        assert_eq!(w.phase_at(Nanos::from_secs(11)), 0);
        assert!(w.validate().is_ok());
    }

    #[test]
    fn bad_workloads_say_why() {
        let cases = [
            ("nope", "unknown workload 'nope'"),
            ("traverse:depth=2", "needs parameter 'compute'"),
            ("traverse:depth=0,compute=1us", "out of range"),
            ("traverse:depth=-1,compute=1us", "negative"),
            ("traverse:depth=2,compute=1", "no unit"),
            ("traverse:depth=2,compute=1us,colour=red", "unknown parameter 'colour'"),
            ("traverse:depth=2,depth=3,compute=1us", "given twice"),
            ("traverse:depth", "key=value"),
            ("bimodal:a=medium,b=nope,period=5s", "must be a preset"),
            ("bimodal:a=medium,b=light", "needs parameter 'period'"),
            ("light@0", "out of range"),
            ("", "empty workload"),
        ];
        for (input, want) in cases {
            let err = parse_workload(input).unwrap_err().to_string();
            assert!(err.contains(want), "{input}: {err}");
        }
    }

    /// Malformed input never panics: every byte string yields Ok or a typed error.
    #[test]
    fn parsers_never_panic_on_garbage() {
        use rand::{Rng, SeedableRng};
        let alphabet: Vec<char> = "0123456789.-+@:=,abcdefghijklmnopqrstuvwxyzµ ".chars().collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..24);
            let s: String = (0..len).map(|_| alphabet[rng.gen_range(0..alphabet.len())]).collect();
            let _ = parse_duration(&s);
            let _ = parse_workload(&s);
            let _ = crate::policy_spec::parse_policy(&s);
            for prefix in ["traverse:", "bimodal:", "kayak:", "fixed:", "balance:"] {
                let _ = parse_workload(&format!("{prefix}{s}"));
                let _ = crate::policy_spec::parse_policy(&format!("{prefix}{s}"));
            }
        }
    }

    #[test]
    fn a_task_spreads_its_compute_over_its_accesses_and_mixes_with_others() {
        let w = parse_workload("task:accesses=4,size=49152,compute=50ns@0.2+task:accesses=1,size=64,compute=50us@0.8")
            .unwrap();
        assert_eq!(w.functions.len(), 2);
        let a = &w.functions[0];
        assert_eq!((a.accesses, a.object_bytes, a.compute), (4, 49_152, Nanos(12)));
        assert!(a.name.starts_with("task:accesses=4"), "{}", a.name);
        let b = &w.functions[1];
        assert_eq!((b.accesses, b.object_bytes, b.compute), (1, 64, Nanos::from_us(50)));
        for (bad, msg) in [
            ("task", "needs parameter 'accesses'"),
            ("task:accesses=0,compute=1us", "out of range"),
            ("task:accesses=2", "needs parameter 'compute'"),
            ("task:accesses=2,compute=1us,depth=3", "unknown parameter 'depth'"),
            ("task:accesses=2,compute=1us,dist=weird", "not one of fixed, exp"),
        ] {
            let e = parse_workload(bad).unwrap_err().to_string();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }

    #[test]
    fn mix_weights_are_fractions_that_sum_to_one_or_relative() {
        let shares = |spec: &str| -> Vec<f64> {
            parse_workload(spec).unwrap().phases[0]
                .entries
                .iter()
                .map(|e| e.1)
                .collect()
        };
        assert_eq!(shares("light@1+heavy@3"), vec![0.25, 0.75]);
        assert_eq!(shares("light@0.25+heavy@0.75"), vec![0.25, 0.75]);
        assert_eq!(shares("light+heavy"), vec![0.5, 0.5]);
        for (bad, msg) in [
            ("light@0.2+heavy@0.9", "sum to 1.1"),
            ("light@0.2+heavy", "weights some elements with fractions and not others"),
        ] {
            let e = parse_workload(bad).unwrap_err().to_string();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }
}
