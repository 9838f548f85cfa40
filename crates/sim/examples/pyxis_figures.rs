//! Regenerates the Pyxis plots and numbers of docs/SIMULATION.md ("Mixed workloads" and
//! "The cluster"):
//!
//! ```text
//! cargo run --release -p ferry-sim --example pyxis_figures -- docs/sim
//! ```
//!
//! Seeded throughout, so the SVGs and `pyxis.json` come out byte-identical on every run.
//! About 10 minutes on 2 cores (Table III's 12 cells are most of it).

use std::path::PathBuf;

mod common;
use common::{save, timeline};

use ferry_control::Nanos;
use ferry_experiment::model::Sharding;
use ferry_experiment::plot::{Chart, Figure, Series, Style};
use ferry_experiment::scaling::parse_demand;
use ferry_experiment::{parse_workload, ClusterModel};
use ferry_sim::sweep::{self, Axis, SweepConfig};
use ferry_sim::{Scenario, SimReport, Slo};
use ferry_spec::parse_policy;
use serde_json::json;

const SEED: u64 = 1;
const A: &str = "task:accesses=4,size=49152,compute=50ns";
const B: &str = "task:accesses=1,size=64,compute=50us";
const SLO: Nanos = Nanos::from_ms(1);
const POLICIES: [&str; 3] = ["balance", "pyxis", "kayak"];

fn cores(app_nodes: u32, app_cores: u32, storage_nodes: u32, storage_cores: u32) -> ClusterModel {
    ClusterModel {
        app_nodes,
        app_cores,
        storage_nodes,
        storage_cores,
        ..ClusterModel::default()
    }
}

fn run(cluster: &ClusterModel, workload: &str, policy: &str, duration: Nanos, interval: Nanos) -> SimReport {
    let mut s = Scenario::paper(
        parse_workload(workload).expect("valid workload"),
        parse_policy(policy).expect("valid policy"),
        duration,
        SEED,
    );
    s.cluster = cluster.clone();
    s.slo = Slo::p99(SLO);
    s.timeline_interval = interval;
    s.run().expect("valid scenario")
}

/// α (X) step of the two-task bounds: their optimum sits at a slice's edge, on the grid.
const PAIR_STEP: f64 = 0.05;
/// α step of the many-task bounds: with links that fill, throughput along α has a narrow
/// peak between the link-bound and the CPU-bound side, which a 0.05 grid missed by up to
/// 16 % (16 tasks: 851k at 0.05, 1010k at 0.01).
const TASKS_STEP: f64 = 0.01;

/// The best throughput of a sweep along `axis` at α (X) steps of `step`.
fn bound(cluster: &ClusterModel, workload: &str, axis: Axis, step: f64, threads: usize) -> (f64, f64) {
    let mut cfg = SweepConfig::new(
        cluster.clone(),
        parse_workload(workload).expect("valid"),
        Slo::p99(SLO),
        SEED,
    );
    cfg.axis = axis;
    cfg.threads = threads;
    let r = sweep::sweep(&cfg, &sweep::x_grid(step)).expect("valid sweep");
    (r.best_throughput_ops, r.best_rpc_fraction)
}

fn line(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series::new(name, points, Style::Line)
}

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "docs/sim".into()));
    std::fs::create_dir_all(&dir).expect("create output dir");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut numbers = serde_json::Map::new();
    let second = Nanos::from_secs(1);
    let tick = Nanos::from_ms(50);

    // Table III / Fig. 10: the polarized pair, 4 storage cores, C:S 4:1 to 32:1.
    let mut panels = Vec::new();
    let mut cells = Vec::new();
    for (wa, wb) in [(0.2, 0.8), (0.5, 0.5), (0.8, 0.2)] {
        let workload = format!("{A}@{wa}+{B}@{wb}");
        let mut lines: Vec<(String, Vec<(f64, f64)>)> = ["turning-point bound", "one-X bound"]
            .iter()
            .chain(POLICIES.iter())
            .map(|n| (n.to_string(), Vec::new()))
            .collect();
        for app in [16, 32, 64, 128] {
            let cl = cores(1, app, 1, 4);
            let ratio = f64::from(app / 4);
            let (tp, alpha) = bound(&cl, &workload, Axis::TurningPoint, PAIR_STEP, threads);
            let (one, x) = bound(&cl, &workload, Axis::Fraction, PAIR_STEP, threads);
            lines[0].1.push((ratio, tp / 1e6));
            lines[1].1.push((ratio, one / 1e6));
            let mut runs = serde_json::Map::new();
            for (i, p) in POLICIES.iter().enumerate() {
                let r = run(&cl, &workload, p, Nanos::from_secs(3), Nanos::from_ms(10));
                lines[2 + i].1.push((ratio, r.steady.throughput_ops / 1e6));
                runs.insert(
                    p.to_string(),
                    json!({"throughput_ops": r.steady.throughput_ops, "gap": r.steady.throughput_ops / tp - 1.0,
                           "p99_us": r.steady.p99_us, "converge_ms": r.steady.converge_ms}),
                );
            }
            cells.push(
                json!({"mix": format!("{wa}:{wb}"), "cs": ratio, "turning_point_ops": tp, "alpha": alpha,
                              "one_x_ops": one, "x": x, "runs": runs}),
            );
        }
        let series = lines.into_iter().map(|(n, p)| line(&n, p)).collect();
        panels.push(Chart::new(
            &format!("A:B = {}:{}, 4 storage cores", wa * 100.0, wb * 100.0),
            "C:S (app cores per storage core)",
            "Mops (p99 <= 1 ms)",
            series,
        ));
    }
    numbers.insert("table3".into(), json!(cells));
    save(&dir, "p_table3.svg", Figure::new(panels));

    // Fig. 9: a mix that flips 20:80 -> 80:20 -> 20:80 every 1.5 s, 16 + 4 cores.
    let phases = format!("phases:period=1500ms;{A}@0.2+{B}@0.8;{A}@0.8+{B}@0.2");
    let cl = cores(1, 16, 1, 4);
    let runs: Vec<(&str, SimReport)> = POLICIES
        .iter()
        .map(|p| (*p, run(&cl, &phases, p, Nanos::from_ms(4_500), tick)))
        .collect();
    numbers.insert(
        "phases".into(),
        json!(runs
            .iter()
            .map(|(p, r)| json!({"policy": p, "phases": r.phases}))
            .collect::<Vec<_>>()),
    );
    save(
        &dir,
        "p_phases.svg",
        Figure::new(vec![
            Chart::new(
                "mix 20:80, 80:20, 20:80: throughput",
                "time (ms)",
                "Mops",
                runs.iter()
                    .map(|(p, r)| timeline(p, r, |t| t.throughput_ops / 1e6))
                    .collect(),
            ),
            Chart::new(
                "share sent remote",
                "time (ms)",
                "remote share",
                runs.iter()
                    .map(|(p, r)| timeline(p, r, |t| t.remote_share.unwrap_or(0.0)))
                    .collect(),
            ),
        ]),
    );

    // Fig. 11: 4, 8 and 16 random tasks, 16 + 4 cores.
    let mut by_n: Vec<(String, Vec<(f64, f64)>)> = ["turning-point bound"]
        .iter()
        .chain(POLICIES.iter())
        .map(|n| (n.to_string(), Vec::new()))
        .collect();
    let mut tasks = Vec::new();
    let mut convergence = Vec::new();
    for n in [4, 8, 16] {
        let w = format!("random-tasks:n={n},seed=1");
        let (tp, _) = bound(&cl, &w, Axis::TurningPoint, TASKS_STEP, threads);
        by_n[0].1.push((n as f64, tp / 1e6));
        let mut row = json!({"tasks": n, "turning_point_ops": tp});
        for (i, p) in POLICIES.iter().enumerate() {
            let r = run(&cl, &w, p, Nanos::from_secs(3), Nanos::from_ms(10));
            by_n[1 + i].1.push((n as f64, r.steady.throughput_ops / 1e6));
            if *p == "pyxis" {
                convergence.push(timeline(&format!("{n} tasks"), &r, |t| t.throughput_ops / 1e6));
            }
            row[*p] = json!({"throughput_ops": r.steady.throughput_ops, "converge_ms": r.steady.converge_ms, "p99_us": r.steady.p99_us});
        }
        tasks.push(row);
    }
    numbers.insert("tasks".into(), json!(tasks));
    save(
        &dir,
        "p_tasks.svg",
        Figure::new(vec![Chart::new(
            "random tasks, 16 + 4 cores",
            "tasks",
            "Mops (p99 <= 1 ms)",
            by_n.into_iter().map(|(n, p)| line(&n, p)).collect(),
        )]),
    );

    // Fig. 8: pyxis converging on 4, 8 and 16 tasks.
    save(
        &dir,
        "p_convergence.svg",
        Figure::new(vec![Chart::new(
            "pyxis on random tasks, 16 + 4 cores",
            "time (ms)",
            "Mops",
            convergence,
        )]),
    );

    // Fig. 7: R(alpha) on the 20:80 pair, 16 + 4 cores, and the (x_A, x_B) grid's best.
    let pair = format!("{A}@0.2+{B}@0.8");
    let mut cfg = SweepConfig::new(cl.clone(), parse_workload(&pair).expect("valid"), Slo::p99(SLO), SEED);
    cfg.axis = Axis::TurningPoint;
    cfg.threads = threads;
    let r_alpha = sweep::sweep(&cfg, &sweep::x_grid(PAIR_STEP)).expect("valid sweep");
    cfg.axis = Axis::Fraction;
    let grid = sweep::grid(&cfg, 0.125).expect("valid grid");
    numbers.insert(
        "r_alpha".into(),
        json!({"rows": r_alpha.rows.iter().map(|r| json!([r.rpc_fraction, r.throughput_ops])).collect::<Vec<_>>(),
               "grid_best_ops": grid.best_throughput_ops, "grid_best": [grid.best_x_a, grid.best_x_b]}),
    );
    let mut c = Chart::new(
        "R(alpha), A:B = 20:80, 16 + 4 cores",
        "alpha (share sent remote)",
        "Mops (p99 <= 1 ms)",
        vec![line(
            "R(alpha)",
            r_alpha
                .rows
                .iter()
                .map(|r| (r.rpc_fraction, r.throughput_ops / 1e6))
                .collect(),
        )],
    );
    c.hlines = vec![(grid.best_throughput_ops / 1e6, "best of the (x_A, x_B) grid".into())];
    save(&dir, "p_r_alpha.svg", Figure::new(vec![c]));

    // Fig. 16: pyxis from alpha0 in {0, 0.5, 1}, and with M in {3, 5, 7, 9} from 0.
    let half = format!("{A}@0.5+{B}@0.5");
    let mut starts = Vec::new();
    let mut start_lines = Vec::new();
    for a0 in [0.0, 0.5, 1.0] {
        let r = run(&cl, &half, &format!("pyxis:alpha0={a0}"), Nanos::from_secs(3), tick);
        starts.push(
            json!({"alpha0": a0, "throughput_ops": r.steady.throughput_ops, "converge_ms": r.steady.converge_ms}),
        );
        start_lines.push(timeline(&format!("alpha0 = {a0}"), &r, |t| {
            t.remote_share.unwrap_or(0.0)
        }));
    }
    let mut m_lines = Vec::new();
    for m in [3, 5, 7, 9] {
        let r = run(&cl, &half, &format!("pyxis:alpha0=0,m={m}"), Nanos::from_secs(3), tick);
        starts.push(json!({"alpha0": 0.0, "m": m, "throughput_ops": r.steady.throughput_ops, "converge_ms": r.steady.converge_ms}));
        m_lines.push(timeline(&format!("M = {m}"), &r, |t| t.remote_share.unwrap_or(0.0)));
    }
    numbers.insert("starts".into(), json!(starts));
    save(
        &dir,
        "p_starts.svg",
        Figure::new(vec![
            Chart::new(
                "pyxis, A:B = 50:50: from three starts",
                "time (ms)",
                "remote share",
                start_lines,
            ),
            Chart::new(
                "pyxis from alpha0 = 0 with M segments",
                "time (ms)",
                "remote share",
                m_lines,
            ),
        ]),
    );

    // Fig. 13: scaling out, the 50:50 pair, 8-core nodes.
    let mut scale = Vec::new();
    let mut scale_lines = Vec::new();
    for storage_nodes in [1, 2, 4] {
        let mut points = Vec::new();
        for app_nodes in [4, 8, 16, 32] {
            let r = run(
                &cores(app_nodes, 8, storage_nodes, 8),
                &format!("{A}@0.5+{B}@0.5"),
                "balance",
                second,
                Nanos::from_ms(10),
            );
            points.push((f64::from(app_nodes), r.steady.throughput_ops / 1e6));
            scale.push(
                json!({"storage_nodes": storage_nodes, "app_nodes": app_nodes, "throughput_ops": r.steady.throughput_ops}),
            );
        }
        scale_lines.push(line(&format!("{storage_nodes} storage nodes"), points));
    }
    numbers.insert("scale".into(), json!(scale));
    save(
        &dir,
        "p_scale.svg",
        Figure::new(vec![Chart::new(
            "balance, A:B = 50:50, 8 cores per node",
            "app nodes",
            "Mops (p99 <= 1 ms)",
            scale_lines,
        )]),
    );

    // Fig. 14: elastic compute, 16 app nodes and one storage node, demand stepping up.
    let mut elastic = cores(16, 8, 1, 8);
    elastic.elastic = Some((8, 128));
    let mut s = Scenario::paper(
        parse_workload(&format!("{A}@0.2+{B}@0.8")).expect("valid"),
        parse_policy("balance").expect("valid"),
        Nanos::from_secs(8),
        SEED,
    );
    s.cluster = elastic;
    s.slo = Slo::p99(SLO);
    s.timeline_interval = tick;
    let demand = parse_demand("700k,1.4M,2.1M,2.8M@2s").expect("valid demand");
    s.workload.demand = Some(demand.clone());
    let r = s.run().expect("valid scenario");
    let demand_line = line(
        "demand",
        r.timeline
            .iter()
            .map(|t| (t.t_ms, demand.at(Nanos::from_ms(t.t_ms as u64 - 1)) / 1e6))
            .collect(),
    );
    numbers.insert(
        "elastic".into(),
        json!(r
            .timeline
            .iter()
            .map(|t| json!([t.t_ms, t.throughput_ops, t.app_cores, t.p99_us]))
            .collect::<Vec<_>>()),
    );
    save(
        &dir,
        "p_elastic.svg",
        Figure::new(vec![
            Chart::new(
                "elastic compute: throughput against demand",
                "time (ms)",
                "Mops",
                vec![timeline("balance", &r, |t| t.throughput_ops / 1e6), demand_line],
            ),
            Chart::new(
                "app cores in use",
                "time (ms)",
                "cores",
                vec![timeline("app cores", &r, |t| t.app_cores.unwrap_or(0) as f64)],
            ),
        ]),
    );

    // Fig. 15: skew over 4 storage nodes, 1, 2 and 4 placement groups.
    let workload = format!("{A}@0.25+{A}@0.25+{B}@0.25+{B}@0.25");
    let mut groups = Vec::new();
    let mut group_points = Vec::new();
    for g in [1, 2, 4] {
        let cl = ClusterModel {
            sharding: Sharding::Staircase,
            placement_groups: g,
            ..cores(4, 8, 4, 8)
        };
        let r = run(&cl, &workload, "balance", Nanos::from_secs(2), Nanos::from_ms(10));
        group_points.push((f64::from(g), r.steady.throughput_ops / 1e6));
        groups.push(json!({"groups": g, "throughput_ops": r.steady.throughput_ops, "group_x": r.group_rpc_fractions}));
    }
    numbers.insert("groups".into(), json!(groups));
    save(
        &dir,
        "p_groups.svg",
        Figure::new(vec![Chart::new(
            "skew (function i on the first i + 1 of 4 storage nodes)",
            "placement groups",
            "Mops (p99 <= 1 ms)",
            vec![line("balance", group_points)],
        )]),
    );

    let path = dir.join("pyxis.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&serde_json::Value::Object(numbers)).expect("json") + "\n",
    )
    .expect("write numbers");
    println!("wrote {}", path.display());
}
