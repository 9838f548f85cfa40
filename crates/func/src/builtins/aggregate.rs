//! `aggregate`: multiget N keys of a metrics table and reduce them (sum, min, max, count).

use bytes::{BufMut, Bytes, BytesMut};

use super::check_compute;
use crate::args::{mix64, padded_value, reader, value_u64};
use crate::ctx::Ctx;
use crate::registry::{FnError, FnFuture};
use crate::work::spin_ns;

/// Registered name.
pub const NAME: &str = "aggregate";

/// Table the samples live in.
pub const TABLE: &str = "metrics";

/// Most keys one aggregate reads: one multiget's worth (the protocol's multiget limit).
pub const MAX_KEYS: usize = ferry_proto::MAX_MULTIGET_KEYS;

/// Largest sample value in the data set: keeps sums of [`MAX_KEYS`] samples far from overflow.
const MAX_SAMPLE: u64 = 1_000_000;

/// Arguments of one aggregate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggregateArgs {
    /// Sample ids to read.
    pub keys: Vec<u64>,
    /// Emulated work per sample read, in nanoseconds.
    pub compute_ns: u64,
}

impl AggregateArgs {
    /// Wire form: compute_ns u64, count u32, then each id as u64 (little-endian).
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(12 + 8 * self.keys.len());
        out.put_u64_le(self.compute_ns);
        out.put_u32_le(self.keys.len() as u32);
        for key in &self.keys {
            out.put_u64_le(*key);
        }
        out.freeze()
    }

    /// Parses and checks the wire form.
    pub fn decode(args: &Bytes) -> Result<AggregateArgs, FnError> {
        let mut r = reader(args);
        let compute_ns = r.u64("compute_ns")?;
        let count = r.count(MAX_KEYS, "keys")?;
        let mut keys = Vec::with_capacity(count);
        for _ in 0..count {
            keys.push(r.u64("key")?);
        }
        r.finish()?;
        check_compute(compute_ns)?;
        Ok(AggregateArgs { keys, compute_ns })
    }
}

/// Routing key: the first sample read.
pub fn route(args: &Bytes) -> Option<Bytes> {
    let first = *AggregateArgs::decode(args).ok()?.keys.first()?;
    Some(Bytes::copy_from_slice(&first.to_le_bytes()))
}

/// Result: sum, min, max and number of samples found (4 × u64, little-endian; min is
/// `u64::MAX` and max 0 when nothing was found).
pub fn run(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let args = AggregateArgs::decode(ctx.args())?;
        let keys: Vec<Bytes> = args
            .keys
            .iter()
            .map(|id| Bytes::copy_from_slice(&id.to_le_bytes()))
            .collect();
        let values = ctx.multiget(TABLE, &keys).await?;
        let (mut sum, mut min, mut max, mut found) = (0u64, u64::MAX, 0u64, 0u64);
        for value in values.iter().flatten() {
            let sample = value_u64(value, "sample")?;
            spin_ns(args.compute_ns);
            sum = sum
                .checked_add(sample)
                .ok_or_else(|| FnError::Failed("sum overflows u64".into()))?;
            min = min.min(sample);
            max = max.max(sample);
            found += 1;
        }
        let mut out = BytesMut::with_capacity(32);
        for field in [sum, min, max, found] {
            out.put_u64_le(field);
        }
        Ok(out.freeze())
    })
}

/// The data set: `samples` samples with pseudo-random values below 1,000,000.
pub fn dataset(samples: u64, value_bytes: usize, seed: u64) -> impl Iterator<Item = (Bytes, Bytes)> {
    (0..samples).map(move |id| {
        let sample = mix64(seed ^ id) % MAX_SAMPLE;
        (
            Bytes::copy_from_slice(&id.to_le_bytes()),
            padded_value(sample, value_bytes, seed.wrapping_add(id)),
        )
    })
}
