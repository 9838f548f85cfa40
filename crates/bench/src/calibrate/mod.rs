//! `ferry calibrate`: this machine's costs in the simulator's terms, written as a profile
//! (`ferry_experiment::profile`) that `ferry sim --profile` runs as.
//!
//! On the usual testbed (a storage node pinned to its CPUs, this process on the app's),
//! each operation is offered at one moderate fixed rate ([`pace`]) and each side's CPU time
//! per request is read from the kernel, less the idle baseline: small and large gets,
//! no-op invocations, remote traversals of two depths and one with compute, local
//! traversals of two depths. An unpipelined get gives the round trip, a steady stream of
//! gets the stall process ([`stalls`]). [`derive`] turns the figures into the model's
//! costs, each from the difference of two operations that differ only in what it prices.
//!
//! Layout: this file runs the phases; `pace` is the sleeping pacer the CPU phases use,
//! `stalls` the stall watch, `derive` the arithmetic (tested on its own), `table` the
//! printed table, `provenance` where and when.

pub mod derive;
pub mod pace;
mod provenance;
mod stall_gaps;
mod stalls;
mod table;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;

use ferry_client::{Client, ClientError};
use ferry_experiment::profile::Profile;
use ferry_func::args::mix64;
use ferry_func::builtins::{noop, traverse};

use crate::loadgen::closed_loop;
use crate::testbed::{Testbed, TestbedConfig};
use crate::BenchError;
use derive::{derive, Raw, Side};
use provenance::{hostname, human, utc_now};
use stalls::{StallsSeen, STALL_STREAM_RATE_OPS};

/// Bytes of the small objects: the traversal graph's default node size.
pub const SMALL_BYTES: usize = 64;

/// Bytes of the large objects: big enough that their bytes cost more than the message
/// around them (a few µs of copies), small enough to stay one message.
pub const LARGE_BYTES: usize = 16_384;

/// Bytes of each node of the traversals' graph.
pub const GRAPH_BYTES: usize = 64;

/// Objects in each get table: a working set that stays in cache, as a hot key range does.
const OBJECTS: u64 = 1_000;

/// Nodes of the traversals' graph.
const GRAPH_NODES: u64 = 10_000;

/// Table of the small objects.
const TABLE_SMALL: &str = "calibrate-small";

/// Table of the large objects.
const TABLE_LARGE: &str = "calibrate-large";

/// The two traversal depths whose difference prices one more access.
pub const DEPTHS: [u32; 2] = [1, 4];

/// Compute of the traversal that prices the storage side's compute: long against the
/// node's per-request noise (a few hundred ns), short enough to keep the node lightly
/// loaded at the phases' rate.
pub const COMPUTE: Duration = Duration::from_micros(20);

/// Default offered rate of the CPU phases: a tenth or less of either side's capacity on
/// the 1 + 1 loopback machine (~100 000 small requests a second), so nothing queues, and
/// ten thousand requests a second average out each request's noise.
pub const RATE_OPS_DEFAULT: f64 = 10_000.0;

/// Largest rate accepted for the CPU phases.
pub const RATE_OPS_MAX: f64 = 1e6;

/// How `--duration` is shared: ten phases of one share each (the idle baseline, eight
/// operations, the round trip) and the stall stream, which needs several seconds to see
/// a VM's few stalls a second, six.
const PHASES: f64 = 10.0;

/// The stall stream's shares of `--duration` (see [`PHASES`]).
const STALL_SHARES: f64 = 6.0;

/// The unmeasured start of each CPU phase, as a share of it: connections and caches warm.
const WARMUP_SHARE: f64 = 0.2;

/// Shortest `--duration`: each phase still holds a few hundred requests.
pub const DURATION_MIN: Duration = Duration::from_millis(500);

/// Longest `--duration`.
pub const DURATION_MAX: Duration = Duration::from_secs(3_600);

/// Settings of one calibration.
#[derive(Clone, Debug)]
pub struct CalibrateConfig {
    /// Where the two sides run (a child node: its CPU time must be readable).
    pub testbed: TestbedConfig,
    /// Total measuring time, shared out over the phases (see [`PHASES`]).
    pub duration: Duration,
    /// Offered rate of the CPU phases.
    pub rate_ops: f64,
}

/// What a calibration measured and the profile it makes.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// The measurements.
    pub raw: Raw,
    /// The stall stream's view.
    pub stalls: StallsSeen,
    /// The profile.
    pub profile: Profile,
    /// Rate of the CPU phases.
    pub rate_ops: f64,
    /// Length of each CPU phase.
    pub phase: Duration,
    /// Length of the stall stream.
    pub stall_window: Duration,
}

/// One operation a phase offers.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// A get from a table.
    Get(&'static str),
    /// A remote no-op invocation.
    Noop,
    /// A remote traversal.
    Remote { depth: u32, compute_ns: u64 },
    /// A local traversal.
    Local { depth: u32 },
}

type OpFuture = Pin<Box<dyn Future<Output = Result<(), ClientError>> + Send>>;

/// Request `i` of `op` against `client`.
fn request(client: &Client, op: Op) -> impl Fn(u64) -> OpFuture + Send + Sync + 'static {
    let client = client.clone();
    move |i| {
        let client = client.clone();
        match op {
            Op::Get(table) => Box::pin(async move {
                let key = (mix64(i) % OBJECTS).to_le_bytes();
                client.get(table, &key).await.map(|_| ())
            }),
            Op::Noop => Box::pin(async move { client.invoke_remote(noop::NAME, Bytes::new()).await.map(|_| ()) }),
            Op::Remote { depth, compute_ns } => Box::pin(async move {
                client
                    .invoke_remote(traverse::NAME, traversal(i, depth, compute_ns))
                    .await
                    .map(|_| ())
            }),
            Op::Local { depth } => Box::pin(async move {
                client
                    .invoke_local(traverse::NAME, traversal(i, depth, 0))
                    .await
                    .map(|_| ())
            }),
        }
    }
}

fn traversal(i: u64, depth: u32, compute_ns: u64) -> Bytes {
    traverse::TraverseArgs {
        start: mix64(i) % GRAPH_NODES,
        depth,
        compute_ns,
    }
    .encode()
}

/// Each side's CPU time so far: (app, node).
fn cpu_now(testbed: &Testbed) -> Result<(Duration, Duration), BenchError> {
    match (testbed.app_on_cpu_time(), testbed.node_on_cpu_time()) {
        (Some(app), Some(node)) => Ok((app, node)),
        _ => Err(BenchError::Calibration(
            "cannot read the CPU time of both sides from /proc (Linux only)".into(),
        )),
    }
}

/// Runs the phases; `progress` gets a line per phase.
pub fn run(config: &CalibrateConfig, mut progress: impl FnMut(&str)) -> Result<Calibration, BenchError> {
    if !(DURATION_MIN..=DURATION_MAX).contains(&config.duration) {
        return Err(BenchError::Invalid(format!(
            "the duration must be between {DURATION_MIN:?} and {DURATION_MAX:?}"
        )));
    }
    if !(config.rate_ops.is_finite() && config.rate_ops > 0.0 && config.rate_ops <= RATE_OPS_MAX) {
        return Err(BenchError::Invalid(format!(
            "the rate must be in (0, {RATE_OPS_MAX}] requests per second"
        )));
    }
    let share = config.duration.div_f64(PHASES + STALL_SHARES);
    let (phase, stall_window) = (share, share.mul_f64(STALL_SHARES));
    let testbed = Testbed::start(&config.testbed)?;
    progress(&format!("storage node at {}", testbed.addr));
    let rate = config.rate_ops;
    testbed.runtime.block_on(async {
        let client = testbed.connect().await?;
        for (table, bytes) in [(TABLE_SMALL, SMALL_BYTES), (TABLE_LARGE, LARGE_BYTES)] {
            let objects = (0..OBJECTS)
                .map(|id| {
                    (
                        Bytes::copy_from_slice(&id.to_le_bytes()),
                        Bytes::from(vec![0xAB; bytes]),
                    )
                })
                .collect();
            ferry_datasets::load_dataset(&client, table, objects).await?;
        }
        let graph = traverse::dataset(GRAPH_NODES, GRAPH_BYTES, 1).collect();
        ferry_datasets::load_dataset(&client, traverse::TABLE, graph).await?;
        progress(&format!(
            "loaded the data; {} per phase at {rate:.0} requests/s",
            human(phase)
        ));
        let (a0, n0) = cpu_now(&testbed)?;
        let idle = pace::paced(0.0, phase, |_| async { Ok::<(), ClientError>(()) }).await;
        let (a1, n1) = cpu_now(&testbed)?;
        let wall_s = idle.wall.as_secs_f64();
        let baseline = (
            (a1 - a0).as_nanos() as f64 / wall_s,
            (n1 - n0).as_nanos() as f64 / wall_s,
        );
        let side = |name: &'static str, op: Op| {
            let f = request(&client, op);
            let testbed = &testbed;
            async move {
                let side = measure(testbed, name, rate, phase, baseline, &f).await?;
                Ok::<Side, BenchError>(side)
            }
        };
        let get_small = side("64 B get", Op::Get(TABLE_SMALL)).await?;
        let get_large = side("16 KiB get", Op::Get(TABLE_LARGE)).await?;
        let noop = side("no-op invocation", Op::Noop).await?;
        let remote_at = |depth| Op::Remote { depth, compute_ns: 0 };
        let remote = [
            (DEPTHS[0], side("remote traversal", remote_at(DEPTHS[0])).await?),
            (DEPTHS[1], side("remote traversal", remote_at(DEPTHS[1])).await?),
        ];
        let compute_ns = COMPUTE.as_nanos() as u64;
        let with_compute = side(
            "remote traversal with compute",
            Op::Remote {
                depth: DEPTHS[0],
                compute_ns,
            },
        )
        .await?;
        let local = [
            (
                DEPTHS[0],
                side("local traversal", Op::Local { depth: DEPTHS[0] }).await?,
            ),
            (
                DEPTHS[1],
                side("local traversal", Op::Local { depth: DEPTHS[1] }).await?,
            ),
        ];
        progress("CPU phases done; the round trip");
        let single = closed_loop(1, phase, request(&client, Op::Get(TABLE_SMALL))).await;
        if !single.errors.is_empty() || single.completed == 0 {
            return Err(BenchError::Calibration(format!(
                "unpipelined gets failed: {:?}",
                single.errors
            )));
        }
        progress(&format!(
            "stalls: {STALL_STREAM_RATE_OPS:.0} gets/s for {}",
            human(stall_window)
        ));
        let stalls = stalls::watch(
            STALL_STREAM_RATE_OPS,
            stall_window,
            request(&client, Op::Get(TABLE_SMALL)),
        )
        .await;
        if stalls.failed > 0 {
            return Err(BenchError::Calibration(format!(
                "the stall stream lost {} of its requests",
                stalls.failed
            )));
        }
        let raw = Raw {
            small_bytes: SMALL_BYTES as u64,
            large_bytes: LARGE_BYTES as u64,
            graph_bytes: GRAPH_BYTES as u64,
            get_small,
            get_large,
            noop,
            remote,
            remote_compute: (compute_ns, with_compute),
            local,
            get_p50_ns: single.latency.p50_us * 1e3,
            stalls_seen_hz: stalls.rate_hz,
            stall_mean_ns: stalls.mean_ns,
            stall_length_cv: stalls.length_cv,
        };
        let measured_on = format!(
            "{}: storage node on CPUs {:?}, app side on CPUs {:?}, ferry {}",
            hostname(),
            testbed.server_cpus(),
            config.testbed.client_cpus,
            env!("CARGO_PKG_VERSION")
        );
        let profile = derive(&raw, measured_on, utc_now());
        profile
            .check()
            .map_err(|e| BenchError::Calibration(format!("the derived profile is out of range: {e}")))?;
        Ok(Calibration {
            raw,
            stalls,
            profile,
            rate_ops: rate,
            phase,
            stall_window,
        })
    })
}

/// One CPU phase: `op` at `rate` for `phase` (its first [`WARMUP_SHARE`] unmeasured), each
/// side's CPU per request less the idle `baseline` (ns per second of each side).
async fn measure<F, Fut>(
    testbed: &Testbed,
    name: &str,
    rate: f64,
    phase: Duration,
    baseline: (f64, f64),
    op: &F,
) -> Result<Side, BenchError>
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<(), ClientError>> + Send + 'static,
{
    let warmup = phase.mul_f64(WARMUP_SHARE);
    let failed = |run: &pace::Paced| {
        BenchError::Calibration(format!(
            "{name}: {} requests failed (first: {})",
            run.failed,
            run.first_error.as_deref().unwrap_or("-")
        ))
    };
    let warm = pace::paced(rate, warmup, op).await;
    if warm.failed > 0 {
        return Err(failed(&warm));
    }
    let (a0, n0) = cpu_now(testbed)?;
    let run = pace::paced(rate, phase - warmup, op).await;
    let (a1, n1) = cpu_now(testbed)?;
    if run.failed > 0 {
        return Err(failed(&run));
    }
    if run.completed == 0 {
        return Err(BenchError::Calibration(format!("{name}: no request completed")));
    }
    let wall_s = run.wall.as_secs_f64();
    let per = |spent: Duration, idle_per_s: f64| (spent.as_nanos() as f64 - idle_per_s * wall_s) / run.completed as f64;
    Ok(Side {
        app_ns: per(a1 - a0, baseline.0),
        node_ns: per(n1 - n0, baseline.1),
    })
}
