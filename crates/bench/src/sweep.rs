//! `ferry sweep`: the measured upper bound. For each fixed RPC fraction X, the highest
//! admitted rate whose p99 meets the SLO, found by bracketing and bisection; the best X is
//! what any adaptive policy is judged against.
//!
//! A bound is only worth the runs behind it: one VM stall fails a probe at any rate, and a
//! search that believed it stopped far under the machine (807 ops/s in one sitting, 6 in
//! another, on the same workload). So a rate fails only when [`FAILURES_TO_FAIL`] probes
//! in a row fail at it, and the rate each X settles on is probed [`CONFIRMATIONS`] times
//! more: the row's goodput is the median of those probes, one over the SLO counting 0
//! (the rule every real run is judged by), with their spread beside it. Where that median
//! is 0 (the search's meeting probe was the lucky one), the rate is lowered by
//! [`BACKOFF`] and confirmed again.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::workload_data::load_for_workload;
use ferry_client::Adaptive;
use ferry_control::FixedRate;
use ferry_experiment::model::Workload;

use crate::latency::median;
use crate::placement::{drive, DriveSpec};
use crate::testbed::{Testbed, TestbedConfig};
use crate::BenchError;

/// Most rate doublings while bracketing: from the start rate that is a factor of 4096.
const MAX_DOUBLINGS: u32 = 12;

/// Smallest X step accepted (at most 101 points).
pub const MIN_STEP: f64 = 0.01;

/// A probe meets the SLO only if it also completed nearly everything it admitted: a node
/// that silently falls behind must not look fast.
const MIN_COMPLETED_SHARE: f64 = 0.95;

/// Probes in a row that must fail at a rate before it counts as failed.
pub const FAILURES_TO_FAIL: u32 = 2;

/// Probes of each X's rate after the search, for its median and spread.
pub const CONFIRMATIONS: u32 = 2;

/// Where the confirmations' median is over the SLO (the search's meeting probe was the
/// lucky one), the rate is lowered by this and confirmed again, at most
/// [`BACKOFFS_MAX`] times.
pub const BACKOFF: f64 = 0.8;

/// Most times a rate is lowered after its confirmations: 0.8⁴ ≈ 0.4 of what the search found.
pub const BACKOFFS_MAX: u32 = 4;

/// Settings of one sweep.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    /// Where the two sides run.
    pub testbed: TestbedConfig,
    /// What to run.
    pub workload: Workload,
    /// Latency objective.
    pub slo: Duration,
    /// Quantile it constrains.
    pub quantile: f64,
    /// The X values measured, in order (e.g. [`fractions`] of a step).
    pub fractions: Vec<f64>,
    /// Unmeasured start of each probe.
    pub warmup: Duration,
    /// Measured part of each probe.
    pub probe: Duration,
    /// Bisection steps after bracketing.
    pub bisection_steps: u32,
    /// First rate tried at the first X.
    pub start_rate_ops: f64,
    /// Seed.
    pub seed: u64,
    /// Graph nodes loaded.
    pub graph_nodes: u64,
}

/// One X of the sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    /// The fixed RPC fraction.
    pub rpc_fraction: f64,
    /// Highest admitted rate that met the SLO and its confirmations (0 if none did).
    pub rate_ops: f64,
    /// Median goodput of the probes at that rate (one over the SLO counts 0).
    pub throughput_ops: f64,
    /// Lowest goodput of those probes.
    pub throughput_ops_min: f64,
    /// Highest goodput of those probes.
    pub throughput_ops_max: f64,
    /// Median p99 of those probes.
    pub p99_us: Option<f64>,
    /// Highest p99 of those probes.
    pub p99_us_max: Option<f64>,
    /// Probes run for this X.
    pub probes: u32,
}

impl SweepRow {
    /// The row of an X whose probes at `rate_ops` measured `results`.
    fn of(x: f64, rate_ops: f64, results: &[Probe], probes: u32) -> SweepRow {
        let mut goodputs: Vec<f64> = results
            .iter()
            .map(|p| if p.meets { p.throughput_ops } else { 0.0 })
            .collect();
        let mut p99s: Vec<f64> = results.iter().filter_map(|p| p.p99_us).collect();
        goodputs.sort_by(f64::total_cmp);
        p99s.sort_by(f64::total_cmp);
        SweepRow {
            rpc_fraction: x,
            rate_ops,
            throughput_ops: median(&mut goodputs),
            throughput_ops_min: goodputs.first().copied().unwrap_or(0.0),
            throughput_ops_max: goodputs.last().copied().unwrap_or(0.0),
            p99_us: (!p99s.is_empty()).then(|| median(&mut p99s)),
            p99_us_max: p99s.last().copied(),
            probes,
        }
    }
}

/// The sweep's result.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    /// Workload spec.
    pub workload: String,
    /// The SLO latency.
    pub slo_p99_us: f64,
    /// Rows by X.
    pub rows: Vec<SweepRow>,
    /// The best goodput of any X.
    pub best_throughput_ops: f64,
    /// The X that achieved it.
    pub best_rpc_fraction: f64,
    /// CPUs of the node.
    pub server_cpus: Vec<usize>,
    /// CPUs of the app side.
    pub client_cpus: Vec<usize>,
}

/// What one probe measured.
#[derive(Clone, Copy, Debug)]
struct Probe {
    meets: bool,
    throughput_ops: f64,
    p99_us: Option<f64>,
}

/// Most X values one sweep measures: a step of [`MIN_STEP`] gives this many.
pub const FRACTIONS_MAX: usize = 101;

/// The X values of a sweep: 0, step, 2·step, ..., 1; an error for a step outside
/// [[`MIN_STEP`], 1].
pub fn fractions(step: f64) -> Result<Vec<f64>, BenchError> {
    if !(MIN_STEP..=1.0).contains(&step) {
        return Err(BenchError::Invalid(format!("the X step must be in [{MIN_STEP}, 1]")));
    }
    let points = (1.0 / step).round() as usize;
    Ok((0..=points).map(|i| (i as f64 * step).min(1.0)).collect())
}

/// Runs the sweep; `progress` gets one line per X.
pub fn run(config: &SweepConfig, mut progress: impl FnMut(&str)) -> Result<SweepReport, BenchError> {
    if config.fractions.is_empty()
        || config.fractions.len() > FRACTIONS_MAX
        || config.fractions.iter().any(|x| !(0.0..=1.0).contains(x))
    {
        return Err(BenchError::Invalid(format!(
            "the X values must be 1 to {FRACTIONS_MAX} numbers in [0, 1]"
        )));
    }
    if config.probe.is_zero() || config.slo.is_zero() || config.start_rate_ops <= 0.0 {
        return Err(BenchError::Invalid("probe, SLO and start rate must be positive".into()));
    }
    let testbed = Testbed::start(&config.testbed)?;
    testbed.runtime.block_on(async {
        let client = testbed.connect().await?;
        load_for_workload(&client, &config.workload, config.graph_nodes, config.seed).await?;
        let mut rows = Vec::new();
        let mut guess = config.start_rate_ops;
        for &x in &config.fractions {
            let row = search(&client, config, x, guess).await?;
            progress(&format!(
                "X = {:.2}: {:.0} ops/s ({:.0}–{:.0}) at p99 {} µs (max {}) ({} probes)",
                x,
                row.throughput_ops,
                row.throughput_ops_min,
                row.throughput_ops_max,
                row.p99_us.map_or("-".into(), |p| format!("{p:.0}")),
                row.p99_us_max.map_or("-".into(), |p| format!("{p:.0}")),
                row.probes
            ));
            if row.rate_ops > 0.0 {
                guess = row.rate_ops;
            }
            rows.push(row);
        }
        let best = rows
            .iter()
            .max_by(|a, b| a.throughput_ops.total_cmp(&b.throughput_ops))
            .cloned()
            .expect("at least one X");
        Ok(SweepReport {
            workload: config.workload.label.clone(),
            slo_p99_us: config.slo.as_secs_f64() * 1e6,
            best_throughput_ops: best.throughput_ops,
            best_rpc_fraction: best.rpc_fraction,
            rows,
            server_cpus: testbed.server_cpus(),
            client_cpus: config.testbed.client_cpus.clone(),
        })
    })
}

async fn probe(
    client: &ferry_client::Client,
    config: &SweepConfig,
    x: f64,
    rate_ops: f64,
) -> Result<Probe, BenchError> {
    let policy = FixedRate::new(x, rate_ops, config.seed).map_err(|err| BenchError::Invalid(err.to_string()))?;
    let adaptive = Arc::new(Adaptive::new(client.clone(), Box::new(policy))?);
    let spec = DriveSpec {
        workload: &config.workload,
        graph_nodes: config.graph_nodes,
        seed: config.seed,
        duration: config.warmup + config.probe,
        steady_start: config.warmup,
        interval: config.probe,
        quantile: config.quantile,
        slo: config.slo,
        progress: false,
    };
    let drive = drive(&adaptive, &spec).await?;
    let latency = drive.steady_latency();
    let throughput_ops = drive.steady_completed() as f64 / config.probe.as_secs_f64();
    let p99_us = (latency.count > 0).then_some(latency.p99_us);
    let slo_us = config.slo.as_secs_f64() * 1e6;
    let meets = p99_us.is_some_and(|p99| p99 <= slo_us)
        && drive.errors() == 0
        && drive.dropped == 0
        && throughput_ops >= MIN_COMPLETED_SHARE * rate_ops;
    Ok(Probe {
        meets,
        throughput_ops,
        p99_us,
    })
}

/// Probes `rate` until one meets the SLO or [`FAILURES_TO_FAIL`] in a row do not; the
/// last probe and how many ran.
async fn judge(
    client: &ferry_client::Client,
    config: &SweepConfig,
    x: f64,
    rate_ops: f64,
) -> Result<(Probe, u32), BenchError> {
    let mut runs = 0;
    loop {
        let result = probe(client, config, x, rate_ops).await?;
        runs += 1;
        if result.meets || runs >= FAILURES_TO_FAIL {
            return Ok((result, runs));
        }
    }
}

/// The highest rate meeting the SLO at `x`: bracket around `guess` by doubling or halving,
/// then bisect, each rate judged by [`judge`]; then [`CONFIRMATIONS`] more probes of it.
async fn search(
    client: &ferry_client::Client,
    config: &SweepConfig,
    x: f64,
    guess: f64,
) -> Result<SweepRow, BenchError> {
    let mut probes = 0;
    let mut best: Option<(f64, Probe)> = None;
    let mut failed_at: Option<f64> = None;
    let mut rate = guess;
    for _ in 0..MAX_DOUBLINGS {
        let (result, runs) = judge(client, config, x, rate).await?;
        probes += runs;
        if result.meets {
            best = Some((rate, result));
            if failed_at.is_some() {
                break;
            }
            rate *= 2.0;
        } else {
            failed_at = Some(rate);
            if best.is_some() {
                break;
            }
            rate /= 2.0;
        }
    }
    if let (Some(mut low), Some(mut high)) = (best.as_ref().map(|(rate, _)| *rate), failed_at) {
        for _ in 0..config.bisection_steps {
            let mid = (low + high) / 2.0;
            let (result, runs) = judge(client, config, x, mid).await?;
            probes += runs;
            if result.meets {
                low = mid;
                best = Some((mid, result));
            } else {
                high = mid;
            }
        }
    }
    let Some((mut rate_ops, found)) = best else {
        return Ok(SweepRow::of(x, 0.0, &[], probes));
    };
    let mut results = vec![found];
    let mut backoffs = 0;
    loop {
        while results.len() < 1 + CONFIRMATIONS as usize {
            results.push(probe(client, config, x, rate_ops).await?);
            probes += 1;
        }
        let row = SweepRow::of(x, rate_ops, &results, probes);
        if row.throughput_ops > 0.0 || backoffs == BACKOFFS_MAX {
            return Ok(row);
        }
        backoffs += 1;
        rate_ops *= BACKOFF;
        results.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_cover_both_ends() {
        assert_eq!(fractions(0.5).unwrap(), vec![0.0, 0.5, 1.0]);
        let tenth = fractions(0.1).unwrap();
        assert_eq!(tenth.len(), 11);
        assert_eq!(*tenth.last().unwrap(), 1.0);
        assert!(fractions(0.001).is_err() && fractions(1.5).is_err());
    }

    fn probe(meets: bool, throughput_ops: f64, p99_us: f64) -> Probe {
        Probe {
            meets,
            throughput_ops,
            p99_us: Some(p99_us),
        }
    }

    #[test]
    fn a_row_is_the_median_of_its_probes_one_over_the_slo_counting_zero() {
        // One stalled confirmation does not move the bound; two of three do.
        let one_bad = [
            probe(true, 900.0, 3e3),
            probe(false, 880.0, 9e3),
            probe(true, 950.0, 4e3),
        ];
        let row = SweepRow::of(0.5, 1_000.0, &one_bad, 7);
        assert_eq!(
            (row.throughput_ops, row.throughput_ops_min, row.throughput_ops_max),
            (900.0, 0.0, 950.0)
        );
        assert_eq!((row.p99_us, row.p99_us_max), (Some(4e3), Some(9e3)));
        let two_bad = [
            probe(true, 900.0, 3e3),
            probe(false, 880.0, 9e3),
            probe(false, 950.0, 8e3),
        ];
        assert_eq!(SweepRow::of(0.5, 1_000.0, &two_bad, 7).throughput_ops, 0.0);
        let none = SweepRow::of(0.5, 0.0, &[], 3);
        assert_eq!((none.throughput_ops, none.p99_us), (0.0, None));
    }
}
