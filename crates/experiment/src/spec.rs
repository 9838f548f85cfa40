//! Parsers for the scenario flag values shared by `ferry sim`, `ferry sim-sweep` and
//! `ferry bench`: workloads (durations and policies: the `ferry_spec` crate). Every
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
use ferry_spec::{parse_duration, parse_f64_in, parse_params, parse_u64_max, SpecError};

use crate::mix::{mix_shares, parse_element, preset, PRESETS};
use crate::model::{FunctionKind, FunctionSpec, PhaseMix, Workload};

/// Most elements a `+`-mix may have.
pub const MIX_ELEMENTS_MAX: usize = 256;

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
            let _ = ferry_spec::parse_policy(&s);
            for prefix in ["traverse:", "bimodal:", "kayak:", "fixed:", "balance:"] {
                let _ = parse_workload(&format!("{prefix}{s}"));
                let _ = ferry_spec::parse_policy(&format!("{prefix}{s}"));
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
