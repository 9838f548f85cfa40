//! What is simulated: the cluster (cores, network, per-message CPU costs) and the workload
//! (functions with accesses, object size, compute per access, mix fraction; phases).
//!
//! Also the closed-form facts the rest of the crate needs about a model: mean CPU cost per
//! request on each side, the capacity at a given X, and the unloaded latency of each path.

use ferry_control::Nanos;

use crate::error::ExperimentError;

/// Largest supported core count per node: the simulator scans cores linearly per job.
pub const CORES_MAX: u32 = 256;

/// Largest supported storage accesses per function (depth of a traversal).
pub const ACCESSES_MAX: u32 = 1024;

/// Largest supported object size: 64 MiB, beyond any single get a storage node serves.
pub const OBJECT_BYTES_MAX: u64 = 64 << 20;

/// Largest supported compute per access: 1 s, far beyond any microsecond-scale function.
pub const COMPUTE_MAX: Nanos = Nanos::from_secs(1);

/// Largest supported round-trip time: 1 s (a WAN link is ~100 ms).
pub const RTT_MAX: Nanos = Nanos::from_secs(1);

/// Largest supported per-message CPU cost: 10 ms.
pub const MSG_COST_MAX: Nanos = Nanos::from_ms(10);

/// Largest supported CPU per payload byte, ns: 100 ns a byte is 10 MB/s, far slower than
/// any memory copy or checksum a node does, so a larger value is a unit mistake.
pub const BYTE_COST_NS_MAX: f64 = 100.0;

/// Most functions one workload may mix (each gets its own `FnId`).
pub const FUNCTIONS_MAX: usize = 256;

/// Most phases one workload may cycle through.
pub const PHASES_MAX: usize = 64;

/// Default app-node CPU per message handled (receive one message, send the next): RPC
/// endpoint and client-side KV stack cost on the Kayak testbed scale (see SIMULATION.md).
pub const APP_MSG_NS_DEFAULT: u64 = 300;

/// Default app-node CPU to start a function locally (context, read/write set setup).
pub const APP_INVOKE_NS_DEFAULT: u64 = 200;

/// Default storage-node CPU per request message handled (receive, parse, reply): the
/// dominant per-request cost of a kernel-bypass KV server at ~1 Mops per core.
pub const STORAGE_MSG_NS_DEFAULT: u64 = 1_000;

/// Default storage-node CPU to dispatch an invocation to a storage function.
pub const STORAGE_INVOKE_NS_DEFAULT: u64 = 600;

/// Default storage-node CPU per table lookup, whether it comes from a get or a function.
pub const STORAGE_GET_NS_DEFAULT: u64 = 100;

/// Default app-node CPU per payload byte received: none, so that the paper-scale model
/// (kernel-bypass, zero-copy) and every result computed before per-byte costs existed are
/// unchanged; a profile measured by `ferry calibrate` sets it.
pub const APP_BYTE_NS_DEFAULT: f64 = 0.0;

/// Default storage-node CPU per payload byte sent: none, for the same reason.
pub const STORAGE_BYTE_NS_DEFAULT: f64 = 0.0;

/// Default slowdown of function compute on the storage node relative to the app node.
/// Storage cores also poll the NIC and serve gets, and function code and the store's index
/// evict each other from the caches; Kayak's §6.3 finds X* = 0.4 on equal 4 + 4 cores, which
/// needs storage-side compute to cost more than app-side compute. 1.25 reproduces it.
pub const STORAGE_COMPUTE_FACTOR_DEFAULT: f64 = 1.25;

/// Largest accepted storage compute factor.
pub const STORAGE_COMPUTE_FACTOR_MAX: f64 = 100.0;

/// Default bytes of a message without payload (framing, key, status).
pub const HEADER_BYTES_DEFAULT: u64 = 64;

/// Default object size read per access: small graph nodes, as in the paper's traversal.
pub const OBJECT_BYTES_DEFAULT: u64 = 128;

/// Default link bandwidth: the 25 Gb/s NICs of the Kayak testbed.
pub const BANDWIDTH_GBPS_DEFAULT: f64 = 25.0;

/// Default round-trip time: 10 µs (the Kayak testbed measured 9.2 µs).
pub const RTT_DEFAULT: Nanos = Nanos::from_us(10);

/// Default rate of node-wide stalls ("hiccups") per node. See [`ClusterModel::stall_rate_hz`].
pub const STALL_RATE_HZ_DEFAULT: f64 = 5_000.0;

/// Default mean length of one stall.
pub const STALL_MEAN_DEFAULT: Nanos = Nanos::from_us(16);

/// Largest supported stall rate: 10⁵/s, beyond which a node would be stalled most of the time.
pub const STALL_RATE_HZ_MAX: f64 = 1e5;

/// Largest supported mean stall: 10 ms.
pub const STALL_MEAN_MAX: Nanos = Nanos::from_ms(10);

/// Default spread of stall lengths (standard deviation over mean): 1, exponential lengths.
pub const STALL_LENGTH_CV_DEFAULT: f64 = 1.0;

/// Default cores per node: the paper's 8-core configuration.
pub const CORES_DEFAULT: u32 = 8;

/// Most nodes of one kind: the paper's largest cluster has 64 compute nodes; 1024 leaves
/// room while keeping a run's per-node state (cores, links, stall streams) small.
pub const NODES_MAX: u32 = 1024;

mod cluster;
mod workload;

pub use cluster::{nodes_of_group, ClusterModel, CostModel, Sharding};
pub use workload::{ComputeDist, FunctionKind, FunctionSpec, PhaseMix, SocialOp, Workload, SLOWDOWN_FLOOR};

pub(crate) fn out_of_range(name: &str, range: &'static str, value: impl ToString) -> ExperimentError {
    ExperimentError::OutOfRange {
        name: name.to_string(),
        range,
        value: value.to_string(),
    }
}
