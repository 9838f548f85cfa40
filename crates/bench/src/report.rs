//! Reports a person opens: timelines and sweeps as self-contained HTML with SVG charts,
//! drawn with the simulator's plotting code so real and simulated runs look alike.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ferry_experiment::plot::{Chart, Figure, Series, Style};
use ferry_experiment::timeline::TimelineRow;

use crate::placement::PlacementReport;
use crate::BenchError;

/// The timeline as CSV: the simulator's format.
pub use ferry_experiment::timeline::timeline_csv;

/// Throughput, p99 (against the SLO) and X over time.
pub fn timeline_figure(title: &str, rows: &[TimelineRow], slo_us: f64) -> Figure {
    let seconds = |row: &TimelineRow| row.t_ms / 1e3;
    let throughput = Chart {
        title: format!("{title}: goodput and admitted rate"),
        x_label: "time (s)".into(),
        y_label: "requests/s".into(),
        series: vec![
            Series::new(
                "goodput",
                rows.iter().map(|r| (seconds(r), r.throughput_ops)).collect(),
                Style::Line,
            ),
            Series::new(
                "rate R",
                rows.iter().map(|r| (seconds(r), r.rate_ops)).collect(),
                Style::Dashed,
            ),
        ],
        ..Chart::default()
    };
    let latency = Chart {
        title: "p99 latency per interval".into(),
        x_label: "time (s)".into(),
        y_label: "µs".into(),
        series: vec![Series::new(
            "p99",
            rows.iter().filter_map(|r| Some((seconds(r), r.p99_us?))).collect(),
            Style::Line,
        )],
        hlines: vec![(slo_us, "SLO".into())],
        ..Chart::default()
    };
    let fraction = Chart {
        title: "RPC fraction".into(),
        x_label: "time (s)".into(),
        y_label: "X".into(),
        series: vec![
            Series::new(
                "X (policy)",
                rows.iter().map(|r| (seconds(r), r.rpc_fraction)).collect(),
                Style::Line,
            ),
            Series::new(
                "share run remotely",
                rows.iter()
                    .filter_map(|r| Some((seconds(r), r.remote_share?)))
                    .collect(),
                Style::Points,
            ),
        ],
        y_range: Some((0.0, 1.0)),
        ..Chart::default()
    };
    Figure::new(vec![throughput, latency, fraction])
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A self-contained HTML page: a title, key/value facts, and figures.
pub fn html_page(title: &str, facts: &[(String, String)], figures: &[(String, String)]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title>\n\
         <style>body{{font-family:Helvetica,Arial,sans-serif;margin:2em;max-width:1000px}}\
         table{{border-collapse:collapse}}td,th{{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left}}</style>\n\
         </head><body>\n<h1>{t}</h1>\n<table>\n",
        t = escape(title)
    );
    for (key, value) in facts {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(key), escape(value));
    }
    out.push_str("</table>\n");
    for (heading, svg) in figures {
        let _ = write!(out, "<h2>{}</h2>\n{svg}\n", escape(heading));
    }
    out.push_str("</body></html>\n");
    out
}

/// Writes `name` into `dir` (created if needed); returns its path.
pub fn write_into(dir: &Path, name: &str, text: &str) -> Result<PathBuf, BenchError> {
    std::fs::create_dir_all(dir).map_err(|err| BenchError::Io(format!("cannot create {}: {err}", dir.display())))?;
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|err| BenchError::Io(format!("cannot write {}: {err}", path.display())))?;
    Ok(path)
}

fn opt(value: Option<f64>, unit: &str) -> String {
    value.map_or("-".into(), |v| format!("{v:.0} {unit}"))
}

/// Facts of a bench report, for its page.
pub fn bench_facts(report: &PlacementReport) -> Vec<(String, String)> {
    vec![
        ("policy".into(), report.steady.policy.clone()),
        ("workload".into(), report.steady.workload.clone()),
        (
            "SLO".into(),
            format!(
                "p{:.0} ≤ {:.0} µs",
                report.steady.slo_quantile * 100.0,
                report.steady.slo_p99_us
            ),
        ),
        (
            "goodput (steady)".into(),
            format!("{:.0} ops/s", report.steady.throughput_ops),
        ),
        (
            "p50 / p99 (steady)".into(),
            format!(
                "{} / {}",
                opt(report.steady.latency_us_p50, "µs"),
                opt(report.steady.p99_us, "µs")
            ),
        ),
        (
            "final X / R".into(),
            format!(
                "{:.3} / {:.0} ops/s",
                report.steady.rpc_fraction, report.steady.rate_ops
            ),
        ),
        ("converged after".into(), opt(report.steady.converge_ms, "ms")),
        (
            "CPU used (node / app)".into(),
            format!(
                "{} / {}",
                report.storage_cpus_used.map_or("-".into(), |c| format!("{c:.2}")),
                report.app_cpus_used.map_or("-".into(), |c| format!("{c:.2}"))
            ),
        ),
        (
            "pinning (node / app)".into(),
            format!("{:?} / {:?}", report.server_cpus, report.client_cpus),
        ),
    ]
}

/// Writes `report.html` for one `ferry bench` run; returns its path.
pub fn write_bench_report(dir: &Path, report: &PlacementReport) -> Result<PathBuf, BenchError> {
    let title = format!("ferry bench: {} on {}", report.steady.policy, report.steady.workload);
    let figure = timeline_figure(&report.steady.policy, &report.timeline, report.steady.slo_p99_us);
    let page = html_page(&title, &bench_facts(report), &[("Timeline".into(), figure.to_svg())]);
    write_into(dir, "report.html", &page)
}

/// Goodput against X for a sweep, with policies' operating points (name, X, goodput).
pub fn sweep_figure(sweep: &crate::sweep::SweepReport, marks: &[(String, f64, f64)]) -> Figure {
    let mut series = vec![Series::new(
        "sweep: best goodput within the SLO",
        sweep
            .rows
            .iter()
            .map(|row| (row.rpc_fraction, row.throughput_ops))
            .collect(),
        Style::LinePoints,
    )];
    for (name, x, throughput) in marks {
        series.push(Series::new(name.clone(), vec![(*x, *throughput)], Style::Points));
    }
    Figure::new(vec![Chart {
        title: format!("{}: goodput at p99 ≤ {:.0} µs", sweep.workload, sweep.slo_p99_us),
        x_label: "RPC fraction X".into(),
        y_label: "requests/s".into(),
        series,
        x_range: Some((0.0, 1.0)),
        vlines: vec![(sweep.best_rpc_fraction, "best X".into())],
        ..Chart::default()
    }])
}

/// Writes `sweep.html` for a sweep and the marked operating points; returns its path.
pub fn write_sweep_report(
    dir: &Path,
    sweep: &crate::sweep::SweepReport,
    marks: &[(String, f64, f64)],
) -> Result<PathBuf, BenchError> {
    let mut facts = vec![
        ("workload".into(), sweep.workload.clone()),
        ("SLO".into(), format!("p99 ≤ {:.0} µs", sweep.slo_p99_us)),
        (
            "best".into(),
            format!(
                "{:.0} ops/s at X = {:.2}",
                sweep.best_throughput_ops, sweep.best_rpc_fraction
            ),
        ),
        (
            "pinning (node / app)".into(),
            format!("{:?} / {:?}", sweep.server_cpus, sweep.client_cpus),
        ),
    ];
    for (name, x, throughput) in marks {
        facts.push((name.clone(), format!("{throughput:.0} ops/s at X = {x:.2}")));
    }
    let figure = sweep_figure(sweep, marks);
    let page = html_page(
        &format!("ferry sweep: {}", sweep.workload),
        &facts,
        &[("Goodput against X".into(), figure.to_svg())],
    );
    write_into(dir, "sweep.html", &page)
}
