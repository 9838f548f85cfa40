//! Regenerates the plots and numbers of docs/SIMULATION.md:
//!
//! ```text
//! cargo run --release -p ferry-sim --example figures -- docs/sim
//! ```
//!
//! Everything is seeded, so the SVGs and `figures.json` come out byte-identical on every run.

use std::path::{Path, PathBuf};

use ferry_control::Nanos;
use ferry_sim::plot::{Chart, Figure, Series, Style};
use ferry_sim::sweep::{self, SweepConfig, SweepReport};
use ferry_sim::{parse_policy, parse_workload, Arrivals, ClusterConfig, Scenario, SimReport, Slo};
use serde_json::json;

/// Seed of every run.
const SEED: u64 = 1;
/// X step of the figure sweeps (the CLI's default is 0.02; 0.05 keeps this under a minute).
const X_STEP: f64 = 0.05;
/// SLOs of the throughput-vs-SLO panels.
const SLOS_US: [u64; 4] = [100, 200, 400, 800];
const WORKLOADS: [&str; 3] = ["light", "medium", "heavy"];

fn sweep_at(workload: &str, slo_us: u64, threads: usize) -> SweepReport {
    let mut cfg = SweepConfig::new(
        ClusterConfig::default(),
        parse_workload(workload).expect("preset"),
        Slo::p99(Nanos::from_us(slo_us)),
        SEED,
    );
    cfg.threads = threads;
    sweep::sweep(&cfg, &sweep::x_grid(X_STEP)).expect("valid sweep")
}

fn run(workload: &str, policy: &str, duration: Nanos) -> SimReport {
    Scenario {
        cluster: ClusterConfig::default(),
        workload: parse_workload(workload).expect("valid workload"),
        policy: parse_policy(policy).expect("valid policy"),
        slo: Slo::p99(Nanos::from_us(200)),
        duration,
        seed: SEED,
        arrivals: Arrivals::Poisson,
        timeline_interval: Nanos::from_ms(10),
    }
    .run()
    .expect("valid scenario")
}

fn series(name: &str, r: &SimReport, f: impl Fn(&ferry_sim::scenario::TimelineRow) -> f64) -> Series {
    Series::new(name, r.timeline.iter().map(|t| (t.t_ms, f(t))).collect(), Style::Line)
}

fn save(dir: &Path, name: &str, fig: Figure) {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, fig.to_svg()).expect("write svg");
    println!("wrote {}", path.display());
}

fn chart(title: &str, x: &str, y: &str, series: Vec<Series>) -> Chart {
    Chart {
        title: title.into(),
        x_label: x.into(),
        y_label: y.into(),
        series,
        ..Chart::default()
    }
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
        by_slo.push(chart(
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
    let mut panels = vec![chart(
        "Throughput at p99 <= 200 us vs RPC fraction X (8+8 cores, 10 us RTT)",
        "X (fraction of requests run remotely)",
        "Mops",
        rx,
    )];
    let mut bx_chart = chart("Best X vs SLO (Kayak Fig. 5)", "p99 SLO (us)", "best X", best_x);
    bx_chart.y_range = Some((0.0, 1.05));
    panels.push(bx_chart);
    panels.extend(by_slo);
    save(&dir, "a_sweep.svg", Figure::new(panels));

    // (b) Fast loop alone (X = 1) and the dual loop, per workload.
    let mut thr_panels = Vec::new();
    let mut x_series = Vec::new();
    for w in WORKLOADS {
        let best = numbers[&format!("sweep_{w}_200us")]["best_throughput_ops"]
            .as_f64()
            .unwrap_or(1.0);
        let fast = run(w, "rpc", Nanos::from_secs(2));
        let dual = run(w, "kayak", Nanos::from_secs(2));
        numbers.insert(
            format!("fast_{w}"),
            json!({"throughput_ops": fast.throughput_ops, "converge_ms": fast.converge_ms, "p99_us": fast.p99_us}),
        );
        numbers.insert(
            format!("dual_{w}"),
            json!({"throughput_ops": dual.throughput_ops, "converge_ms": dual.converge_ms,
                   "rpc_fraction_mean": dual.rpc_fraction_mean, "p99_us": dual.p99_us,
                   "gap_to_sweep": dual.throughput_ops / best - 1.0}),
        );
        let mut c = chart(
            &format!("{w}: throughput (fast loop at X=1, and dual loop)"),
            "time (ms)",
            "Mops",
            vec![
                series("R loop only, X = 1", &fast, |t| t.throughput_ops / 1e6),
                series("kayak (R-X)", &dual, |t| t.throughput_ops / 1e6),
            ],
        );
        c.hlines = vec![(best / 1e6, "sweep optimum".into())];
        thr_panels.push(c);
        x_series.push(series(&format!("{w}: X"), &dual, |t| t.rpc_fraction));
    }
    let mut xc = chart("Dual loop: RPC fraction X", "time (ms)", "X", x_series);
    xc.y_range = Some((0.0, 1.05));
    thr_panels.push(xc);
    save(&dir, "b_convergence.svg", Figure::new(thr_panels));

    // (c) Bimodal medium/light, 5 s phases.
    let bi = run("bimodal:a=medium,b=light,period=5s", "kayak", Nanos::from_secs(15));
    numbers.insert(
        "bimodal".into(),
        json!(bi
            .phases
            .iter()
            .map(|p| json!({"phase": p.functions, "start_ms": p.start_ms,
            "throughput_ops": p.throughput_ops, "rpc_fraction": p.rpc_fraction, "converge_ms": p.converge_ms}))
            .collect::<Vec<_>>()),
    );
    let switches: Vec<(f64, String)> = [5_000.0, 10_000.0].iter().map(|&t| (t, "switch".to_string())).collect();
    let mut c1 = chart(
        "Bimodal (medium 5 s / light 5 s): throughput",
        "time (ms)",
        "Mops",
        vec![series("kayak", &bi, |t| t.throughput_ops / 1e6)],
    );
    c1.vlines = switches.clone();
    let mut c2 = chart(
        "Bimodal: X",
        "time (ms)",
        "X",
        vec![series("kayak", &bi, |t| t.rpc_fraction)],
    );
    c2.vlines = switches;
    c2.y_range = Some((0.0, 1.05));
    save(&dir, "c_bimodal.svg", Figure::new(vec![c1, c2]));

    // (d) X-R vs R-X ordering on heavy.
    let rx_run = run("heavy", "kayak", Nanos::from_secs(3));
    let xr_run = run("heavy", "kayak-xr", Nanos::from_secs(3));
    numbers.insert(
        "ordering".into(),
        json!({"rx_throughput_ops": rx_run.throughput_ops, "xr_throughput_ops": xr_run.throughput_ops}),
    );
    let mut d2 = chart(
        "heavy: X",
        "time (ms)",
        "X",
        vec![
            series("R-X (kayak)", &rx_run, |t| t.rpc_fraction),
            series("X-R (kayak-xr)", &xr_run, |t| t.rpc_fraction),
        ],
    );
    d2.y_range = Some((0.0, 1.05));
    save(
        &dir,
        "d_ordering.svg",
        Figure::new(vec![
            chart(
                "heavy: throughput under the two loop orderings",
                "time (ms)",
                "Mops",
                vec![
                    series("R-X (kayak)", &rx_run, |t| t.throughput_ops / 1e6),
                    series("X-R (kayak-xr)", &xr_run, |t| t.throughput_ops / 1e6),
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
        starts.push(json!({"x0": x0, "throughput_ops": r.throughput_ops, "rpc_fraction_mean": r.rpc_fraction_mean, "converge_ms": r.converge_ms}));
        ex.push(series(&format!("x0 = {x0}"), &r, |t| t.rpc_fraction));
        et.push(series(&format!("x0 = {x0}"), &r, |t| t.throughput_ops / 1e6));
    }
    numbers.insert("starts".into(), json!(starts));
    let mut e1 = chart("heavy: X from four starting points", "time (ms)", "X", ex);
    e1.y_range = Some((0.0, 1.05));
    save(
        &dir,
        "e_starts.svg",
        Figure::new(vec![e1, chart("heavy: throughput", "time (ms)", "Mops", et)]),
    );

    let path = dir.join("figures.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&serde_json::Value::Object(numbers)).expect("json") + "\n",
    )
    .expect("write numbers");
    println!("wrote {}", path.display());
}
