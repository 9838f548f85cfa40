//! The exposition: a process's samples and latency histograms as typed metric families,
//! encoded by the Prometheus client library (OpenMetrics text; a counter's samples end
//! in `_total`).
//!
//! Each scrape builds a registry of two collectors over values read at that moment: the
//! samples (one family per scope and name, typed as the sample says) and a snapshot of
//! the latency histograms.

use std::collections::BTreeMap;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::sample::{Kind, Sample};
use crate::histogram::{HistogramSeries, LatencyHistograms};

/// The OpenMetrics text of `samples` and, given `(prefix, histograms)`, of the families
/// `{prefix}_request_latency_us` (a histogram by `op` and `status`) and
/// `{prefix}_requests` (their counts).
pub fn exposition(samples: Vec<Sample>, latency: Option<(&'static str, &LatencyHistograms)>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Samples(samples)));
    if let Some((prefix, histograms)) = latency {
        registry.register_collector(Box::new(Latency {
            prefix,
            series: histograms.snapshot(),
        }));
    }
    let mut text = String::new();
    // Writing into a String cannot fail, and neither can encoding these values.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

#[derive(Debug)]
struct Samples(Vec<Sample>);

impl Collector for Samples {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Family → (its kind, its help: the name `stats` reports it by, its series: label
        // and value), in name order.
        type Series = Vec<(Option<(&'static str, String)>, u64)>;
        let mut families: BTreeMap<String, (Kind, String, Series)> = BTreeMap::new();
        for sample in &self.0 {
            let (family, label) = sample.family();
            families
                .entry(family)
                .or_insert_with(|| (sample.kind, format!("stats: {}", sample.stat_pattern()), Vec::new()))
                .2
                .push((label, sample.value));
        }
        for (family, (kind, help, series)) in &families {
            let metric_type = match kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
            };
            let mut metric = encoder.encode_descriptor(family, help, None, metric_type)?;
            for (label, value) in series {
                match label {
                    None => encode_value(&mut metric, *kind, *value)?,
                    Some((key, id)) => {
                        let labels = [(*key, id.as_str())];
                        encode_value(&mut metric.encode_family(&labels)?, *kind, *value)?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn encode_value(metric: &mut MetricEncoder, kind: Kind, value: u64) -> Result<(), std::fmt::Error> {
    match kind {
        Kind::Counter => metric.encode_counter::<NoLabelSet, u64, u64>(&value, None),
        Kind::Gauge => metric.encode_gauge(&value),
    }
}

#[derive(Debug)]
struct Latency {
    prefix: &'static str,
    series: Vec<HistogramSeries>,
}

impl Collector for Latency {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let latency = format!("{}_request_latency_us", self.prefix);
        let help = "time from a request's decoding to its answer, µs, by operation and status";
        let mut metric = encoder.encode_descriptor(&latency, help, None, MetricType::Histogram)?;
        for series in &self.series {
            let labels = [("op", series.op), ("status", series.status)];
            metric.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                series.sum_us as f64,
                series.count,
                &series.buckets,
                None,
            )?;
        }
        let requests = format!("{}_requests", self.prefix);
        let help = "requests answered, by operation and status";
        let mut metric = encoder.encode_descriptor(&requests, help, None, MetricType::Counter)?;
        for series in &self.series {
            let labels = [("op", series.op), ("status", series.status)];
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, u64, u64>(&series.count, None)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Scope;
    use ferry_proto::{Opcode, Status};

    #[test]
    fn samples_become_typed_labelled_families() {
        let text = exposition(
            vec![
                Sample::counter(Scope::Tenant(ferry_proto::TenantId(1)), "requests", 5),
                Sample::counter(Scope::Tenant(ferry_proto::TenantId(2)), "requests", 7),
                Sample::gauge(Scope::Process("gateway"), "active_workers", 3),
                Sample::counter(Scope::Function("chaos.ops".into()), "calls", 4),
            ],
            None,
        );
        assert!(text.contains("# TYPE ferry_tenant_requests counter\n"), "{text}");
        assert!(text.contains("ferry_tenant_requests_total{tenant=\"1\"} 5\n"), "{text}");
        assert!(text.contains("ferry_tenant_requests_total{tenant=\"2\"} 7\n"), "{text}");
        assert!(text.contains("# TYPE ferry_gateway_active_workers gauge\n"), "{text}");
        assert!(text.contains("\nferry_gateway_active_workers 3\n"), "{text}");
        assert!(
            text.contains("ferry_function_calls_total{function=\"chaos.ops\"} 4\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn latency_histograms_become_one_histogram_family_and_its_counts() {
        let histograms = LatencyHistograms::default();
        histograms.observe(Opcode::Get, Status::Ok, 70);
        histograms.observe(Opcode::Get, Status::Ok, 2_000_000);
        let text = exposition(Vec::new(), Some(("ferry_node", &histograms)));
        assert!(
            text.contains("# TYPE ferry_node_request_latency_us histogram\n"),
            "{text}"
        );
        assert!(
            text.contains("ferry_node_request_latency_us_bucket{le=\"50.0\",op=\"get\",status=\"ok\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("ferry_node_request_latency_us_bucket{le=\"100.0\",op=\"get\",status=\"ok\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("ferry_node_request_latency_us_bucket{le=\"+Inf\",op=\"get\",status=\"ok\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("ferry_node_request_latency_us_count{op=\"get\",status=\"ok\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("ferry_node_requests_total{op=\"get\",status=\"ok\"} 2\n"),
            "{text}"
        );
        assert!(
            !text.contains("op=\"put\""),
            "series with no request are left out: {text}"
        );
    }
}
