//! The social application of Pyxis §VI-C: a graph of vertices and associations, as in
//! Facebook's TAO, with vector and scalar attributes, and four functions covering the four
//! corners of IO-{intensive, light} × compute-{intensive, light} (Pyxis Table II):
//!
//! | function | reads | compute |
//! |---|---|---|
//! | `social.aggrv` (aggr-V) | one 64 KiB vector entry (64 vectors × 256 f32) | a mean per dimension: light |
//! | `social.topk` (top-k) | the association list (12 neighbours), then 13 embeddings of 1 KiB | a distance and a scoring step per neighbour: heavy |
//! | `social.aggrs` (aggr-S) | one 1 KiB scalar entry (256 f32) | sum, min, max: light |
//! | `auth` | one salted scrypt hash | scrypt: heavy |
//!
//! Every table is keyed by the vertex id (8 bytes, little-endian), so one vertex's rows live
//! on one node of a cluster; top-k's neighbours may live elsewhere (a read-only invocation
//! may read across nodes). `auth` is the built-in, over [`user`] names.

use bytes::{BufMut, Bytes, BytesMut};

use crate::args::{mix64, reader};
use crate::builtins::{auth, check_compute};
use crate::ctx::Ctx;
use crate::registry::{FnError, FnFuture};
use crate::work::spin_ns;

/// Registered name of aggr-V.
pub const AGGR_V: &str = "social.aggrv";
/// Registered name of top-k.
pub const TOP_K: &str = "social.topk";
/// Registered name of aggr-S.
pub const AGGR_S: &str = "social.aggrs";

/// Vertex → [`VECTORS_PER_VERTEX`] vectors of [`DIMS`] f32.
pub const VECTORS: &str = "social.vectors";
/// Vertex → its [`NEIGHBOURS`] neighbours' ids (u64 each).
pub const ASSOC: &str = "social.assoc";
/// Vertex → [`DIMS`] f32 scalar attributes.
pub const SCALARS: &str = "social.scalars";
/// Vertex → one embedding of [`DIMS`] f32 (what top-k compares).
pub const EMBEDDINGS: &str = "social.embeddings";

/// Dimensions of a vector (Pyxis: 256 of 4-byte floats).
pub const DIMS: usize = 256;
/// Vectors per vertex in [`VECTORS`] (Pyxis: 64, so an entry is 64 KiB).
pub const VECTORS_PER_VERTEX: usize = 64;
/// Neighbours per association entry (Pyxis: 12).
pub const NEIGHBOURS: usize = 12;
/// Most neighbours top-k returns.
pub const MAX_K: u32 = NEIGHBOURS as u32;

/// Default scoring work per neighbour in top-k (a ranking model after the distance),
/// making it the compute-heavy, IO-heavy corner of Table II.
pub const TOP_K_SCORE_NS_DEFAULT: u64 = 5_000;

/// Username of vertex `i` in `auth`'s table (the built-in's naming).
pub fn user(i: u64) -> Bytes {
    auth::username(i)
}

/// Key of vertex `id` in every social table.
pub fn key(id: u64) -> Bytes {
    Bytes::copy_from_slice(&id.to_le_bytes())
}

/// Arguments of aggr-V, top-k and aggr-S.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VertexArgs {
    /// The vertex.
    pub vertex: u64,
    /// top-k: neighbours returned (ignored by the others).
    pub k: u32,
    /// Emulated work: top-k's per neighbour, the others' once.
    pub compute_ns: u64,
}

impl VertexArgs {
    /// Wire form: vertex u64, k u32, compute_ns u64 (little-endian).
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(20);
        out.put_u64_le(self.vertex);
        out.put_u32_le(self.k);
        out.put_u64_le(self.compute_ns);
        out.freeze()
    }

    /// Parses and checks the wire form.
    pub fn decode(args: &Bytes) -> Result<VertexArgs, FnError> {
        let mut r = reader(args);
        let parsed = VertexArgs {
            vertex: r.u64("vertex")?,
            k: r.u32("k")?,
            compute_ns: r.u64("compute_ns")?,
        };
        r.finish()?;
        if parsed.k > MAX_K {
            return Err(FnError::BadArgs(format!("k {} exceeds {MAX_K}", parsed.k)));
        }
        check_compute(parsed.compute_ns)?;
        Ok(parsed)
    }
}

/// Routing key of every social function: the vertex.
pub fn route(args: &Bytes) -> Option<Bytes> {
    VertexArgs::decode(args).ok().map(|args| key(args.vertex))
}

/// The f32s of a stored vector value, or why it is malformed.
fn floats(value: &[u8], count: usize, what: &str) -> Result<Vec<f32>, FnError> {
    if value.len() != count * 4 {
        return Err(FnError::Failed(format!(
            "{what} holds {} bytes, expected {}",
            value.len(),
            count * 4
        )));
    }
    Ok(value
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect())
}

fn encode_floats(values: impl IntoIterator<Item = f32>) -> Bytes {
    let mut out = BytesMut::new();
    for value in values {
        out.put_f32_le(value);
    }
    out.freeze()
}

async fn read(ctx: &mut dyn Ctx, table: &str, vertex: u64) -> Result<Bytes, FnError> {
    ctx.get(table, &key(vertex))
        .await?
        .ok_or_else(|| FnError::Failed(format!("vertex {vertex} has no {table} entry")))
}

/// aggr-V: the mean of each dimension over the vertex's vectors ([`DIMS`] f32).
pub fn aggr_v(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let args = VertexArgs::decode(ctx.args())?;
        let value = read(ctx, VECTORS, args.vertex).await?;
        let vectors = floats(&value, VECTORS_PER_VERTEX * DIMS, "a vector entry")?;
        let mut sums = [0f32; DIMS];
        for vector in vectors.chunks_exact(DIMS) {
            for (sum, x) in sums.iter_mut().zip(vector) {
                *sum += x;
            }
        }
        spin_ns(args.compute_ns);
        Ok(encode_floats(sums.iter().map(|s| s / VECTORS_PER_VERTEX as f32)))
    })
}

/// aggr-S: sum, min and max of the vertex's scalars (3 f32).
pub fn aggr_s(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let args = VertexArgs::decode(ctx.args())?;
        let value = read(ctx, SCALARS, args.vertex).await?;
        let scalars = floats(&value, DIMS, "a scalar entry")?;
        let sum: f32 = scalars.iter().sum();
        let min = scalars.iter().copied().fold(f32::INFINITY, f32::min);
        let max = scalars.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        spin_ns(args.compute_ns);
        Ok(encode_floats([sum, min, max]))
    })
}

/// top-k: the `k` neighbours whose embeddings are nearest the vertex's (squared Euclidean
/// distance), nearest first, as (id u64, distance f32); ties go to the smaller id.
pub fn top_k(ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move {
        let args = VertexArgs::decode(ctx.args())?;
        let assoc = read(ctx, ASSOC, args.vertex).await?;
        if assoc.len() != NEIGHBOURS * 8 {
            return Err(FnError::Failed(format!(
                "vertex {}: malformed association entry",
                args.vertex
            )));
        }
        let neighbours: Vec<u64> = assoc
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let keys: Vec<Bytes> = std::iter::once(args.vertex)
            .chain(neighbours.iter().copied())
            .map(key)
            .collect();
        let embeddings = ctx.multiget(EMBEDDINGS, &keys).await?;
        let mut embeddings = embeddings.into_iter();
        let own = embeddings
            .next()
            .flatten()
            .ok_or_else(|| FnError::Failed(format!("vertex {} has no embedding", args.vertex)))?;
        let own = floats(&own, DIMS, "an embedding")?;
        let mut scored = Vec::with_capacity(NEIGHBOURS);
        for (id, embedding) in neighbours.iter().zip(embeddings) {
            let Some(embedding) = embedding else { continue };
            let other = floats(&embedding, DIMS, "an embedding")?;
            let distance: f32 = own.iter().zip(&other).map(|(a, b)| (a - b) * (a - b)).sum();
            spin_ns(args.compute_ns);
            scored.push((distance, *id));
        }
        scored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut out = BytesMut::with_capacity(12 * args.k as usize);
        for (distance, id) in scored.into_iter().take(args.k as usize) {
            out.put_u64_le(id);
            out.put_f32_le(distance);
        }
        Ok(out.freeze())
    })
}

/// A pseudo-random float in [0, 1) from `seed`.
fn unit(seed: u64) -> f32 {
    (mix64(seed) >> 40) as f32 / (1u64 << 24) as f32
}

fn random_floats(count: usize, seed: u64) -> Bytes {
    encode_floats((0..count as u64).map(|i| unit(seed ^ i.wrapping_mul(0x9e37_79b9))))
}

/// The graph's data set for `vertices` vertices: (table, key, value) for the vector,
/// association, scalar and embedding tables. Neighbours are drawn uniformly (never the
/// vertex itself when there is another).
pub fn dataset(vertices: u64, seed: u64) -> impl Iterator<Item = (&'static str, Bytes, Bytes)> {
    (0..vertices).flat_map(move |v| {
        let base = mix64(seed ^ v.wrapping_mul(0x0100_0000_01b3));
        let mut assoc = BytesMut::with_capacity(NEIGHBOURS * 8);
        for n in 0..NEIGHBOURS as u64 {
            let mut neighbour = mix64(base ^ (n + 1)) % vertices.max(1);
            if neighbour == v && vertices > 1 {
                neighbour = (neighbour + 1) % vertices;
            }
            assoc.put_u64_le(neighbour);
        }
        [
            (VECTORS, key(v), random_floats(VECTORS_PER_VERTEX * DIMS, base ^ 1)),
            (ASSOC, key(v), assoc.freeze()),
            (SCALARS, key(v), random_floats(DIMS, base ^ 2)),
            (EMBEDDINGS, key(v), random_floats(DIMS, base ^ 3)),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip_and_bad_ones_are_refused() {
        let args = VertexArgs {
            vertex: 9,
            k: 5,
            compute_ns: 100,
        };
        assert_eq!(VertexArgs::decode(&args.encode()).unwrap(), args);
        assert_eq!(route(&args.encode()), Some(key(9)));
        let too_many = VertexArgs { k: MAX_K + 1, ..args };
        assert!(VertexArgs::decode(&too_many.encode()).is_err());
        assert!(VertexArgs::decode(&Bytes::from_static(b"short")).is_err());
    }

    #[test]
    fn the_data_set_has_the_papers_object_sizes() {
        let rows: Vec<_> = dataset(3, 1).collect();
        assert_eq!(rows.len(), 12);
        let size = |table: &str| rows.iter().find(|(t, _, _)| *t == table).unwrap().2.len();
        assert_eq!(size(VECTORS), 64 * 1024);
        assert_eq!(size(ASSOC), 96);
        assert_eq!(size(SCALARS), 1024);
        assert_eq!(size(EMBEDDINGS), 1024);
        // No vertex is its own neighbour.
        for (table, key, value) in &rows {
            if *table == ASSOC {
                let v = u64::from_le_bytes(key[..].try_into().unwrap());
                assert!(value
                    .chunks_exact(8)
                    .all(|c| u64::from_le_bytes(c.try_into().unwrap()) != v));
            }
        }
    }
}
