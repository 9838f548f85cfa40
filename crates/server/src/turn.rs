//! A turn on a core for work that runs in a task of the core's own: a RESP connection's
//! commands, a cycle of active expiry. When the core is idle the work runs at once,
//! inline; otherwise it queues a turn in its tenant's lane of the core's fair queue, and
//! runs when the worker loop comes to that lane (it grants the turn, and the waiting task
//! runs next on the same thread). So a busy core serves its tenants by their CPU time,
//! whichever connection their work comes from, and no work is handed to another thread
//! or answered through a channel: the task that waits for its turn runs its work itself.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;

use crate::node::{Node, TenantState};
use crate::stats::TenantCounters;
use crate::worker::{Task, Work};

/// A queued turn, granted by the core's worker loop.
#[derive(Default)]
pub(crate) struct Turn {
    granted: Notify,
}

impl Turn {
    /// Lets the waiting task run (a task gone meanwhile leaves nothing to do).
    pub(crate) fn grant(&self) {
        self.granted.notify_one();
    }
}

/// The core's queue is full: the work is refused `BUSY`.
#[derive(Debug)]
pub(crate) struct QueueFull;

/// A turn being used: while it is held the core is busy with it, and when it ends the
/// worker loop is woken to serve what queued meanwhile.
pub(crate) struct Taken<'a> {
    /// The worker loop's wake-up, for a turn taken from an idle core.
    wake_after: Option<&'a Notify>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if let Some(wake) = self.wake_after {
            wake.notify_one();
        }
    }
}

/// Waits for a turn of `tenant` on core `core`, which must be the calling thread's:
/// at once when the core is idle (its worker loop asleep with nothing queued; the turn
/// takes the idleness, so what the core's other connections read meanwhile queues), else
/// in the tenant's lane. `functions`: the work calls storage functions (ASFP counts it as
/// an arriving invocation while it waits).
pub(crate) async fn take<'a>(
    node: &'a Node,
    core: usize,
    tenant: &Arc<TenantState>,
    functions: bool,
) -> Result<Taken<'a>, QueueFull> {
    debug_assert!(node.pool.on_core(core), "a turn is taken on its own core");
    let pool = &node.pool;
    let slot = &pool.slots[core];
    if node.inline_data_ops && pool.queue_len(core) == 0 && slot.take_idleness() {
        TenantCounters::bump(&slot.counters.tasks_inline);
        return Ok(Taken {
            wake_after: Some(slot.wake()),
        });
    }
    let turn = Arc::new(Turn::default());
    let task = Task {
        tenant: Arc::clone(tenant),
        received: Instant::now(),
        work: Work::Turn {
            turn: Arc::clone(&turn),
            functions,
        },
    };
    pool.submit(core, task).map_err(|_| QueueFull)?;
    turn.granted.notified().await;
    Ok(Taken { wake_after: None })
}

/// Charges `ns` of CPU that work of `tenant` used in a turn on core `core`: to the tenant,
/// the core's busy time, and the tenant's lane of that core, where its turns queue.
pub(crate) fn charge(node: &Node, core: usize, tenant: &TenantState, ns: u64) {
    tenant.counters.cpu_ns.fetch_add(ns, Ordering::Relaxed);
    node.pool.slots[core].counters.busy_ns.fetch_add(ns, Ordering::Relaxed);
    node.pool.charge(core, tenant.id, ns);
}
