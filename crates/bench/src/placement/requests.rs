//! Request synthesis: turning a workload into requests, each a storage function and its
//! arguments (a phase's function drawn by weight, its compute drawn from its distribution,
//! keys from the function's chooser).

use bytes::Bytes;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use ferry_control::Nanos;
use ferry_experiment::model::{ComputeDist, FunctionKind, SocialOp, Workload};
use ferry_func::builtins::{auth, social, traverse, ycsbt};

use super::drive::DriveSpec;
use crate::zipf::{Zipf, YCSB_THETA};
use crate::BenchError;

/// Builds the request for workload function `index`: its storage function and arguments.
pub(super) struct Requests {
    /// Per function: the Zipfian key chooser of YCSB-T functions.
    zipf: Vec<Option<Zipf>>,
}

impl Requests {
    /// The key choosers of `workload`'s functions.
    pub(super) fn new(workload: &Workload) -> Result<Requests, BenchError> {
        let zipf = workload
            .functions
            .iter()
            .map(|f| match f.kind {
                FunctionKind::YcsbtRead { accounts } | FunctionKind::YcsbtTransfer { accounts } => {
                    Zipf::new(accounts, YCSB_THETA).map(Some).map_err(BenchError::Invalid)
                }
                FunctionKind::Traverse | FunctionKind::Social { .. } => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        Ok(Requests { zipf })
    }

    /// The storage function and arguments of one request of function `index`.
    pub(super) fn make(&self, spec: &DriveSpec<'_>, index: usize, rng: &mut ChaCha8Rng) -> (&'static str, Bytes) {
        let function = &spec.workload.functions[index];
        let compute_ns = compute_ns(function.compute, function.dist, rng);
        let zipf = self.zipf[index].as_ref();
        match (function.kind, zipf) {
            (FunctionKind::Social { op, vertices }, _) => social_request(op, vertices, rng),
            (FunctionKind::YcsbtRead { .. }, Some(zipf)) => (
                ycsbt::NAME,
                ycsbt::YcsbtArgs::Read {
                    account: zipf.key(rng),
                    compute_ns,
                }
                .encode(),
            ),
            (FunctionKind::YcsbtTransfer { accounts }, Some(zipf)) => {
                let from = zipf.key(rng);
                let mut to = zipf.key(rng);
                if to == from {
                    to = (from + 1) % accounts;
                }
                let args = ycsbt::YcsbtArgs::Transfer {
                    from,
                    to,
                    amount: 1,
                    compute_ns,
                };
                (ycsbt::NAME, args.encode())
            }
            _ => (
                traverse::NAME,
                traverse::TraverseArgs {
                    start: rng.gen_range(0..spec.graph_nodes),
                    depth: function.accesses,
                    compute_ns,
                }
                .encode(),
            ),
        }
    }
}

/// Picks a function of the phase active at `t` by its weight.
pub(super) fn choose(workload: &Workload, t: Nanos, rng: &mut ChaCha8Rng) -> usize {
    let phase = &workload.phases[workload.phase_at(t)];
    let mut draw: f64 = rng.gen();
    for &(index, weight) in &phase.entries {
        if draw < weight {
            return index;
        }
        draw -= weight;
    }
    phase.entries.last().map_or(0, |&(index, _)| index)
}

/// One request's compute per access: the function's mean, or drawn around it.
fn compute_ns(mean: Nanos, dist: ComputeDist, rng: &mut ChaCha8Rng) -> u64 {
    match dist {
        ComputeDist::Fixed => mean.0,
        ComputeDist::Exp => {
            let u: f64 = rng.gen_range(f64::EPSILON..1.0);
            ((-u.ln()) * mean.0 as f64).min(ferry_func::builtins::MAX_COMPUTE_NS_PER_ACCESS as f64) as u64
        }
    }
}

/// Neighbours top-k returns.
const TOP_K: u32 = 5;

/// The storage function and arguments of one social `op` request on a graph of
/// `vertices`: a uniformly chosen vertex per request.
fn social_request(op: SocialOp, vertices: u64, rng: &mut ChaCha8Rng) -> (&'static str, Bytes) {
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
