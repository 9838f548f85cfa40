//! The progress line `ferry bench` draws on a terminal while a drive runs.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use ferry_client::{Adaptive, Backend};

use super::recording::Recording;

/// How often the progress line is refreshed.
const PROGRESS_PERIOD: Duration = Duration::from_millis(250);

/// Redraws a one-line progress bar with goodput, p99, X and R.
pub(super) async fn show_progress<B: Backend>(
    adaptive: Arc<Adaptive<B>>,
    recording: Arc<Mutex<Recording>>,
    start: Instant,
    duration: Duration,
    enabled: bool,
) {
    if !enabled {
        return;
    }
    /// Characters of the bar.
    const WIDTH: usize = 30;
    let mut last_completed = 0u64;
    let mut last = Instant::now();
    loop {
        tokio::time::sleep(PROGRESS_PERIOD).await;
        let elapsed = start.elapsed();
        let done = ((elapsed.as_secs_f64() / duration.as_secs_f64()).min(1.0) * WIDTH as f64) as usize;
        let (completed, p99_us) = {
            let recording = recording.lock();
            let p99 = recording
                .bins
                .iter()
                .rev()
                .find(|bin| bin.completed > 0)
                .and_then(|bin| bin.sketch.quantile(0.99))
                .map_or(0.0, |ns| ns / 1e3);
            (recording.completed, p99)
        };
        let rate = (completed - last_completed) as f64 / last.elapsed().as_secs_f64();
        last_completed = completed;
        last = Instant::now();
        let state = adaptive.state();
        eprint!(
            "\r[{}{}] {:5.1}s  goodput {:>8.0}/s  p99 {:>8.0} µs  X {:.2}  R {:>8.0}/s ",
            "=".repeat(done),
            " ".repeat(WIDTH - done),
            elapsed.as_secs_f64(),
            rate,
            p99_us,
            state.rpc_fraction,
            state.rate_ops
        );
        let _ = std::io::stderr().flush();
    }
}
