//! Diagnostic: sequential invocations with a fixed pause, no policy or pacer, printing the
//! latency percentiles. `cargo run --release -p ferry-bench --example plain -- local|remote PAUSE_US N`

use std::time::{Duration, Instant};

use ferry_bench::testbed::{NodeSite, Testbed, TestbedConfig};
use ferry_func::builtins::traverse::TraverseArgs;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let local = args[1] == "local";
    let pause_us: u64 = args[2].parse().unwrap();
    let n: usize = args[3].parse().unwrap();
    let testbed = Testbed::start(&TestbedConfig {
        exe: "target/release/ferry".into(),
        node: NodeSite::Child,
        tenant: ferry_proto::TenantId(1),
        token: "ferry".into(),
        server_cpus: vec![0],
        client_cpus: vec![1],
        server_cores: 1,
        server_flags: vec![],
        connections: 1,
        keep_warm: false,
    })
    .unwrap();
    testbed.runtime.block_on(async {
        let client = testbed.connect().await.unwrap();
        let workload = ferry_experiment::spec::parse_workload("medium").unwrap();
        ferry_bench::workload_data::load_for_workload(&client, &workload, 100_000, 1)
            .await
            .unwrap();
        let mut lat = Vec::with_capacity(n);
        for i in 0..n as u64 {
            let args = TraverseArgs {
                start: i % 100_000,
                depth: 2,
                compute_ns: 1000,
            }
            .encode();
            let t = Instant::now();
            if local {
                client.invoke_local("traverse", args).await.unwrap();
            } else {
                client.invoke_remote("traverse", args).await.unwrap();
            }
            lat.push(t.elapsed().as_nanos() as u64);
            if pause_us > 0 {
                let until = Instant::now() + Duration::from_micros(pause_us);
                while Instant::now() < until {
                    tokio::task::yield_now().await;
                }
            }
        }
        lat.sort();
        let q = |p: f64| lat[((lat.len() as f64) * p) as usize] as f64 / 1e3;
        println!(
            "{} pause {pause_us} µs: p50 {:.0} p90 {:.0} p99 {:.0} p99.9 {:.0} max {:.0} µs",
            args[1],
            q(0.5),
            q(0.9),
            q(0.99),
            q(0.999),
            *lat.last().unwrap() as f64 / 1e3
        );
    });
}
