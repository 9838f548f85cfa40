//! Fair sharing of one worker between the tenants homed on it: start-time fair queueing
//! by CPU time.
//!
//! Each tenant has a lane of waiting tasks and a virtual time, the CPU its work on this
//! worker has used. The next task comes from the backlogged lane with the smallest virtual
//! time, so backlogged tenants get equal CPU whatever each request costs (max-min fairness),
//! and a tenant that was idle restarts at the current virtual time instead of cashing in
//! the time it did not use. With one tenant per worker this is plain FIFO.

use ferry_proto::TenantId;
use std::collections::VecDeque;

struct Lane<T> {
    tenant: TenantId,
    items: VecDeque<T>,
    /// CPU nanoseconds charged to this tenant on this worker (shifted on re-activation).
    vtime_ns: u64,
}

/// Tasks of several tenants, handed out fairly by CPU time.
pub(crate) struct FairQueue<T> {
    lanes: Vec<Lane<T>>,
    len: usize,
    /// Virtual time of the last task handed out: where a re-activated tenant starts.
    virtual_now_ns: u64,
}

impl<T> FairQueue<T> {
    pub(crate) fn new() -> FairQueue<T> {
        FairQueue {
            lanes: Vec::new(),
            len: 0,
            virtual_now_ns: 0,
        }
    }

    /// Tasks waiting, over all tenants.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn lane(&mut self, tenant: TenantId) -> &mut Lane<T> {
        let index = match self.lanes.iter().position(|lane| lane.tenant == tenant) {
            Some(index) => index,
            None => {
                self.lanes.push(Lane {
                    tenant,
                    items: VecDeque::new(),
                    vtime_ns: self.virtual_now_ns,
                });
                self.lanes.len() - 1
            }
        };
        &mut self.lanes[index]
    }

    /// Queues `item` for `tenant`.
    pub(crate) fn push(&mut self, tenant: TenantId, item: T) {
        let virtual_now = self.virtual_now_ns;
        let lane = self.lane(tenant);
        if lane.items.is_empty() {
            lane.vtime_ns = lane.vtime_ns.max(virtual_now);
        }
        lane.items.push_back(item);
        self.len += 1;
    }

    /// The oldest task of the backlogged tenant that has used the least CPU.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let lane = self
            .lanes
            .iter_mut()
            .filter(|lane| !lane.items.is_empty())
            .min_by_key(|lane| lane.vtime_ns)?;
        self.virtual_now_ns = self.virtual_now_ns.max(lane.vtime_ns);
        self.len -= 1;
        lane.items.pop_front()
    }

    /// Charges `ns` of CPU to `tenant`.
    pub(crate) fn charge(&mut self, tenant: TenantId, ns: u64) {
        let lane = self.lane(tenant);
        lane.vtime_ns = lane.vtime_ns.saturating_add(ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_tenant_is_fifo() {
        let mut queue = FairQueue::new();
        for i in 0..5 {
            queue.push(TenantId(1), i);
        }
        let order: Vec<i32> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert_eq!(queue.len(), 0);
    }

    #[test]
    fn backlogged_tenants_get_equal_cpu_whatever_their_cost() {
        // Tenant 1's tasks cost 10 units, tenant 2's cost 1: over a long run each must get
        // about half of the CPU, i.e. tenant 2 runs ~10x as many tasks.
        let mut queue = FairQueue::new();
        let mut cpu = [0u64; 3];
        for _ in 0..1000 {
            queue.push(TenantId(1), 1u32);
            queue.push(TenantId(2), 2u32);
        }
        for _ in 0..1000 {
            let tenant = queue.pop().unwrap();
            let cost = if tenant == 1 { 10 } else { 1 };
            cpu[tenant as usize] += cost;
            queue.charge(TenantId(tenant), cost);
        }
        let share = cpu[1] as f64 / (cpu[1] + cpu[2]) as f64;
        assert!((share - 0.5).abs() < 0.02, "tenant 1 got {share:.3} of the CPU");
    }

    #[test]
    fn an_idle_tenant_does_not_hoard_credit() {
        let mut queue = FairQueue::new();
        // Tenant 1 runs alone for a long time.
        for _ in 0..100 {
            queue.push(TenantId(1), 1u32);
            queue.pop();
            queue.charge(TenantId(1), 10);
        }
        // Tenant 2 arrives: it must not monopolise the worker for the 1000 units tenant 1
        // used while it was away.
        for _ in 0..20 {
            queue.push(TenantId(1), 1u32);
            queue.push(TenantId(2), 2u32);
        }
        let mut first_ten = Vec::new();
        for _ in 0..10 {
            let tenant = queue.pop().unwrap();
            queue.charge(TenantId(tenant), 10);
            first_ten.push(tenant);
        }
        assert!(first_ten.contains(&1), "tenant 1 starved by a newcomer: {first_ten:?}");
    }
}
