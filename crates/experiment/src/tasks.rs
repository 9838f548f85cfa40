//! `random-tasks:n=N,seed=S`: Pyxis' randomly sampled tasks (§VI, Fig. 6), a mix of N
//! tasks in equal fractions, each drawn between the two polarized tasks of §II: accesses
//! uniform in 1–4, object size log-uniform in 64 B–48 KB, computation log-uniform in
//! 50 ns–50 µs. The same seed gives the same tasks.

use ferry_control::Nanos;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::model::{FunctionSpec, PhaseMix, Workload};
use ferry_spec::{parse_params, parse_u64_max, SpecError};

/// Most tasks a random mix may have: the policies tell apart 64 functions.
pub const RANDOM_TASKS_MAX: u64 = ferry_control::placement::mix::FUNCTIONS_MAX as u64;

/// The polarized tasks' accesses (task B's 1, task A's 4).
const ACCESSES_RANGE: (u32, u32) = (1, 4);
/// Their object sizes, bytes (B's 64 B, A's 48 KB).
const SIZE_RANGE: (f64, f64) = (64.0, 49_152.0);
/// Their computation, ns (A's 50 ns, B's 50 µs).
const COMPUTE_NS_RANGE: (f64, f64) = (50.0, 50_000.0);

/// Parses the parameters of `random-tasks:` (see the module docs).
pub fn parse_random_tasks(params: &str) -> Result<Workload, SpecError> {
    const WHAT: &str = "random-tasks";
    let kv = parse_params(WHAT, params, "n, seed")?;
    let get = |k: &'static str| {
        kv.iter()
            .find(|(x, _)| *x == k)
            .map(|(_, v)| *v)
            .ok_or(SpecError::MissingParam { what: WHAT, key: k })
    };
    let n = parse_u64_max("random-tasks n", get("n")?, RANDOM_TASKS_MAX, "[1, 64]")?;
    if n == 0 {
        return Err(SpecError::OutOfRange {
            what: "random-tasks n",
            value: n.to_string(),
            range: "[1, 64]",
        });
    }
    let seed = parse_u64_max("random-tasks seed", get("seed")?, u64::MAX, "[0, 2^64)")?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let functions: Vec<FunctionSpec> = (0..n)
        .map(|i| {
            let accesses = rng.gen_range(ACCESSES_RANGE.0..=ACCESSES_RANGE.1);
            let size = log_uniform(&mut rng, SIZE_RANGE).round() as u64;
            let compute_ns = log_uniform(&mut rng, COMPUTE_NS_RANGE);
            let mut f = FunctionSpec::traverse(
                &format!("task{i}:accesses={accesses},size={size},compute={compute_ns:.0}ns"),
                accesses,
                Nanos((compute_ns / accesses as f64).round() as u64),
            );
            f.object_bytes = size;
            f
        })
        .collect();
    Ok(Workload {
        label: format!("random-tasks:{}", params.trim()),
        phases: vec![PhaseMix {
            entries: (0..functions.len()).map(|i| (i, 1.0 / n as f64)).collect(),
        }],
        functions,
        phase_period: Nanos::MAX,
        demand: None,
    })
}

/// A draw log-uniform in [lo, hi].
pub fn log_uniform(rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)) -> f64 {
    (rng.gen_range(lo.ln()..=hi.ln())).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_lie_between_the_polarized_pair_and_repeat_by_seed() {
        let w = parse_random_tasks("n=16,seed=3").unwrap();
        assert_eq!(w.functions.len(), 16);
        assert!(w.validate().is_ok());
        for f in &w.functions {
            assert!((1..=4).contains(&f.accesses));
            assert!((64..=49_152).contains(&f.object_bytes));
            let total = f.compute.0 * f.accesses as u64;
            assert!((45..=50_004).contains(&total), "{total}");
        }
        assert_eq!(w, parse_random_tasks("n=16,seed=3").unwrap());
        assert_ne!(w.functions, parse_random_tasks("n=16,seed=4").unwrap().functions);
        for (bad, msg) in [
            ("n=0,seed=1", "out of range"),
            ("n=65,seed=1", "out of range"),
            ("seed=1", "needs parameter 'n'"),
            ("n=2", "needs parameter 'seed'"),
            ("n=2,seed=x", "not a number"),
            ("n=2,seed=1,size=3", "unknown parameter 'size'"),
        ] {
            let e = parse_random_tasks(bad).unwrap_err().to_string();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }
}
