//! `ferry sweep`: the measured upper bound. For each fixed RPC fraction X, the highest
//! admitted rate whose p99 meets the SLO, found by bracketing and bisection; the best X is
//! what any adaptive policy is judged against.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use ferry_client::Adaptive;
use ferry_control::FixedRate;
use ferry_datasets::load_for_workload;
use ferry_experiment::model::Workload;

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
    /// Highest admitted rate that met the SLO (0 if none did).
    pub rate_ops: f64,
    /// Goodput measured at that rate.
    pub throughput_ops: f64,
    /// p99 measured at that rate.
    pub p99_us: Option<f64>,
    /// Probes run for this X.
    pub probes: u32,
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
                "X = {:.2}: {:.0} ops/s at p99 {} µs ({} probes)",
                x,
                row.throughput_ops,
                row.p99_us.map_or("-".into(), |p| format!("{p:.0}")),
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

/// The highest rate meeting the SLO at `x`: bracket around `guess` by doubling or halving,
/// then bisect.
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
        let result = probe(client, config, x, rate).await?;
        probes += 1;
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
            let result = probe(client, config, x, mid).await?;
            probes += 1;
            if result.meets {
                low = mid;
                best = Some((mid, result));
            } else {
                high = mid;
            }
        }
    }
    Ok(match best {
        Some((rate_ops, probe)) => SweepRow {
            rpc_fraction: x,
            rate_ops,
            throughput_ops: probe.throughput_ops,
            p99_us: probe.p99_us,
            probes,
        },
        None => SweepRow {
            rpc_fraction: x,
            rate_ops: 0.0,
            throughput_ops: 0.0,
            p99_us: None,
            probes,
        },
    })
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
}
