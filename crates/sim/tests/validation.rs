//! The engine against closed-form queueing results, and its determinism.

use ferry_control::Nanos;
use ferry_experiment::model::{ClusterModel, ComputeDist, CostModel, FunctionSpec, Workload};
use ferry_experiment::parse_workload;
use ferry_sim::queueing::{md1_wait_s, mm1_wait_s, mmc_wait_s};
use ferry_sim::sweep::{measure, SweepConfig};
use ferry_sim::{Arrivals, Scenario, Slo};
use ferry_spec::parse_policy;

/// A bare queue: zero message costs, zero network, no stalls, `cores` storage cores serving
/// one job per request whose length is the function's compute (mean 1 µs).
fn bare_queue(cores: u32, dist: ComputeDist, seed: u64) -> SweepConfig {
    let cluster = ClusterModel {
        app_cores: 1,
        storage_cores: cores,
        rtt: Nanos::ZERO,
        bandwidth_gbps: f64::INFINITY,
        costs: CostModel {
            app_msg_ns: 0,
            app_invoke_ns: 0,
            storage_msg_ns: 0,
            storage_invoke_ns: 0,
            storage_get_ns: 0,
            header_bytes: 0,
            storage_compute_factor: 1.0,
            ..CostModel::default()
        },
        stall_rate_hz: 0.0,
        stall_mean: Nanos::ZERO,
        ..ClusterModel::default()
    };
    let mut f = FunctionSpec::traverse("job", 1, Nanos::from_us(1));
    f.dist = dist;
    f.object_bytes = 0;
    let mut cfg = SweepConfig::new(cluster, Workload::single("job", f), Slo::p99(Nanos::from_secs(1)), seed);
    cfg.warmup = Nanos::from_ms(20);
    cfg.measure = Nanos::from_ms(1_500);
    cfg
}

/// Relative error of the simulated mean storage wait against `expected_s`.
fn wait_error(cfg: &SweepConfig, rate_ops: f64, expected_s: f64) -> f64 {
    let m = measure(cfg, 1.0, rate_ops).unwrap();
    let got_s = m.storage_wait_us_mean.unwrap() * 1e-6;
    (got_s - expected_s).abs() / expected_s
}

/// Mean-wait tolerance the issue asks for.
const WAIT_TOLERANCE: f64 = 0.03;

#[test]
fn mm1_mean_wait_matches_closed_form() {
    // ρ = 0.6: W = 0.6 / (1e6 − 0.6e6) s = 1.5 µs.
    let cfg = bare_queue(1, ComputeDist::Exp, 11);
    let err = wait_error(&cfg, 600_000.0, mm1_wait_s(600_000.0, 1e6));
    assert!(err < WAIT_TOLERANCE, "M/M/1 mean wait off by {:.2} %", err * 100.0);
}

#[test]
fn md1_mean_wait_matches_closed_form() {
    // ρ = 0.6, deterministic 1 µs: W = 0.6 / (2 · 1e6 · 0.4) s = 0.75 µs.
    let cfg = bare_queue(1, ComputeDist::Fixed, 12);
    let err = wait_error(&cfg, 600_000.0, md1_wait_s(600_000.0, 1e6));
    assert!(err < WAIT_TOLERANCE, "M/D/1 mean wait off by {:.2} %", err * 100.0);
}

#[test]
fn mmc_mean_wait_matches_erlang_c() {
    // 8 cores at ρ = 0.8: the shared-queue FCFS multi-core node is M/M/8.
    let cfg = bare_queue(8, ComputeDist::Exp, 13);
    let err = wait_error(&cfg, 6_400_000.0, mmc_wait_s(8, 6_400_000.0, 1e6));
    assert!(err < WAIT_TOLERANCE, "M/M/8 mean wait off by {:.2} %", err * 100.0);
}

fn scenario(policy: &str, seed: u64) -> Scenario {
    Scenario {
        cluster: ClusterModel::default(),
        workload: parse_workload("heavy").unwrap(),
        policy: parse_policy(policy).unwrap(),
        slo: Slo::p99(Nanos::from_us(200)),
        duration: Nanos::from_ms(300),
        seed,
        arrivals: Arrivals::Poisson,
        timeline_interval: Nanos::from_ms(10),
    }
}

#[test]
fn same_seed_gives_byte_identical_output() {
    for policy in ["kayak", "kayak-xr", "fixed:0.4"] {
        let a = scenario(policy, 7).run().unwrap();
        let b = scenario(policy, 7).run().unwrap();
        assert_eq!(a.to_json(), b.to_json(), "{policy}");
        assert_eq!(a.timeline_csv(), b.timeline_csv(), "{policy}");
        // A different seed is a different run.
        let c = scenario(policy, 8).run().unwrap();
        assert_ne!(a.to_json(), c.to_json(), "{policy}");
    }
}

#[test]
fn paced_arrivals_hold_the_rate() {
    // The token-bucket (paced) mode admits exactly R per second: at a fixed low rate every
    // admitted request completes, so throughput equals the rate.
    let mut cfg = bare_queue(1, ComputeDist::Fixed, 3);
    cfg.arrivals = Arrivals::Paced;
    cfg.measure = Nanos::from_ms(100);
    let m = measure(&cfg, 1.0, 500_000.0).unwrap();
    assert!((m.throughput_ops - 500_000.0).abs() / 500_000.0 < 0.001, "{m:?}");
    // Evenly spaced 1 µs jobs every 2 µs never wait.
    assert!(m.storage_wait_us_mean.unwrap() < 1e-3, "{m:?}");
}
