//! A request's hops through the cluster: the jobs it runs on its app node and its storage
//! node, and the messages between them.

use ferry_control::Placement;
use rand::Rng;

use super::{Engine, Kind};
use crate::model::ComputeDist;

impl Engine<'_, '_> {
    pub(super) fn compute_ns(&mut self, fn_idx: u32) -> u64 {
        let f = &self.cfg.workload.functions[fn_idx as usize];
        match f.dist {
            ComputeDist::Fixed => f.compute.0,
            ComputeDist::Exp => {
                let u: f64 = self.rng_service.gen();
                (-(1.0 - u).ln() * f.compute.0 as f64).round() as u64
            }
        }
    }

    /// A message of request `id` reaches the app node at `t`.
    pub(super) fn app_job(&mut self, t: u64, id: u32) {
        let cl = self.cfg.cluster;
        let c = &cl.costs;
        let r = self.reqs[id as usize];
        let f = &self.cfg.workload.functions[r.fn_idx as usize];
        let (accesses, round_trips, object_bytes) = (f.accesses, f.local_round_trips(), f.object_bytes);
        // (service time, bytes of the message sent at the end, or None if the request ends)
        let (service, send) = match (r.placement, r.stage) {
            (Placement::Remote, 0) => (c.app_msg_ns, Some(c.header_bytes)),
            (Placement::Remote, _) => (c.app_msg_ns, None),
            (Placement::Local, 0) => (c.app_invoke_ns + c.app_msg_ns, Some(c.header_bytes)),
            (Placement::Local, s) => {
                // After read k = s / 2 the function receives the object and computes; after
                // the commit reply (k = accesses + 1) it only finishes.
                let compute = if s / 2 <= accesses {
                    c.app_bytes_ns(object_bytes) + self.compute_ns(r.fn_idx)
                } else {
                    0
                };
                let more = s / 2 < round_trips;
                (c.app_msg_ns + compute, more.then_some(c.header_bytes))
            }
        };
        let (start, finish) = self.apps[r.app_node as usize].0.serve(t, service);
        self.groups[r.group as usize].app_busy_ns += service;
        self.groups[r.group as usize].busy_app_ns += service;
        if let Some(w) = self.window_at(t) {
            w.app.record(service, start - t);
        }
        let req = &mut self.reqs[id as usize];
        req.app_cpu += service;
        req.stage += 1;
        match send {
            Some(bytes) => {
                req.bytes += bytes;
                req.sending = bytes;
                self.push(finish, Kind::AppSend, id);
            }
            None => self.push(finish, Kind::Done, id),
        }
    }

    /// Request `id`'s message leaves its app node at `t`, for its storage node.
    pub(super) fn app_send(&mut self, t: u64, id: u32) {
        let r = self.reqs[id as usize];
        let at = self.apps[r.app_node as usize].1.send(t, r.sending);
        self.push(at, Kind::StorageArrive, id);
    }

    /// Request `id`'s message leaves its storage node at `t`, for its app node.
    pub(super) fn storage_send(&mut self, t: u64, id: u32) {
        let r = self.reqs[id as usize];
        let at = self.storages[r.storage_node as usize].1.send(t, r.sending);
        self.push(at, Kind::AppArrive, id);
    }

    /// A message of request `id` reaches the storage node at `t`.
    pub(super) fn storage_job(&mut self, t: u64, id: u32) {
        let cl = self.cfg.cluster;
        let c = &cl.costs;
        let r = self.reqs[id as usize];
        let f = &self.cfg.workload.functions[r.fn_idx as usize];
        let (accesses, writes, object_bytes) = (f.accesses, f.writes, f.object_bytes);
        let (service, reply_bytes) = match r.placement {
            Placement::Remote => {
                let mut s = c.storage_msg_ns + c.storage_invoke_ns;
                let factor = c.storage_compute_factor;
                for _ in 0..accesses {
                    let compute = (self.compute_ns(r.fn_idx) as f64 * factor).round() as u64;
                    s += c.storage_get_ns + compute;
                }
                (s + u64::from(writes) * c.storage_get_ns, c.header_bytes)
            }
            // The reads of a local execution, then (for a writing function) its commit,
            // which installs every written object.
            Placement::Local if r.stage / 2 < accesses => (
                c.storage_msg_ns + c.storage_get_ns + c.storage_bytes_ns(object_bytes),
                c.header_bytes + object_bytes,
            ),
            Placement::Local => (c.storage_msg_ns + u64::from(writes) * c.storage_get_ns, c.header_bytes),
        };
        let (start, finish) = self.storages[r.storage_node as usize].0.serve(t, service);
        self.groups[r.group as usize].busy_storage_ns += service;
        if let Some(w) = self.window_at(t) {
            w.storage.record(service, start - t);
        }
        let req = &mut self.reqs[id as usize];
        req.storage_cpu += service;
        req.stage += 1;
        req.bytes += reply_bytes;
        req.sending = reply_bytes;
        self.push(finish, Kind::StorageSend, id);
    }
}
