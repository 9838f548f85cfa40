//! Elastic compute in the engine: each group's share of the demand, and its elastic loop
//! resizing the group's app nodes.

use ferry_control::elastic::ELASTIC_PERIOD;
use ferry_control::{ElasticInput, Nanos};

use super::Engine;

impl Engine<'_, '_> {
    /// Group `g`'s share of the demand at `t`, if there is a demand.
    pub(super) fn demand_ops(&self, t: u64, g: u32) -> Option<f64> {
        let w = self.cfg.workload;
        let d = w.demand.as_ref()?;
        Some(self.groups[g as usize].demand_ops(d.at(Nanos(t)), w.phase_at(Nanos(t))))
    }

    /// Group `g`'s elastic loop decides at `t` on the period that just ended.
    pub(super) fn scale(&mut self, t: u64, g: u32) {
        let demand = self.demand_ops(t, g);
        let active = self.active_cores(g);
        let group = &mut self.groups[g as usize];
        let Some(elastic) = group.elastic else {
            return;
        };
        let input = ElasticInput {
            active_cores: active,
            busy_cores: group.app_busy_ns as f64 / ELASTIC_PERIOD.0 as f64,
            throttled: demand.is_none_or(|d| group.policy.rate_ops() < d),
        };
        group.app_busy_ns = 0;
        let cores = elastic.decide(&input);
        if cores != active {
            self.resize(t, g, cores);
        }
    }

    /// Active app cores of group `g`.
    pub(super) fn active_cores(&self, g: u32) -> u32 {
        self.groups[g as usize]
            .app_nodes()
            .map(|n| self.app_active[n as usize])
            .sum()
    }

    /// Runs group `g` on `cores` app cores from `t`, spread evenly over its app nodes (at
    /// least one each), and tells its policy.
    pub(super) fn resize(&mut self, t: u64, g: u32, cores: u32) {
        let nodes = self.groups[g as usize].app_nodes();
        let n = nodes.len() as u32;
        for (i, node) in nodes.enumerate() {
            let share = (cores / n + u32::from((i as u32) < cores % n)).clamp(1, self.cfg.cluster.app_cores);
            self.app_active[node as usize] = share;
            self.apps[node as usize].0.set_active(share as usize);
        }
        let active = self.active_cores(g);
        self.groups[g as usize]
            .policy
            .set_app_cores(Nanos(t), f64::from(active));
    }
}
