//! The costs record: what one invocation cost both sides and where it ran, for an answer
//! from a process that placed or ran it over the cluster's data (a compute node answering a
//! gateway, or a gateway answering its client).
//!
//! A storage node that runs an invocation next to the data has one cost to tell, its own
//! CPU, and the header's `cpu_ns` carries it. A compute node running it there (ship data)
//! spends CPU of its own *and* makes the storage nodes spend CPU on the gets and the commit
//! it sends them, in several round trips: a placement policy weighing the two sides needs
//! all of it. So an `invoke` that sets the `costs` flag may be answered with this record
//! after the result, and the response header's costs flag says it is there (a decoder
//! never has to know what was asked). A process that has nothing more to say than
//! `cpu_ns` (a storage node) ignores the flag and answers as usual.

use bytes::{BufMut, BytesMut};

use crate::message::DecodeError;
use crate::wire::Reader;

/// Bytes of the record on the wire (three `u64`, two `u32` and a flags byte, see
/// [`InvokeCosts::encode`]): fixed, so reading it never depends on a length from the peer.
pub const INVOKE_COSTS_LEN: usize = 3 * 8 + 2 * 4 + 1;

/// Record flag: the function ran on the app side over data fetched from the storage nodes
/// (ship data: on a compute node, or in the gateway).
const COSTS_FLAG_SHIPPED_DATA: u8 = 1;

/// Record flag: a storage node started the run and handed it back (pushback, or a handoff
/// at another node's key); the app side finished it.
const COSTS_FLAG_PUSHED_BACK: u8 = 2;

/// What one invocation cost, as the process that ran it measured it (docs/PROTOCOL.md,
/// "Costs").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InvokeCosts {
    /// CPU the answering process spent running the function itself (a compute node's,
    /// or a gateway's when it finished a run), ns: the app side's c_i.
    pub app_cpu_ns: u64,
    /// Storage-node CPU of every request the run made (its gets, validations and commit,
    /// or the one remote run), ns: the storage side's s_i.
    pub storage_cpu_ns: u64,
    /// Object bytes the storage nodes returned to the run.
    pub bytes_returned: u64,
    /// Requests the run sent to storage nodes and waited for: the queue visits the
    /// latency model multiplies waits by.
    pub round_trips: u32,
    /// Attempts (more than one after OCC conflicts).
    pub attempts: u32,
    /// It ran on the app side over fetched data (ship data), not on a storage node.
    pub shipped_data: bool,
    /// A storage node started it and handed it back; the app side finished it.
    pub pushed_back: bool,
}

impl InvokeCosts {
    /// Appends the record: `app_cpu_ns: u64, storage_cpu_ns: u64, bytes_returned: u64,
    /// round_trips: u32, attempts: u32, flags: u8` (bit 0: shipped data, bit 1: pushed back).
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(INVOKE_COSTS_LEN);
        out.put_u64_le(self.app_cpu_ns);
        out.put_u64_le(self.storage_cpu_ns);
        out.put_u64_le(self.bytes_returned);
        out.put_u32_le(self.round_trips);
        out.put_u32_le(self.attempts);
        let mut flags = 0;
        if self.shipped_data {
            flags |= COSTS_FLAG_SHIPPED_DATA;
        }
        if self.pushed_back {
            flags |= COSTS_FLAG_PUSHED_BACK;
        }
        out.put_u8(flags);
    }

    /// Reads the record.
    pub fn decode(r: &mut Reader) -> Result<InvokeCosts, DecodeError> {
        let mut costs = InvokeCosts {
            app_cpu_ns: r.u64("app cpu")?,
            storage_cpu_ns: r.u64("storage cpu")?,
            bytes_returned: r.u64("bytes returned")?,
            round_trips: r.u32("round trips")?,
            attempts: r.u32("attempts")?,
            ..InvokeCosts::default()
        };
        let flags = r.u8("costs flags")?;
        if flags & !(COSTS_FLAG_SHIPPED_DATA | COSTS_FLAG_PUSHED_BACK) != 0 {
            return Err(DecodeError::BadTag {
                what: "costs flags",
                tag: flags,
            });
        }
        costs.shipped_data = flags & COSTS_FLAG_SHIPPED_DATA != 0;
        costs.pushed_back = flags & COSTS_FLAG_PUSHED_BACK != 0;
        Ok(costs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_has_its_documented_size_and_round_trips() {
        let costs = InvokeCosts {
            app_cpu_ns: 1,
            storage_cpu_ns: 2,
            bytes_returned: 3,
            round_trips: 4,
            attempts: 5,
            shipped_data: true,
            pushed_back: false,
        };
        let mut out = BytesMut::new();
        costs.encode(&mut out);
        assert_eq!(out.len(), INVOKE_COSTS_LEN);
        let mut r = Reader::new(out.freeze());
        assert_eq!(InvokeCosts::decode(&mut r).unwrap(), costs);
        r.finish().unwrap();
        // A record cut short is an error, not a panic.
        let mut short = BytesMut::new();
        costs.encode(&mut short);
        short.truncate(INVOKE_COSTS_LEN - 1);
        assert!(InvokeCosts::decode(&mut Reader::new(short.freeze())).is_err());
        // Unknown flag bits are refused.
        let mut odd = BytesMut::new();
        costs.encode(&mut odd);
        odd[INVOKE_COSTS_LEN - 1] = 0x80;
        assert!(matches!(
            InvokeCosts::decode(&mut Reader::new(odd.freeze())),
            Err(DecodeError::BadTag { .. })
        ));
    }
}
