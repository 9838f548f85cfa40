//! Mixed workloads (issue 14, the first part): the default policy places each function of
//! a mix by Pyxis' turning point, and lands near the per-function bound where one X for
//! the whole workload cannot.
//!
//! The scenario is Pyxis' polarized pair (§II: task A, four 48 KB accesses and 50 ns of
//! computation; task B, one 64 B access and 50 µs) at 20 % : 80 % on 16 app cores and 4
//! storage cores (C:S = 4:1), 10 µs RTT, p99 ≤ 1 ms. Measured (seed 1, 3 s runs, the last
//! quarter; `ferry sim-sweep --turning-point` at the defaults): the turning-point bound is
//! 407.7k at α = 0.30 (A remote, an eighth of B remote), one X for everything 127.8k at
//! X = 0.45: A's 197 KB per local run saturate the storage node's 25 Gb/s link, so one X
//! must send B remote with A (3.2×, the paper's effect; before the links queued it was
//! 385.7k, 1.06×). `balance` reached 404k at α ≈ 0.31 on the R loop before
//! issue 39 (the test below holds what the current one reaches); `kayak` 108k.

use ferry_control::Nanos;
use ferry_experiment::{parse_workload, ClusterModel};
use ferry_sim::sweep::{self, Axis, SweepConfig};
use ferry_sim::{Scenario, Slo};
use ferry_spec::parse_policy;

const POLARIZED: &str = "task:accesses=4,size=49152,compute=50ns@0.2+task:accesses=1,size=64,compute=50us@0.8";

fn cluster() -> ClusterModel {
    ClusterModel {
        app_cores: 16,
        storage_cores: 4,
        ..ClusterModel::default()
    }
}

fn slo() -> Slo {
    Slo::p99(Nanos::from_ms(1))
}

fn run(policy: &str) -> ferry_sim::SimReport {
    let mut s = Scenario::paper(
        parse_workload(POLARIZED).unwrap(),
        parse_policy(policy).unwrap(),
        Nanos::from_secs(3),
        1,
    );
    s.cluster = cluster();
    s.slo = slo();
    s.run().unwrap()
}

fn bound(axis: Axis) -> sweep::SweepReport {
    let mut cfg = SweepConfig::new(cluster(), parse_workload(POLARIZED).unwrap(), slo(), 1);
    cfg.axis = axis;
    cfg.threads = 2;
    sweep::sweep(&cfg, &sweep::x_grid(0.05)).unwrap()
}

#[test]
fn balance_places_a_mix_near_the_turning_point_bound_where_kayak_cannot() {
    let per_function = bound(Axis::TurningPoint);
    let one_x = bound(Axis::Fraction);
    // Theorem IV.1's structure: the best turning point beats the best single X, and it
    // sends A (the function remote is cheaper for) before any of B.
    assert!(
        per_function.best_throughput_ops > one_x.best_throughput_ops,
        "{} vs {}",
        per_function.best_throughput_ops,
        one_x.best_throughput_ops
    );
    assert!(
        per_function.best_rpc_fraction > 0.2,
        "{}",
        per_function.best_rpc_fraction
    );
    let balance = run("balance");
    let kayak = run("kayak");
    eprintln!(
        "bound {:.0} (alpha {:.2}), one X {:.0}; balance {:.0} X {:.3} p99 {:?}; kayak {:.0}",
        per_function.best_throughput_ops,
        per_function.best_rpc_fraction,
        one_x.best_throughput_ops,
        balance.steady.throughput_ops,
        balance.steady.rpc_fraction_mean,
        balance.steady.p99_us,
        kayak.steady.throughput_ops
    );
    assert!(
        balance.steady.throughput_ops >= 0.95 * per_function.best_throughput_ops,
        "{} vs {}",
        balance.steady.throughput_ops,
        per_function.best_throughput_ops
    );
    assert!(
        balance.steady.p99_us.is_some_and(|p| p <= 1_250.0),
        "{:?}",
        balance.steady.p99_us
    );
    assert!((balance.steady.rpc_fraction_mean - per_function.best_rpc_fraction).abs() < 0.05);
    assert!(balance.steady.throughput_ops >= 3.0 * kayak.steady.throughput_ops);
}

/// Pyxis' 16 random tasks (§VI) on 16 + 4 cores: measured (seed 1) bound 1.010M at
/// α = 0.67 (α steps of 0.01: where the storage link stops binding, throughput along α has
/// a peak narrower than 0.02, and a 0.05 grid read 851k); `balance` 919k (−9 %: the R
/// loop's margins under the SLO, and its climb from startup, which takes most of the 2 s
/// run) at α = 0.672.
#[test]
fn sixteen_random_tasks_converge_fast_near_the_bound() {
    let workload = "random-tasks:n=16,seed=1";
    let mut cfg = SweepConfig::new(cluster(), parse_workload(workload).unwrap(), slo(), 1);
    cfg.axis = Axis::TurningPoint;
    cfg.threads = 2;
    let bound = sweep::sweep(&cfg, &sweep::x_grid(0.01)).unwrap();
    let mut s = Scenario::paper(
        parse_workload(workload).unwrap(),
        parse_policy("balance").unwrap(),
        Nanos::from_secs(2),
        1,
    );
    s.cluster = cluster();
    s.slo = slo();
    let r = s.run().unwrap();
    eprintln!(
        "bound {:.0} at {:.2}; balance {:.0} X {:.3} converged {:?} p99 {:?}",
        bound.best_throughput_ops,
        bound.best_rpc_fraction,
        r.steady.throughput_ops,
        r.steady.rpc_fraction_mean,
        r.steady.converge_ms,
        r.steady.p99_us
    );
    assert!(r.steady.throughput_ops >= 0.9 * bound.best_throughput_ops);
    assert!((r.steady.rpc_fraction_mean - bound.best_rpc_fraction).abs() < 0.03);
    assert!(r.steady.p99_us.is_some_and(|p| p <= 1_000.0), "{:?}", r.steady.p99_us);
}

/// The polarized pair's mix flips from 20:80 to 80:20 and back every 1.5 s (Pyxis Fig. 9's
/// kind): each change is seen in the request mix and placed again from the functions'
/// costs, without a profile (one at the start only), the R loop fed forward by the
/// capacities' ratio and its memory disproved once the old capacity keeps failing.
#[test]
fn a_changed_mix_is_placed_again_once() {
    let a = "task:accesses=4,size=49152,compute=50ns";
    let b = "task:accesses=1,size=64,compute=50us";
    let workload = format!("phases:period=1500ms;{a}@0.2+{b}@0.8;{a}@0.8+{b}@0.2");
    let mut s = Scenario::paper(
        parse_workload(&workload).unwrap(),
        parse_policy("balance").unwrap(),
        Nanos::from_ms(4_500),
        1,
    );
    s.cluster = cluster();
    s.slo = slo();
    let r = s.run().unwrap();
    let bound = |mix: &str| {
        let mut cfg = SweepConfig::new(cluster(), parse_workload(mix).unwrap(), slo(), 1);
        cfg.axis = Axis::TurningPoint;
        cfg.threads = 2;
        sweep::sweep(&cfg, &sweep::x_grid(0.1)).unwrap().best_throughput_ops
    };
    let bounds = [bound(&format!("{a}@0.2+{b}@0.8")), bound(&format!("{a}@0.8+{b}@0.2"))];
    assert_eq!(r.searches, Some(1), "one profile at the start, none per change");
    assert_eq!(r.phases.len(), 3);
    for p in &r.phases[1..] {
        eprintln!("{p:?} vs {:.0}", bounds[p.phase]);
        assert!(p.throughput_ops >= 0.9 * bounds[p.phase], "{p:?}");
        assert!(p.converge_ms.is_some_and(|c| c <= 1_500.0), "{p:?}");
    }
}

/// Pyxis' slowdown SLO (§VI): each function's p99 at most K times its service time, at least
/// 5 µs. On the polarized pair at K = 10, A (12.7 µs unloaded, remote) gets 127 µs and B
/// (62 µs, local) 620 µs; the report judges each by its own. Measured (seed 1, 2 s):
/// `balance` 45k with the worse function at 1.02× its SLO (the loop before this one: 312k
/// with A at 1.34×): the R loop judges the pooled completions, so a function with a fifth
/// of the requests can still miss its own by a little.
#[test]
fn a_slowdown_slo_judges_each_function_by_its_own_service_time() {
    let mut s = Scenario::paper(
        parse_workload(POLARIZED).unwrap(),
        parse_policy("balance").unwrap(),
        Nanos::from_secs(2),
        1,
    );
    s.cluster = cluster();
    s.workload.set_slowdown_slo(&s.cluster, 10.0);
    let slos: Vec<f64> = s
        .workload
        .functions
        .iter()
        .map(|f| f.slo.unwrap().as_us_f64())
        .collect();
    assert!(
        (120.0..135.0).contains(&slos[0]) && (600.0..640.0).contains(&slos[1]),
        "{slos:?}"
    );
    s.slo = Slo::p99(s.workload.functions[0].slo.unwrap());
    let r = s.run().unwrap();
    assert_eq!(r.functions.len(), 2);
    let worst = r
        .functions
        .iter()
        .map(|t| t.p99_us.unwrap() / t.slo_us)
        .fold(0.0, f64::max);
    assert_eq!(r.slo_ratio, Some(worst));
    eprintln!("slowdown: {:.0} ops/s, worst ratio {worst:.2}", r.steady.throughput_ops);
    assert!(worst <= 1.1, "{worst}");
    assert!(r.steady.throughput_ops > 30e3, "{}", r.steady.throughput_ops);
}
