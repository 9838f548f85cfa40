//! FUNCTION KILL and SCRIPT KILL: the calls of Lua functions (FCALL) and scripts (EVAL) a
//! tenant has running, each with the [`Interrupt`] its VM checks as it counts instructions,
//! and Redis's answers to a kill. A runtime registers each call it starts ([`RunningCalls::start`])
//! and the registration ends with the call (the [`Running`] guard is dropped).
//!
//! Unlike Redis, a script that has written can be killed too: its writes are buffered until
//! it commits, so killing it applies none of them (Redis answers `UNKILLABLE` there, as it
//! cannot take writes back).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ferry_func::Interrupt;
use ferry_resp::Reply;

/// What a killed call ends with (Redis's words, for functions and scripts alike).
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// Redis's answer to a kill with nothing of its kind, or anything, running.
const NOT_BUSY: &str = "NOTBUSY No scripts in execution right now.";

/// What a running call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// FCALL of a library's function: FUNCTION KILL stops it.
    Function,
    /// EVAL of a script: SCRIPT KILL stops it.
    Script,
}

impl CallKind {
    /// The kind of the invocation `name` (`fcall.<function>`, `script.<sha1>`), if it runs
    /// Lua code a kill can stop.
    pub fn of(name: &str) -> Option<CallKind> {
        if name.starts_with(crate::fcall::FAMILY) {
            Some(CallKind::Function)
        } else if name.starts_with(crate::script::FAMILY) {
            Some(CallKind::Script)
        } else {
            None
        }
    }

    /// Redis's answer to a kill of the other kind while only calls of this kind run.
    fn busy(self) -> &'static str {
        match self {
            CallKind::Function => {
                "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
            }
            CallKind::Script => {
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
            }
        }
    }
}

/// A tenant's running calls.
#[derive(Debug, Default)]
pub struct RunningCalls {
    calls: Mutex<Vec<(u64, CallKind, Interrupt)>>,
    next_id: AtomicU64,
}

/// One registered call; dropping it ends the registration.
#[derive(Debug)]
pub struct Running {
    calls: Arc<RunningCalls>,
    id: u64,
    interrupt: Interrupt,
}

impl Running {
    /// The flag that stops this call.
    pub fn interrupt(&self) -> &Interrupt {
        &self.interrupt
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.calls.lock().retain(|(id, _, _)| *id != self.id);
    }
}

impl RunningCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, CallKind, Interrupt)>> {
        self.calls.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a call of `kind` that starts now.
    pub fn start(self: &Arc<RunningCalls>, kind: CallKind) -> Running {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let interrupt = Interrupt::new();
        self.lock().push((id, kind, interrupt.clone()));
        Running {
            calls: Arc::clone(self),
            id,
            interrupt,
        }
    }

    /// FUNCTION KILL (`kind` Function) or SCRIPT KILL (Script): stops every running call of
    /// that kind and answers OK; with none, Redis's BUSY if calls of the other kind run,
    /// else NOTBUSY.
    pub fn kill(&self, kind: CallKind) -> Reply {
        let calls = self.lock();
        let mut killed = false;
        for (_, running, interrupt) in calls.iter() {
            if *running == kind {
                interrupt.raise(KILLED);
                killed = true;
            }
        }
        if killed {
            Reply::ok()
        } else if let Some((_, other, _)) = calls.first() {
            Reply::Error(other.busy().into())
        } else {
            Reply::Error(NOT_BUSY.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kill_stops_the_running_calls_of_its_kind_only() {
        let calls = Arc::new(RunningCalls::default());
        assert_eq!(calls.kill(CallKind::Script), Reply::Error(NOT_BUSY.into()));
        let function = calls.start(CallKind::Function);
        let refused = calls.kill(CallKind::Script);
        assert!(
            matches!(&refused, Reply::Error(text) if text.contains("FUNCTION KILL")),
            "{refused:?}"
        );
        assert_eq!(function.interrupt().raised(), None);
        assert_eq!(calls.kill(CallKind::Function), Reply::ok());
        assert_eq!(function.interrupt().raised(), Some(KILLED));
        drop(function);
        assert_eq!(
            calls.kill(CallKind::Function),
            Reply::Error(NOT_BUSY.into()),
            "it ended"
        );
        assert_eq!(CallKind::of("fcall.f"), Some(CallKind::Function));
        assert_eq!(CallKind::of("script.0123"), Some(CallKind::Script));
        assert_eq!(CallKind::of(crate::catalog::LOAD), None);
        assert_eq!(CallKind::of(crate::script::LOAD), None);
    }
}
