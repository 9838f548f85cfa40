//! Calibration before a run: the CPU each side spends per request beyond what the
//! invocation itself reports (message handling, wake-ups), measured for each placement and
//! handed to the policy as its [`Overhead`].

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use ferry_client::{Backend, Overhead, Placement};

use super::drive::DriveSpec;
use super::requests::Requests;
use crate::testbed::Testbed;
use crate::BenchError;

/// Invocations of each placement the overheads are calibrated over (a few hundred
/// milliseconds of them on the loopback machine).
const CALIBRATION_CALLS: usize = 5_000;

/// Invocations kept in flight while calibrating: a loaded run's, where messages batch.
/// Measured one at a time, a round trip cost ~23 µs of app CPU here (each one a wake-up);
/// the capacity built on that held every policy at ~40 k/s, a third of the node's.
const CALIBRATION_IN_FLIGHT: usize = 32;

/// Runs `CALIBRATION_CALLS` invocations of the workload's first function placed `placement`,
/// `CALIBRATION_IN_FLIGHT` at a time, and returns the CPU each side spent per invocation
/// beyond what the invocations reported: (app, storage), ns.
async fn calibrate_placement<B: Backend>(
    testbed: &Testbed,
    backend: &B,
    spec: &DriveSpec<'_>,
    placement: Placement,
) -> Result<(f64, f64), BenchError> {
    let requests = Requests::new(spec.workload)?;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ CALIBRATION_SALT);
    let (app_before, node_before) = (testbed.app_on_cpu_time(), testbed.node_on_cpu_time());
    let (mut app_reported, mut node_reported, mut done) = (0u64, 0u64, 0u64);
    let mut started = 0usize;
    let mut in_flight: Vec<ferry_client::BackendFuture<'_>> = Vec::with_capacity(CALIBRATION_IN_FLIGHT);
    std::future::poll_fn(|cx| loop {
        while in_flight.len() < CALIBRATION_IN_FLIGHT && started < CALIBRATION_CALLS {
            let (function, args) = requests.make(spec, 0, &mut rng);
            in_flight.push(match placement {
                Placement::Local => backend.invoke_local(function, args),
                Placement::Remote => backend.invoke_remote(function, args),
            });
            started += 1;
        }
        let before = in_flight.len();
        in_flight.retain_mut(|call| match call.as_mut().poll(cx) {
            std::task::Poll::Ready(outcome) => {
                if let Ok(invocation) = outcome {
                    app_reported += invocation.cost.app_cpu_ns;
                    node_reported += invocation.cost.storage_cpu_ns;
                    done += 1;
                }
                false
            }
            std::task::Poll::Pending => true,
        });
        if in_flight.is_empty() && started >= CALIBRATION_CALLS {
            return std::task::Poll::Ready(());
        }
        if in_flight.len() == before {
            return std::task::Poll::Pending;
        }
    })
    .await;
    let per_call = |before: Option<Duration>, after: Option<Duration>, reported: u64| match (before, after) {
        (Some(before), Some(after)) if done > 0 => {
            ((after - before).as_nanos() as f64 - reported as f64).max(0.0) / done as f64
        }
        _ => 0.0,
    };
    Ok((
        per_call(app_before, testbed.app_on_cpu_time(), app_reported),
        per_call(node_before, testbed.node_on_cpu_time(), node_reported),
    ))
}

/// Measures the [`Overhead`] of each placement (see [`calibrate_placement`]).
pub(super) async fn calibrate_overhead<B: Backend>(
    testbed: &Testbed,
    backend: &B,
    spec: &DriveSpec<'_>,
) -> Result<Overhead, BenchError> {
    let (local_app_ns, local_storage_ns) = calibrate_placement(testbed, backend, spec, Placement::Local).await?;
    let (remote_app_ns, remote_storage_ns) = calibrate_placement(testbed, backend, spec, Placement::Remote).await?;
    Ok(Overhead {
        local_app_ns,
        local_storage_ns,
        remote_app_ns,
        remote_storage_ns,
    })
}

/// Salt of the calibration's request stream.
const CALIBRATION_SALT: u64 = 0xca1_1b7a7e;
