//! Placement groups (Pyxis §IV-E): the cluster's nodes split into groups, each with its own
//! storage nodes, its own app nodes and its own policy (rate limiter and turning point).
//!
//! A request belongs to the group whose storage node holds its data. Each group admits its
//! own backlog at its own policy's rate: the requests of group g are the workload's
//! requests whose data lives on g's storage nodes, so function f's weight in g is its
//! weight in the mix times the share of f's storage nodes that lie in g. With one group
//! (the default) this is the whole workload on the whole cluster.

use std::collections::VecDeque;
use std::ops::Range;

use ferry_control::{Elastic, Nanos, Policy, PolicyState, TokenBucket};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::model::{nodes_of_group, ClusterModel, Workload};

/// Burst of the token bucket in paced mode: one request, i.e. evenly spaced arrivals.
const PACED_BURST: f64 = 1.0;

/// One group's arrivals, policy and nodes.
pub(super) struct Group<'p> {
    pub(super) policy: &'p mut dyn Policy,
    /// The token bucket of paced arrivals (None: Poisson).
    pub(super) bucket: Option<TokenBucket>,
    pub(super) rng_arrivals: ChaCha8Rng,
    rng_functions: ChaCha8Rng,
    /// Per phase, the cumulative weights of the functions with data in this group (empty:
    /// the phase sends the group nothing).
    phase_cdf: Vec<Vec<(f64, u32)>>,
    /// Per phase, the group's share of the workload's requests (of the demand).
    demand_share: Vec<f64>,
    /// The elastic-compute loop, if the app side scales.
    pub(super) elastic: Option<Elastic>,
    /// App CPU the group's nodes ran since the last elastic decision.
    pub(super) app_busy_ns: u64,
    /// The group's storage nodes.
    storage: Range<u32>,
    /// The group's app nodes.
    app: Range<u32>,
    /// The app node the group's next request goes to.
    next_app: u32,
    /// When the policy's next tick is scheduled (u64::MAX: none).
    pub(super) tick_scheduled: u64,
    /// The group's requests in flight (sent, not yet done).
    pub(super) in_flight: usize,
    /// Requests waiting for a slot in the policy's window: (due time, function).
    pub(super) waiting: VecDeque<(u64, u32)>,
    /// App and storage CPU the group's requests took since the last busy report.
    pub(super) busy_app_ns: u64,
    pub(super) busy_storage_ns: u64,
}

impl<'p> Group<'p> {
    /// Group `g` of `groups` over `cluster`, drawing from the given streams.
    pub(super) fn new(
        cluster: &ClusterModel,
        workload: &Workload,
        (g, groups): (u32, u32),
        policy: &'p mut dyn Policy,
        paced: bool,
        rng_arrivals: ChaCha8Rng,
        rng_functions: ChaCha8Rng,
    ) -> Self {
        let storage = nodes_of_group(cluster.storage_nodes, groups, g);
        let app = nodes_of_group(cluster.app_nodes, groups, g);
        let mut demand_share = Vec::new();
        let phase_cdf = workload
            .phases
            .iter()
            .map(|p| {
                let weights: Vec<(f64, u32)> = p
                    .entries
                    .iter()
                    .map(|&(i, w)| {
                        (
                            w * in_group(cluster, &storage, i) as f64 / cluster.storage_nodes_of(i) as f64,
                            i as u32,
                        )
                    })
                    .filter(|&(w, _)| w > 0.0)
                    .collect();
                let total: f64 = weights.iter().map(|e| e.0).sum();
                demand_share.push(total);
                let mut acc = 0.0;
                weights
                    .into_iter()
                    .map(|(w, i)| {
                        acc += w / total;
                        (acc, i)
                    })
                    .collect()
            })
            .collect();
        let bucket = paced.then(|| {
            TokenBucket::new(Nanos::ZERO, policy.rate_ops().max(1e-3), PACED_BURST)
                // Invariant: the rate is clamped positive and the burst is a valid constant.
                .expect("valid token bucket parameters")
        });
        Group {
            policy,
            bucket,
            rng_arrivals,
            rng_functions,
            phase_cdf,
            demand_share,
            // Invariant: the cluster was validated, so its elastic range is one.
            elastic: cluster.elastic.and_then(|(min, max)| Elastic::new(min, max).ok()),
            app_busy_ns: 0,
            next_app: app.start,
            storage,
            app,
            tick_scheduled: u64::MAX,
            in_flight: 0,
            waiting: VecDeque::new(),
            busy_app_ns: 0,
            busy_storage_ns: 0,
        }
    }

    /// The group's share of `demand` (requests per second to the whole cluster) in phase
    /// `phase`.
    pub(super) fn demand_ops(&self, demand: f64, phase: usize) -> f64 {
        demand * self.demand_share[phase]
    }

    /// The rate the group admits at: its policy's, capped by its share of the demand.
    pub(super) fn admit_ops(&self, demand_ops: Option<f64>) -> f64 {
        let rate = self.policy.rate_ops();
        demand_ops.map_or(rate, |d| rate.min(d))
    }

    /// The group's app nodes.
    pub(super) fn app_nodes(&self) -> Range<u32> {
        self.app.clone()
    }

    /// When the limiter releases the next request after one released at `t`, admitting
    /// at most `demand_ops`.
    pub(super) fn next_arrival(&mut self, t: u64, demand_ops: Option<f64>) -> u64 {
        let rate = self.admit_ops(demand_ops).max(1e-3);
        match self.bucket.as_mut() {
            // Paced: the bucket runs at the admitted rate, set at every tick.
            None => {
                let u: f64 = self.rng_arrivals.gen();
                let gap = -(1.0 - u).ln() * 1e9 / rate;
                // Round, not truncate: flooring would shorten every gap by 0.5 ns on average,
                // a visible rate bias at Mops rates (0.3 % at 6.4 Mops).
                t.saturating_add(gap.min(u64::MAX as f64 / 2.0).round() as u64)
            }
            Some(b) => {
                b.try_admit(Nanos(t));
                b.next_admit_at(Nanos(t)).0
            }
        }
    }

    /// The function a request of phase `phase` runs, if the phase sends this group any.
    pub(super) fn draw_function(&mut self, phase: usize) -> Option<u32> {
        let cdf = &self.phase_cdf[phase];
        match cdf.len() {
            0 => None,
            1 => Some(cdf[0].1),
            n => {
                let u: f64 = self.rng_functions.gen();
                Some(cdf.iter().find(|&&(c, _)| u < c).map_or(cdf[n - 1].1, |&(_, i)| i))
            }
        }
    }

    /// The (app node, storage node) of the group's next request, for function `fn_idx`:
    /// app nodes in turn, the storage node uniform over the function's nodes in the group.
    pub(super) fn draw_nodes(
        &mut self,
        cluster: &ClusterModel,
        fn_idx: usize,
        rng_shards: &mut ChaCha8Rng,
    ) -> (u32, u32) {
        let app = self.next_app;
        self.next_app = if app + 1 >= self.app.end {
            self.app.start
        } else {
            app + 1
        };
        let shards = in_group(cluster, &self.storage, fn_idx);
        let storage = if shards <= 1 {
            self.storage.start
        } else {
            self.storage.start + rng_shards.gen_range(0..shards)
        };
        (app, storage)
    }
}

/// How many of function `fn_idx`'s storage nodes (the first ones) lie in `storage`.
fn in_group(cluster: &ClusterModel, storage: &Range<u32>, fn_idx: usize) -> u32 {
    cluster
        .storage_nodes_of(fn_idx)
        .min(storage.end)
        .saturating_sub(storage.start)
}

/// The groups' states as one: rates add up, X is the rate-weighted mean, searches add up.
pub(super) fn combined_state(states: &[PolicyState]) -> PolicyState {
    if let [one] = states {
        return *one;
    }
    let rate: f64 = states.iter().map(|s| s.rate_ops).sum();
    PolicyState {
        rate_ops: rate,
        rpc_fraction: if rate > 0.0 {
            states.iter().map(|s| s.rate_ops * s.rpc_fraction).sum::<f64>() / rate
        } else {
            0.0
        },
        latency_ns_estimate: states.iter().filter_map(|s| s.latency_ns_estimate).reduce(f64::max),
        searches: states.iter().map(|s| s.searches).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Sharding;

    #[test]
    fn a_function_s_share_of_a_group_follows_its_nodes() {
        let cl = ClusterModel {
            storage_nodes: 4,
            sharding: Sharding::Staircase,
            ..ClusterModel::default()
        };
        // Function 0 touches node 0 only, function 3 all four.
        assert_eq!(in_group(&cl, &(0..1), 0), 1);
        assert_eq!(in_group(&cl, &(1..2), 0), 0);
        assert_eq!(in_group(&cl, &(2..4), 3), 2);
        assert_eq!(in_group(&cl, &(2..4), 2), 1);
    }
}
