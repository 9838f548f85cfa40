//! What both figure programs share: a timeline series from a report, and writing an SVG.

use std::path::Path;

use ferry_experiment::plot::{Figure, Series, Style};
use ferry_experiment::TimelineRow;
use ferry_sim::SimReport;

/// A line over the report's timeline: `f` of each row against its time in ms.
pub fn timeline(name: &str, r: &SimReport, f: impl Fn(&TimelineRow) -> f64) -> Series {
    Series::new(name, r.timeline.iter().map(|t| (t.t_ms, f(t))).collect(), Style::Line)
}

/// Writes the figure to `dir/name` and says so.
pub fn save(dir: &Path, name: &str, fig: Figure) {
    let path = dir.join(name);
    std::fs::write(&path, fig.to_svg()).expect("write svg");
    println!("wrote {}", path.display());
}
