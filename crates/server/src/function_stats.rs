//! Per-function statistics of one tenant on this node, for FUNCTION STATS: calls answered
//! here, how they ended (run here, failed, or handed back to the client), the node CPU
//! they cost (the function's s_i as this node sees it) and their latency from decoding to
//! answer.

use std::collections::HashMap;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

use ferry_proto::Status;

/// Functions tracked per tenant; calls of further ones are not tracked (the registry is
/// fixed but the `fcall.` family is open-ended, so the map needs a bound).
pub const MAX_TRACKED_FUNCTIONS: usize = 256;

/// Highest latency the histograms resolve, µs (longer calls are counted at this value).
const MAX_LATENCY_US: u64 = 60_000_000;

struct Entry {
    calls: u64,
    failed: u64,
    handed_back: u64,
    cpu_ns: u64,
    latency_us: Histogram<u64>,
}

/// One function's statistics.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FunctionSummary {
    pub(crate) name: String,
    /// Invocations answered by this node.
    pub(crate) calls: u64,
    /// Of those, failed (nothing committed).
    pub(crate) failed: u64,
    /// Of those, handed back to the client to finish (pushback or handoff): ran there.
    pub(crate) handed_back: u64,
    /// Mean node CPU per call, ns.
    pub(crate) cpu_ns_mean: u64,
    /// Latency quantiles on this node, µs.
    pub(crate) latency_us_p50: u64,
    pub(crate) latency_us_p99: u64,
}

/// A tenant's function statistics.
#[derive(Default)]
pub(crate) struct FunctionStats(Mutex<HashMap<String, Entry>>);

impl FunctionStats {
    /// Counts one answered invocation of `name`.
    pub(crate) fn record(&self, name: &str, status: Status, cpu_ns: u64, latency_us: u64) {
        let mut functions = self.0.lock();
        if !functions.contains_key(name) {
            if functions.len() >= MAX_TRACKED_FUNCTIONS {
                return;
            }
            let Ok(latency_us) = Histogram::new_with_max(MAX_LATENCY_US, 2) else {
                return;
            };
            let entry = Entry {
                calls: 0,
                failed: 0,
                handed_back: 0,
                cpu_ns: 0,
                latency_us,
            };
            functions.insert(name.to_string(), entry);
        }
        let Some(entry) = functions.get_mut(name) else { return };
        entry.calls += 1;
        entry.failed += u64::from(status != Status::Ok && status != Status::Pushback);
        entry.handed_back += u64::from(status == Status::Pushback);
        entry.cpu_ns += cpu_ns;
        entry.latency_us.saturating_record(latency_us.clamp(1, MAX_LATENCY_US));
    }

    /// The mean node CPU per call of `name`, ns, if any call of it was counted.
    pub(crate) fn cpu_ns_mean(&self, name: &str) -> Option<u64> {
        let functions = self.0.lock();
        let entry = functions.get(name)?;
        (entry.calls > 0).then(|| entry.cpu_ns / entry.calls)
    }

    /// Every tracked function whose name starts with `prefix`, sorted by name.
    pub(crate) fn summaries(&self, prefix: &str) -> Vec<FunctionSummary> {
        let functions = self.0.lock();
        let mut summaries: Vec<FunctionSummary> = functions
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(name, entry)| FunctionSummary {
                name: name.clone(),
                calls: entry.calls,
                failed: entry.failed,
                handed_back: entry.handed_back,
                cpu_ns_mean: entry.cpu_ns / entry.calls.max(1),
                latency_us_p50: entry.latency_us.value_at_quantile(0.5),
                latency_us_p99: entry.latency_us.value_at_quantile(0.99),
            })
            .collect();
        summaries.sort_by(|a, b| a.name.cmp(&b.name));
        summaries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_outcome_and_the_map_is_bounded() {
        let stats = FunctionStats::default();
        for latency_us in 1..=100 {
            stats.record("fcall.f", Status::Ok, 1_000, latency_us);
        }
        stats.record("fcall.f", Status::FunctionFailed, 0, 5);
        stats.record("fcall.f", Status::Pushback, 0, 5);
        stats.record("traverse", Status::Ok, 0, 5);
        let summaries = stats.summaries("fcall.");
        assert_eq!(summaries.len(), 1);
        let f = &summaries[0];
        assert_eq!((f.calls, f.failed, f.handed_back), (102, 1, 1));
        assert_eq!(f.cpu_ns_mean, 100_000 / 102);
        assert_eq!(stats.cpu_ns_mean("fcall.f"), Some(100_000 / 102));
        assert_eq!(stats.cpu_ns_mean("fcall.never"), None);
        assert!((49..=51).contains(&f.latency_us_p50), "{f:?}");
        assert!((98..=100).contains(&f.latency_us_p99), "{f:?}");
        for i in 0..2 * MAX_TRACKED_FUNCTIONS {
            stats.record(&format!("fcall.g{i}"), Status::Ok, 0, 1);
        }
        assert_eq!(stats.0.lock().len(), MAX_TRACKED_FUNCTIONS);
    }
}
