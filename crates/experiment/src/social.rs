//! `social[:aggrv=F,topk=F,aggrs=F,auth=F,vertices=N]`: the social application of Pyxis
//! §VI-C (`ferry_func::builtins::social`) as a workload of four functions.
//!
//! The real benchmark runs the real functions on the loaded graph. The simulator needs each
//! function's costs as Pyxis' task tuple (accesses, object size, compute per access); the
//! compute figures below were measured on the 2-vCPU machines this project runs on: the
//! CPU spent inside the function per request when run on the app side, 4-second runs of
//! `ferry bench --workload social:OP=1 --policy kv --json F` (`app_function_cpus_used` /
//! `throughput_ops`; docs/BENCHMARKS.md). They are the model's inputs, not the functions'
//! behaviour.

use ferry_control::Nanos;

use crate::model::{ComputeDist, FunctionKind, FunctionSpec, PhaseMix, SocialOp, Workload};
use ferry_spec::{parse_f64_in, parse_params, parse_u64_max, SpecError};

/// Default vertices of the graph (a vertex is about 67 KiB over its four rows).
pub const SOCIAL_VERTICES_DEFAULT: u64 = 2000;
/// Most vertices (the benchmark loads them all into one storage node's memory).
pub const SOCIAL_VERTICES_MAX: u64 = 100_000;
/// Pyxis' mix: authentication fixed at 10 %, the other three equal.
const DEFAULT_FRACTIONS: [f64; 4] = [0.3, 0.3, 0.3, 0.1];

/// aggr-V's compute, the mean of 64 vectors of 256 floats (measured: 17.8 µs).
const AGGR_V_COMPUTE: Nanos = Nanos::from_us(18);
/// top-k's compute per access: 12 distances of 256 dimensions and the scoring step of
/// `TOP_K_SCORE_NS_DEFAULT` each, spread over its two accesses (measured: 79.6 µs).
const TOP_K_COMPUTE: Nanos = Nanos::from_us(40);
/// top-k's bytes per access: the association list (96 B), then 13 embeddings of 1 KiB.
const TOP_K_OBJECT_BYTES: u64 = (96 + 13 * 1024) / 2;
/// aggr-S's compute over 256 floats (measured: 3.3 µs).
const AGGR_S_COMPUTE: Nanos = Nanos::from_us(3);
/// auth's compute: scrypt at the data set's default cost, log2 N = 6 (measured: 133.9 µs).
const AUTH_COMPUTE: Nanos = Nanos::from_us(134);

fn function(op: SocialOp, vertices: u64) -> FunctionSpec {
    let (name, accesses, object_bytes, compute) = match op {
        SocialOp::AggrV => ("aggr-V", 1, 64 * 1024, AGGR_V_COMPUTE),
        SocialOp::TopK => ("top-k", 2, TOP_K_OBJECT_BYTES, TOP_K_COMPUTE),
        SocialOp::AggrS => ("aggr-S", 1, 1024, AGGR_S_COMPUTE),
        SocialOp::Auth => ("auth", 1, 96, AUTH_COMPUTE),
    };
    FunctionSpec {
        name: name.to_string(),
        kind: FunctionKind::Social { op, vertices },
        accesses,
        writes: 0,
        object_bytes,
        compute,
        dist: ComputeDist::Fixed,
        slo: None,
    }
}

/// Parses the parameters after `social:` (empty for the defaults).
pub fn parse_social(params: &str) -> Result<Workload, SpecError> {
    let kv = parse_params("social", params, "aggrv, topk, aggrs, auth, vertices")?;
    let get = |k: &str| kv.iter().find(|(x, _)| *x == k).map(|(_, v)| *v);
    let vertices = match get("vertices") {
        Some(v) => parse_u64_max("vertices", v, SOCIAL_VERTICES_MAX, "[13, 100000]")?,
        None => SOCIAL_VERTICES_DEFAULT,
    };
    if vertices <= 12 {
        return Err(SpecError::OutOfRange {
            what: "vertices",
            value: vertices.to_string(),
            range: "[13, 100000]",
        });
    }
    let ops = [SocialOp::AggrV, SocialOp::TopK, SocialOp::AggrS, SocialOp::Auth];
    let names = ["aggrv", "topk", "aggrs", "auth"];
    // Fractions named are used as given (relative weights); with none named, Pyxis' mix.
    let named = names.iter().any(|n| get(n).is_some());
    let mut weights = [0.0; 4];
    for (i, name) in names.iter().enumerate() {
        weights[i] = match get(name) {
            Some(v) => parse_f64_in(name, v, 0.0, 1e12, "[0, 1e12]")?,
            None if named => 0.0,
            None => DEFAULT_FRACTIONS[i],
        };
    }
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return Err(SpecError::Invalid(
            "social: at least one function needs a positive fraction".into(),
        ));
    }
    let functions = ops.iter().map(|op| function(*op, vertices)).collect();
    Ok(Workload {
        label: if params.is_empty() {
            "social".into()
        } else {
            format!("social:{params}")
        },
        functions,
        phases: vec![PhaseMix {
            // A phase lists only functions that run (weights must be positive).
            entries: weights
                .iter()
                .enumerate()
                .filter(|(_, w)| **w > 0.0)
                .map(|(i, w)| (i, w / total))
                .collect(),
        }],
        phase_period: Nanos::MAX,
        demand: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_pyxis_mix_and_fractions_are_relative() {
        let w = parse_social("").unwrap();
        assert_eq!(w.functions.len(), 4);
        let auth = w.phases[0].entries.iter().find(|(i, _)| *i == 3).unwrap().1;
        assert!((auth - 0.1).abs() < 1e-9);
        let w = parse_social("aggrv=1,auth=1").unwrap();
        assert_eq!(w.phases[0].entries, vec![(0, 0.5), (3, 0.5)]);
        assert!(parse_social("aggrv=0").is_err());
        assert!(parse_social("vertices=5").is_err());
        assert!(parse_social("bogus=1").is_err());
        assert_eq!(w.functions[1].accesses, 2);
        assert!(w.validate().is_ok());
    }
}
