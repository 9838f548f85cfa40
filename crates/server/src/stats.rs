//! Counters of the storage node, reported by the `stats` operation.

use ferry_proto::TenantId;
use std::sync::atomic::{AtomicU64, Ordering};

use ferry_net::metrics::{Sample, Scope};

/// Counters of one tenant. Relaxed atomics: they are statistics, not synchronisation.
#[derive(Debug, Default)]
pub struct TenantCounters {
    /// Requests answered (any status).
    pub requests: AtomicU64,
    /// Worker CPU time spent on this tenant's requests, in nanoseconds: the basis of
    /// per-tenant fairness figures.
    pub cpu_ns: AtomicU64,
    /// Object bytes returned.
    pub bytes_returned: AtomicU64,
    /// Server-side invocations completed successfully.
    pub invocations: AtomicU64,
    /// Server-side invocations that failed (error, panic, budget).
    pub invocation_failures: AtomicU64,
    /// Server-side invocation attempts retried after an OCC conflict.
    pub invocation_retries: AtomicU64,
    /// Requests refused with `overloaded`.
    pub overloaded: AtomicU64,
    /// Requests answered `tx_abort`.
    pub tx_aborts: AtomicU64,
    /// Invocations handed back to their clients (ASFP pushback).
    pub pushbacks: AtomicU64,
    /// Node CPU spent on invocations before they were pushed back: work the client redoes.
    pub pushback_wasted_cpu_ns: AtomicU64,
    /// Invocations handed back because they reached another cluster node's key.
    pub handoffs: AtomicU64,
}

impl TenantCounters {
    /// Adds one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends this tenant's counters, named `tenant.<id>.<counter>`.
    pub fn report(&self, tenant: TenantId, out: &mut Vec<Sample>) {
        let fields: [(&'static str, &AtomicU64); 11] = [
            ("requests", &self.requests),
            ("cpu_ns", &self.cpu_ns),
            ("bytes_returned", &self.bytes_returned),
            ("invocations", &self.invocations),
            ("invocation_failures", &self.invocation_failures),
            ("invocation_retries", &self.invocation_retries),
            ("overloaded", &self.overloaded),
            ("tx_aborts", &self.tx_aborts),
            ("pushbacks", &self.pushbacks),
            ("pushback_wasted_cpu_ns", &self.pushback_wasted_cpu_ns),
            ("handoffs", &self.handoffs),
        ];
        for (name, counter) in fields {
            out.push(Sample::counter(
                Scope::Tenant(tenant),
                name,
                counter.load(Ordering::Relaxed),
            ));
        }
    }
}

/// Counters of one worker.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Tasks taken from its own queue.
    pub tasks_own: AtomicU64,
    /// Tasks stolen from other workers' queues.
    pub tasks_stolen: AtomicU64,
    /// Tasks run inline by the connection that read them, on this core: no hand-off.
    pub tasks_inline: AtomicU64,
    /// Tasks queued here from another thread (a connection on another core, the expiry
    /// cycle): handed across threads.
    pub tasks_handed: AtomicU64,
    /// Time spent executing tasks and invocation steps, in nanoseconds.
    pub busy_ns: AtomicU64,
}

/// Counters of the node as a whole (its connections' are `Node::connections`').
#[derive(Debug, Default)]
pub struct NodeCounters {
    /// Worker threads replaced by the watchdog after a runaway invocation.
    pub worker_replacements: AtomicU64,
}
