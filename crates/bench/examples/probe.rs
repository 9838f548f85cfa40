//! Diagnostic: one fixed-X, fixed-rate probe against a pinned child node, printing the
//! latency percentiles. `cargo run --release -p ferry-bench --example probe -- X RATE SECONDS [WORKLOAD]`

use std::sync::Arc;
use std::time::Duration;

use ferry_bench::placement::{drive, DriveSpec};
use ferry_bench::testbed::{NodeSite, Testbed, TestbedConfig};
use ferry_bench::workload_data::load_for_workload;
use ferry_client::Adaptive;
use ferry_control::FixedRate;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let x: f64 = args[1].parse().unwrap();
    let rate: f64 = args[2].parse().unwrap();
    let seconds: f64 = args[3].parse().unwrap();
    let workload = ferry_experiment::spec::parse_workload(args.get(4).map_or("medium", String::as_str)).unwrap();
    let exe = std::path::PathBuf::from(std::env::var("FERRY_EXE").unwrap_or("target/release/ferry".into()));
    let testbed = Testbed::start(&TestbedConfig {
        exe,
        node: NodeSite::Child,
        tenant: ferry_proto::TenantId(1),
        token: "ferry".into(),
        server_cpus: vec![0],
        client_cpus: vec![1],
        server_cores: 1,
        server_flags: std::env::var("FERRY_SERVER_FLAGS")
            .map(|f| f.split_whitespace().map(String::from).collect())
            .unwrap_or_default(),
        connections: 1,
        keep_warm: false,
    })
    .unwrap();
    testbed.runtime.block_on(async {
        let client = testbed.connect().await.unwrap();
        load_for_workload(&client, &workload, 100_000, 1).await.unwrap();
        let adaptive = Arc::new(Adaptive::new(client, Box::new(FixedRate::new(x, rate, 1).unwrap())).unwrap());
        let spec = DriveSpec {
            workload: &workload,
            graph_nodes: 100_000,
            seed: 1,
            duration: Duration::from_secs_f64(seconds),
            steady_start: Duration::from_millis(200),
            interval: Duration::from_millis(100),
            quantile: 0.99,
            slo: Duration::from_millis(5),
            progress: false,
        };
        let drive = drive(&adaptive, &spec).await.unwrap();
        let latency = drive.steady_latency();
        println!(
            "X {x} rate {rate}: completed {} p50 {:.0} p99 {:.0} p99.9 {:.0} max {:.0} µs, errors {}, dropped {}",
            latency.count,
            latency.p50_us,
            latency.p99_us,
            latency.p999_us,
            latency.max_us,
            drive.errors(),
            drive.dropped
        );
    });
}
