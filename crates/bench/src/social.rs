//! The social application's requests for the real benchmark: a uniformly chosen vertex
//! per request, and the data set the functions read.

use bytes::Bytes;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use ferry_experiment::model::{FunctionKind, SocialOp, Workload};
use ferry_func::builtins::{auth, social};

/// Neighbours top-k returns.
pub const TOP_K: u32 = 5;

/// The graph's vertex count, if the workload runs social functions.
pub fn social_vertices(workload: &Workload) -> Option<u64> {
    workload.functions.iter().find_map(|f| match f.kind {
        FunctionKind::Social { vertices, .. } => Some(vertices),
        _ => None,
    })
}

/// The storage function and arguments of one `op` request on a graph of `vertices`.
pub fn request(op: SocialOp, vertices: u64, rng: &mut ChaCha8Rng) -> (&'static str, Bytes) {
    let vertex = rng.gen_range(0..vertices.max(1));
    let args = |k: u32, compute_ns: u64| social::VertexArgs { vertex, k, compute_ns }.encode();
    match op {
        SocialOp::AggrV => (social::AGGR_V, args(0, 0)),
        SocialOp::TopK => (social::TOP_K, args(TOP_K, social::TOP_K_SCORE_NS_DEFAULT)),
        SocialOp::AggrS => (social::AGGR_S, args(0, 0)),
        SocialOp::Auth => (
            auth::NAME,
            auth::AuthArgs {
                user: auth::username(vertex),
                password: auth::password(vertex),
            }
            .encode(),
        ),
    }
}
