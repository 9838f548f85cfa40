//! A finished invocation and what it cost: what every way of running a function answers
//! (remote, local, through a gateway or a cluster).

use std::time::Duration;

use bytes::Bytes;
use ferry_control::Placement;
use ferry_proto::InvokeTrace;

/// What an invocation cost, as measured by the client and reported by the node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InvokeCost {
    /// Storage-node CPU time, summed over every request the invocation made.
    pub storage_cpu_ns: u64,
    /// Object bytes the node returned.
    pub bytes_returned: u64,
    /// Round trips to the node.
    pub round_trips: u32,
    /// Attempts (more than one after OCC conflicts).
    pub attempts: u32,
    /// App-node time spent running the function itself (local execution only).
    pub app_cpu_ns: u64,
}

impl From<ferry_proto::InvokeCosts> for InvokeCost {
    /// The costs a compute node or gateway reported for a run it made.
    fn from(record: ferry_proto::InvokeCosts) -> InvokeCost {
        InvokeCost {
            storage_cpu_ns: record.storage_cpu_ns,
            bytes_returned: record.bytes_returned,
            round_trips: record.round_trips,
            attempts: record.attempts,
            app_cpu_ns: record.app_cpu_ns,
        }
    }
}

impl InvokeCost {
    /// Adds the network costs of `other` (attempts and app CPU are tracked separately).
    pub(crate) fn absorb(&mut self, other: &InvokeCost) {
        self.storage_cpu_ns += other.storage_cpu_ns;
        self.bytes_returned += other.bytes_returned;
        self.round_trips += other.round_trips;
    }
}

/// A finished invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// The function's result bytes.
    pub result: Bytes,
    /// Where it ran.
    pub placement: Placement,
    /// End-to-end latency seen by the caller.
    pub latency: Duration,
    /// What it cost.
    pub cost: InvokeCost,
    /// The storage node started it and handed it back (ASFP pushback); it finished here.
    pub pushed_back: bool,
    /// What it read and installed, when [`crate::ClientConfig::trace`] is on.
    pub trace: Option<InvokeTrace>,
}

impl Invocation {
    /// Its costs and where it ran as the costs record a compute node or gateway answers
    /// with (docs/PROTOCOL.md, "Costs").
    pub fn costs_record(&self) -> ferry_proto::InvokeCosts {
        ferry_proto::InvokeCosts {
            app_cpu_ns: self.cost.app_cpu_ns,
            storage_cpu_ns: self.cost.storage_cpu_ns,
            bytes_returned: self.cost.bytes_returned,
            round_trips: self.cost.round_trips,
            attempts: self.cost.attempts,
            shipped_data: self.placement == Placement::Local,
            pushed_back: self.pushed_back,
        }
    }
}
