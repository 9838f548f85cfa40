//! The checkpointer: one thread that takes a checkpoint ([`Wal::checkpoint`]) when the
//! log has grown by `snapshot_log_bytes` since the last one, or when asked (`BGSAVE`
//! asks and returns, `SAVE` waits for the result). It never runs two at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use thiserror::Error;

use crate::checkpoint::{CheckpointReport, Tenants};
use crate::error::WalError;
use crate::log::Wal;

/// Log growth since the last checkpoint that starts the next one, by default.
pub const DEFAULT_SNAPSHOT_LOG_BYTES: u64 = 256 * 1024 * 1024;

/// How often the thread looks at the log's size.
const SIZE_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// Callers waiting for one checkpoint at most (`SAVE` connections).
const MAX_WAITERS: usize = 1024;

/// Why a checkpoint was not started.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SnapshotBusy {
    /// `BGSAVE` while one runs or is asked for.
    #[error("a snapshot is already running or about to start")]
    Running,
    /// Too many callers wait for the next one.
    #[error("too many clients wait for a snapshot; retry later")]
    TooManyWaiters,
    /// The node is stopping.
    #[error("the node is stopping")]
    Stopping,
}

/// The result a waiting caller gets.
pub type CheckpointResult = Result<CheckpointReport, String>;

/// What a waiting caller runs with the result (on the checkpointer's thread: it must not
/// block).
pub type WhenDone = Box<dyn FnOnce(CheckpointResult) + Send>;

struct State {
    /// A checkpoint was asked for and has not started.
    requested: bool,
    running: bool,
    /// Callers to tell when the next checkpoint to start ends.
    waiters: Vec<WhenDone>,
    /// The log offset the last checkpoint left the log from.
    last_log_from: u64,
    /// Checkpoints finished, and the last one's report.
    finished: u64,
    last: Option<CheckpointResult>,
}

struct Shared {
    wal: Arc<Wal>,
    tenants: Arc<dyn Tenants>,
    trigger_log_bytes: u64,
    state: Mutex<State>,
    wake: Condvar,
    stopping: AtomicBool,
}

/// The running checkpointer of a node.
pub struct Checkpointer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    /// Starts the thread. `log_from` is where the log recovery replayed starts (the
    /// oldest snapshot's mark, or the log's start); growth is counted from there.
    pub fn start(
        wal: Arc<Wal>,
        tenants: Arc<dyn Tenants>,
        trigger_log_bytes: u64,
        log_from: u64,
    ) -> Result<Checkpointer, WalError> {
        let shared = Arc::new(Shared {
            wal,
            tenants,
            trigger_log_bytes: trigger_log_bytes.max(1),
            state: Mutex::new(State {
                requested: false,
                running: false,
                waiters: Vec::new(),
                last_log_from: log_from,
                finished: 0,
                last: None,
            }),
            wake: Condvar::new(),
            stopping: AtomicBool::new(false),
        });
        let thread = std::thread::Builder::new()
            .name("ferry-snapshot".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || run(&shared)
            })
            .map_err(|err| {
                WalError::io(
                    std::path::Path::new("ferry-snapshot"),
                    "cannot start the snapshot thread",
                    err,
                )
            })?;
        Ok(Checkpointer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Starts a checkpoint in the background (`BGSAVE`); refused while one runs.
    pub fn request(&self) -> Result<(), SnapshotBusy> {
        let mut state = self.shared.state.lock();
        if self.shared.stopping.load(Ordering::Acquire) {
            return Err(SnapshotBusy::Stopping);
        }
        if state.running || state.requested {
            return Err(SnapshotBusy::Running);
        }
        state.requested = true;
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Asks for a checkpoint that starts after this call and hands its result to
    /// `when_done` (`SAVE`): a request while one runs is served by the next.
    pub fn request_then(&self, when_done: WhenDone) -> Result<(), SnapshotBusy> {
        let mut state = self.shared.state.lock();
        if self.shared.stopping.load(Ordering::Acquire) {
            return Err(SnapshotBusy::Stopping);
        }
        if state.waiters.len() >= MAX_WAITERS {
            return Err(SnapshotBusy::TooManyWaiters);
        }
        state.waiters.push(when_done);
        state.requested = true;
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Checkpoints finished so far, and the result of the last one.
    pub fn last(&self) -> (u64, Option<CheckpointResult>) {
        let state = self.shared.state.lock();
        (state.finished, state.last.clone())
    }

    /// Stops the thread: a checkpoint under way is abandoned (its snapshot file is
    /// removed on the next start) and waiting callers are told.
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        {
            let _state = self.shared.state.lock();
            self.shared.wake.notify_one();
        }
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared) {
    // A snapshot is background work: on the node's CPUs the workers come first (p99
    // during back-to-back snapshots 0.9-2.1x of without, 2.8-6.9x at nice 0).
    if let Err(err) = ferry_os::priority::lower_to_background() {
        tracing::warn!(error = %err, "cannot lower the snapshot thread's priority");
    }
    let keep_going = || !shared.stopping.load(Ordering::Acquire);
    loop {
        let waiters = {
            let mut state = shared.state.lock();
            loop {
                if !keep_going() {
                    for waiter in state.waiters.drain(..) {
                        waiter(Err(SnapshotBusy::Stopping.to_string()));
                    }
                    return;
                }
                let grown = shared.wal.appended_lsn().saturating_sub(state.last_log_from);
                if state.requested || grown >= shared.trigger_log_bytes {
                    break;
                }
                shared.wake.wait_for(&mut state, SIZE_CHECK_INTERVAL);
            }
            state.requested = false;
            state.running = true;
            std::mem::take(&mut state.waiters)
        };
        // A bug in a checkpoint must not leave `running` set for good (BGSAVE refused,
        // SAVE waiting forever, the log growing): it becomes a failed checkpoint.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.wal.checkpoint(&*shared.tenants, &keep_going)
        }))
        .unwrap_or_else(|_| Err(WalError::Failed("the snapshot thread panicked".into())));
        match &result {
            Ok(report) => tracing::info!(
                tenants = report.tenants,
                objects = report.objects,
                snapshot_bytes = report.snapshot_bytes,
                segments_removed = report.segments_removed,
                log_bytes_removed = report.log_bytes_removed,
                took_ms = report.took.as_millis() as u64,
                "snapshot taken"
            ),
            Err(err) => tracing::error!(error = %err, "snapshot failed"),
        }
        let result: CheckpointResult = result.map_err(|err| err.to_string());
        let mut state = shared.state.lock();
        state.running = false;
        state.finished += 1;
        match &result {
            Ok(report) => state.last_log_from = report.log_from,
            // Not retried at once in a loop: the next try waits for the log to grow again.
            Err(_) => state.last_log_from = shared.wal.appended_lsn(),
        }
        state.last = Some(result.clone());
        drop(state);
        for waiter in waiters {
            waiter(result.clone());
        }
    }
}
