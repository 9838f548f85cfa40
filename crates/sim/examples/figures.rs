//! Regenerates the plots and numbers of docs/SIMULATION.md:
//!
//! ```text
//! cargo run --release -p ferry-sim --example figures -- docs/sim
//! ```
//!
//! Everything is seeded, so the SVGs and `figures.json` come out byte-identical on every run
//! (the bounds are computed on worker threads, each row by itself, so the thread count does
//! not change them).

use std::path::PathBuf;

mod common;
use common::{save, timeline};

use ferry_control::Nanos;
use ferry_experiment::plot::{Chart, Figure, Series, Style};
use ferry_experiment::{parse_workload, ClusterModel};
use ferry_sim::sweep::{self, SweepConfig, SweepReport};
use ferry_sim::{Scenario, SimReport, Slo, PAPER_SLO};
use ferry_spec::parse_policy;
use serde_json::json;

/// Seed of every run.
const SEED: u64 = 1;
/// X step of the figure sweeps (the CLI's default is 0.02; 0.05 keeps this under a minute).
const X_STEP: f64 = 0.05;
/// Steady window of the 2 s runs of (b) and (e): the last quarter, [1.5 s, 2 s].
const STEADY: (Nanos, Nanos) = (Nanos::from_ms(1_500), Nanos::from_ms(500));
/// X spacing of the same-window bound around the coarse optimum.
const BOUND_X_STEP: f64 = 0.05;
/// Grid steps either side of the coarse optimum the bound measures.
const BOUND_X_REACH: i32 = 2;
/// The bound bisects between these shares of the coarse rate at the same X...
const BOUND_BRACKET: (f64, f64) = (0.85, 1.1);
/// ...in this many steps (to 0.4 % of it).
const BOUND_BISECTION_STEPS: u32 = 6;
/// SLOs of the throughput-vs-SLO panels.
const SLOS_US: [u64; 4] = [100, 200, 400, 800];
const WORKLOADS: [&str; 3] = ["light", "medium", "heavy"];

fn sweep_at(workload: &str, slo_us: u64, threads: usize) -> SweepReport {
    let mut cfg = SweepConfig::new(
        ClusterModel::default(),
        parse_workload(workload).expect("preset"),
        Slo::p99(Nanos::from_us(slo_us)),
        SEED,
    );
    cfg.threads = threads;
    sweep::sweep(&cfg, &sweep::x_grid(X_STEP)).expect("valid sweep")
}

/// The upper bound judged by the same p99 as a policy run: for each X, the largest rate whose
/// p99 over the run's steady window `(from, span)` — same seed, hence the same node stalls —
/// meets the SLO, bisected around the coarse sweep's rate at that X.
fn window_bound(
    workload: &str,
    coarse: &SweepReport,
    xs: &[f64],
    window: (Nanos, Nanos),
    threads: usize,
) -> Vec<sweep::SweepRow> {
    let mut cfg = SweepConfig::new(
        ClusterModel::default(),
        parse_workload(workload).expect("preset"),
        Slo::p99(PAPER_SLO),
        SEED,
    );
    cfg.measure_from = Some(window.0);
    cfg.measure = window.1;
    cfg.bisection_steps = BOUND_BISECTION_STEPS;
    cfg.threads = threads;
    sweep::refine(&cfg, coarse, xs, BOUND_BRACKET).expect("valid sweep")
}

/// The X grid of a bound: ±BOUND_X_REACH steps around `best`, inside [0, 1].
fn grid_around(best: f64) -> Vec<f64> {
    (-BOUND_X_REACH..=BOUND_X_REACH)
        .map(|k| ((best + k as f64 * BOUND_X_STEP) * 100.0).round() / 100.0)
        .filter(|x| (0.0..=1.0).contains(x))
        .collect()
}

/// The best row of a bound.
fn best_row(rows: &[sweep::SweepRow]) -> &sweep::SweepRow {
    rows.iter()
        .max_by(|a, b| a.throughput_ops.total_cmp(&b.throughput_ops))
        .expect("bound rows")
}

fn run(workload: &str, policy: &str, duration: Nanos) -> SimReport {
    Scenario::paper(
        parse_workload(workload).expect("valid workload"),
        parse_policy(policy).expect("valid policy"),
        duration,
        SEED,
    )
    .run()
    .expect("valid scenario")
}

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "docs/sim".into()));
    std::fs::create_dir_all(&dir).expect("create output dir");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut numbers = serde_json::Map::new();

    // (a) R(X) at 200 µs, throughput and best X against the SLO.
    let mut rx = Vec::new();
    let mut by_slo = Vec::new();
    let mut best_x = Vec::new();
    let mut coarse = std::collections::BTreeMap::new();
    for w in WORKLOADS {
        let mut kv = Vec::new();
        let mut rpc = Vec::new();
        let mut best = Vec::new();
        let mut bx = Vec::new();
        for slo in SLOS_US {
            let s = sweep_at(w, slo, threads);
            let at = |x: f64| {
                s.rows
                    .iter()
                    .find(|r| (r.rpc_fraction - x).abs() < 1e-9)
                    .map_or(0.0, |r| r.throughput_ops / 1e6)
            };
            kv.push((slo as f64, at(0.0)));
            rpc.push((slo as f64, at(1.0)));
            best.push((slo as f64, s.best_throughput_ops / 1e6));
            bx.push((slo as f64, s.best_rpc_fraction));
            numbers.insert(
                format!("sweep_{w}_{slo}us"),
                json!({"best_throughput_ops": s.best_throughput_ops, "best_rpc_fraction": s.best_rpc_fraction,
                       "kv_ops": at(0.0) * 1e6, "rpc_ops": at(1.0) * 1e6}),
            );
            if slo == 200 {
                coarse.insert(w, s.clone());
                rx.push(Series::new(
                    w,
                    s.rows
                        .iter()
                        .map(|r| (r.rpc_fraction, r.throughput_ops / 1e6))
                        .collect(),
                    Style::LinePoints,
                ));
            }
        }
        by_slo.push(Chart::new(
            &format!("{w}: throughput at the SLO"),
            "p99 SLO (us)",
            "Mops",
            vec![
                Series::new("KV only (X=0)", kv, Style::LinePoints),
                Series::new("RPC only (X=1)", rpc, Style::LinePoints),
                Series::new("best X (upper bound)", best, Style::Dashed),
            ],
        ));
        best_x.push(Series::new(w, bx, Style::LinePoints));
    }
    let mut panels = vec![Chart::new(
        "Throughput at p99 <= 200 us vs RPC fraction X (8+8 cores, 10 us RTT)",
        "X (fraction of requests run remotely)",
        "Mops",
        rx,
    )];
    let mut bx_chart = Chart::new("Best X vs SLO (Kayak Fig. 5)", "p99 SLO (us)", "best X", best_x);
    bx_chart.y_range = Some((0.0, 1.05));
    panels.push(bx_chart);
    panels.extend(by_slo);
    save(&dir, "a_sweep.svg", Figure::new(panels));

    // (b) The R loop alone (X = 1), the default policy and the paper's dual loop, per
    // workload, against the bound on the runs' steady window.
    let mut thr_panels = Vec::new();
    let mut x_series = Vec::new();
    let mut bounds = std::collections::BTreeMap::new();
    for w in WORKLOADS {
        let c = &coarse[w];
        let mut xs = grid_around(c.best_rpc_fraction);
        let near_optimum = xs.clone();
        if !xs.contains(&1.0) {
            xs.push(1.0);
        }
        let rows = window_bound(w, c, &xs, STEADY, threads);
        let best = best_row(
            &rows
                .iter()
                .filter(|r| near_optimum.contains(&r.rpc_fraction))
                .cloned()
                .collect::<Vec<_>>(),
        )
        .clone();
        let at_one = rows
            .iter()
            .find(|r| r.rpc_fraction == 1.0)
            .map_or(0.0, |r| r.throughput_ops);
        numbers.insert(
            format!("bound_{w}"),
            json!({"best_throughput_ops": best.throughput_ops, "best_rpc_fraction": best.rpc_fraction,
                   "x1_throughput_ops": at_one,
                   "rows": rows.iter().map(|r| json!([r.rpc_fraction, r.throughput_ops])).collect::<Vec<_>>()}),
        );
        let fast = run(w, "rpc", Nanos::from_secs(2));
        let dual = run(w, "balance", Nanos::from_secs(2));
        let kayak = run(w, "kayak", Nanos::from_secs(2));
        numbers.insert(
            format!("kayak_{w}"),
            json!({"throughput_ops": kayak.steady.throughput_ops, "converge_ms": kayak.steady.converge_ms,
                   "rpc_fraction_mean": kayak.steady.rpc_fraction_mean, "p99_us": kayak.steady.p99_us,
                   "gap_to_bound": kayak.steady.throughput_ops / best.throughput_ops - 1.0}),
        );
        numbers.insert(
            format!("fast_{w}"),
            json!({"throughput_ops": fast.steady.throughput_ops, "converge_ms": fast.steady.converge_ms, "p99_us": fast.steady.p99_us,
                   "gap_to_bound": fast.steady.throughput_ops / at_one - 1.0}),
        );
        numbers.insert(
            format!("dual_{w}"),
            json!({"throughput_ops": dual.steady.throughput_ops, "converge_ms": dual.steady.converge_ms,
                   "rpc_fraction_mean": dual.steady.rpc_fraction_mean, "p99_us": dual.steady.p99_us,
                   "gap_to_bound": dual.steady.throughput_ops / best.throughput_ops - 1.0}),
        );
        let mut c = Chart::new(
            &format!("{w}: throughput (R loop alone at X = 1, balance, kayak)"),
            "time (ms)",
            "Mops",
            vec![
                timeline("R loop only, X = 1", &fast, |t| t.throughput_ops / 1e6),
                timeline("balance (default)", &dual, |t| t.throughput_ops / 1e6),
                timeline("kayak (paper, R-X)", &kayak, |t| t.throughput_ops / 1e6),
            ],
        );
        c.hlines = vec![
            (best.throughput_ops / 1e6, "bound (best X, same window)".into()),
            (at_one / 1e6, "bound at X = 1".into()),
        ];
        thr_panels.push(c);
        x_series.push(timeline(&format!("{w}: X"), &dual, |t| t.rpc_fraction));
        bounds.insert(w, best);
    }
    let mut xc = Chart::new("balance: RPC fraction X", "time (ms)", "X", x_series);
    xc.y_range = Some((0.0, 1.05));
    thr_panels.push(xc);
    save(&dir, "b_convergence.svg", Figure::new(thr_panels));

    // (c) Bimodal medium/light, 5 s phases.
    let bi = run("bimodal:a=medium,b=light,period=5s", "balance", Nanos::from_secs(15));
    numbers.insert(
        "bimodal".into(),
        json!(bi
            .phases
            .iter()
            .map(|p| json!({"phase": p.functions, "start_ms": p.start_ms,
            "throughput_ops": p.throughput_ops, "rpc_fraction": p.rpc_fraction, "converge_ms": p.converge_ms,
            "p99_us": p.p99_us}))
            .collect::<Vec<_>>()),
    );
    let switches: Vec<(f64, String)> = [5_000.0, 10_000.0].iter().map(|&t| (t, "switch".to_string())).collect();
    let mut c1 = Chart::new(
        "Bimodal (medium 5 s / light 5 s): throughput",
        "time (ms)",
        "Mops",
        vec![timeline("balance", &bi, |t| t.throughput_ops / 1e6)],
    );
    c1.vlines = switches.clone();
    c1.hlines = vec![
        (
            bounds["light"].throughput_ops / 1e6,
            "light bound (2 s runs' window)".into(),
        ),
        (
            bounds["medium"].throughput_ops / 1e6,
            "medium bound (2 s runs' window)".into(),
        ),
    ];
    let mut c2 = Chart::new(
        "Bimodal: X",
        "time (ms)",
        "X",
        vec![timeline("balance", &bi, |t| t.rpc_fraction)],
    );
    c2.vlines = switches;
    c2.y_range = Some((0.0, 1.05));
    save(&dir, "c_bimodal.svg", Figure::new(vec![c1, c2]));

    // (d) X-R vs R-X ordering on heavy.
    let rx_run = run("heavy", "kayak", Nanos::from_secs(3));
    let xr_run = run("heavy", "kayak-xr", Nanos::from_secs(3));
    let late = |r: &SimReport| {
        let rows: Vec<&ferry_experiment::timeline::TimelineRow> =
            r.timeline.iter().filter(|t| t.t_ms > 1000.0).collect();
        let xs: Vec<f64> = rows.iter().map(|t| t.rpc_fraction).collect();
        let thr: Vec<f64> = rows.iter().map(|t| t.throughput_ops).collect();
        let sd = |v: &[f64]| {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            (
                (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt(),
                m,
            )
        };
        let (x_sd, _) = sd(&xs);
        let (thr_sd, thr_mean) = sd(&thr);
        json!({"x_sd": x_sd, "throughput_cv": thr_sd / thr_mean, "throughput_ops": thr_mean})
    };
    numbers.insert(
        "ordering".into(),
        json!({"rx": late(&rx_run), "xr": late(&xr_run), "rx_p99_us": rx_run.steady.p99_us, "xr_p99_us": xr_run.steady.p99_us}),
    );
    let mut d2 = Chart::new(
        "heavy: X",
        "time (ms)",
        "X",
        vec![
            timeline("R-X (kayak)", &rx_run, |t| t.rpc_fraction),
            timeline("X-R (kayak-xr)", &xr_run, |t| t.rpc_fraction),
        ],
    );
    d2.y_range = Some((0.0, 1.05));
    save(
        &dir,
        "d_ordering.svg",
        Figure::new(vec![
            Chart::new(
                "heavy: throughput under the two loop orderings",
                "time (ms)",
                "Mops",
                vec![
                    timeline("R-X (kayak)", &rx_run, |t| t.throughput_ops / 1e6),
                    timeline("X-R (kayak-xr)", &xr_run, |t| t.throughput_ops / 1e6),
                ],
            ),
            d2,
        ]),
    );

    // (e) Start X in {0, 0.25, 0.75, 1} on heavy.
    let mut ex = Vec::new();
    let mut et = Vec::new();
    let mut starts = Vec::new();
    for x0 in [0.0, 0.25, 0.75, 1.0] {
        let r = run("heavy", &format!("kayak:x0={x0}"), Nanos::from_secs(2));
        starts.push(
            json!({"x0": x0, "throughput_ops": r.steady.throughput_ops, "rpc_fraction_mean": r.steady.rpc_fraction_mean,
                           "converge_ms": r.steady.converge_ms, "p99_us": r.steady.p99_us,
                           "gap_to_bound": r.steady.throughput_ops / bounds["heavy"].throughput_ops - 1.0}),
        );
        ex.push(timeline(&format!("x0 = {x0}"), &r, |t| t.rpc_fraction));
        et.push(timeline(&format!("x0 = {x0}"), &r, |t| t.throughput_ops / 1e6));
    }
    numbers.insert("starts".into(), json!(starts));
    let mut e1 = Chart::new("heavy: X from four starting points", "time (ms)", "X", ex);
    e1.y_range = Some((0.0, 1.05));
    e1.hlines = vec![(bounds["heavy"].rpc_fraction, "bound's best X".into())];
    let mut e2 = Chart::new("heavy: throughput", "time (ms)", "Mops", et);
    e2.hlines = vec![(bounds["heavy"].throughput_ops / 1e6, "bound (same window)".into())];
    save(&dir, "e_starts.svg", Figure::new(vec![e1, e2]));

    let path = dir.join("figures.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&serde_json::Value::Object(numbers)).expect("json") + "\n",
    )
    .expect("write numbers");
    println!("wrote {}", path.display());
}
