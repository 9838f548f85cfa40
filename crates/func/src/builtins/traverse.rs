//! `traverse`: pointer chasing through a linked table (Kayak's graph traversal).
//!
//! Table [`TABLE`] maps an 8-byte little-endian node id to a value whose first 8 bytes are
//! the id of the next node. An invocation starts at `start`, performs `depth` dependent
//! gets and burns `compute_ns` of emulated work after each: run remotely that is one round
//! trip, run locally it is `depth` round trips.

use bytes::{BufMut, Bytes, BytesMut};

use super::check_compute;
use crate::args::{mix64, padded_value, reader, value_u64};
use crate::ctx::Ctx;
use crate::registry::{FnError, FnFuture};
use crate::work::spin_ns;

/// Registered name.
pub const NAME: &str = "traverse";

/// Table the data set lives in.
pub const TABLE: &str = "graph";

/// Deepest traversal accepted: bounds one invocation's accesses.
pub const MAX_DEPTH: u32 = 1024;

/// Arguments of one traversal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraverseArgs {
    /// Node to start from.
    pub start: u64,
    /// Dependent gets to perform.
    pub depth: u32,
    /// Emulated work after each get, in nanoseconds.
    pub compute_ns: u64,
}

impl TraverseArgs {
    /// Wire form: start u64, depth u32, compute_ns u64 (little-endian).
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(20);
        out.put_u64_le(self.start);
        out.put_u32_le(self.depth);
        out.put_u64_le(self.compute_ns);
        out.freeze()
    }

    /// Parses and checks the wire form.
    pub fn decode(args: &Bytes) -> Result<TraverseArgs, FnError> {
        let mut r = reader(args);
        let parsed = TraverseArgs {
            start: r.u64("start")?,
            depth: r.u32("depth")?,
            compute_ns: r.u64("compute_ns")?,
        };
        r.finish()?;
        if parsed.depth > MAX_DEPTH {
            return Err(FnError::BadArgs(format!("depth {} exceeds {MAX_DEPTH}", parsed.depth)));
        }
        check_compute(parsed.compute_ns)?;
        Ok(parsed)
    }
}

/// Result: the node reached and the total bytes read (16 bytes, little-endian).
pub fn run(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let args = TraverseArgs::decode(ctx.args())?;
        let mut node = args.start;
        let mut bytes_read = 0u64;
        for _ in 0..args.depth {
            let key = node.to_le_bytes();
            let value = ctx
                .get(TABLE, &key)
                .await?
                .ok_or_else(|| FnError::Failed(format!("dangling pointer: node {node} does not exist")))?;
            spin_ns(args.compute_ns);
            bytes_read += value.len() as u64;
            node = value_u64(&value, "graph node")?;
        }
        let mut out = BytesMut::with_capacity(16);
        out.put_u64_le(node);
        out.put_u64_le(bytes_read);
        Ok(out.freeze())
    })
}

/// Routing key: the node the traversal starts from.
pub fn route(args: &Bytes) -> Option<Bytes> {
    TraverseArgs::decode(args).ok().map(|args| key(args.start))
}

/// Key of node `id`.
pub fn key(id: u64) -> Bytes {
    Bytes::copy_from_slice(&id.to_le_bytes())
}

/// The data set: `nodes` nodes whose next pointers form a pseudo-random graph (derived from
/// `seed`), each value `value_bytes` long (at least 8).
pub fn dataset(nodes: u64, value_bytes: usize, seed: u64) -> impl Iterator<Item = (Bytes, Bytes)> {
    let nodes = nodes.max(1);
    (0..nodes).map(move |id| {
        let next = mix64(seed ^ id.wrapping_mul(0x9e37_79b9)) % nodes;
        (key(id), padded_value(next, value_bytes, seed.wrapping_add(id)))
    })
}
