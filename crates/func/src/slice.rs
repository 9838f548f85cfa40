//! A running call's share of a shared thread: the runtime that runs a function on a
//! thread other work waits for (a storage node's core) hands it a [`Slice`]
//! (`Ctx::slice`). A function runtime that can pause a call midway (the Lua VM) hangs on
//! the slice's [`Bell`], for as long as the call runs, what pauses it; the runtime that
//! shares the thread rings the bell from another thread when the call's slice ends (a
//! storage node's watchdog), and the call yields at its next instruction, its
//! transaction waits, and the thread serves others before it resumes. Nothing is checked
//! while the slice lasts, so a call costs nothing for being pausable until it is paused.
//!
//! The slice also tells ([`TimeLimit`]) when the call has used all the CPU time its
//! runtime allows, so a paused call past it ends instead of resuming. The runtime reads
//! the clock for both, not this crate.

use std::fmt;
use std::sync::{Arc, Mutex};

/// Whether the call has used the CPU time its runtime allows (implemented by the runtime
/// that gave the slice).
pub trait TimeLimit: Send + Sync {
    /// The error the call ends with once it has used the CPU time its runtime allows.
    fn reached(&self) -> Option<&'static str>;
}

/// What pauses a running call, from any thread.
type Pause = Box<dyn Fn() + Send + Sync>;

/// How another thread pauses a running call: the function runtime hangs what pauses its
/// call on it ([`Bell::hang`]) for as long as the call runs, and the thread's owner rings it.
#[derive(Clone, Default)]
pub struct Bell(Arc<Mutex<Option<Pause>>>);

impl Bell {
    /// A bell with nothing hung on it.
    pub fn new() -> Bell {
        Bell::default()
    }

    /// Pauses the call hung on the bell, if one is; true if one was.
    pub fn ring(&self) -> bool {
        let hung = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match hung.as_ref() {
            Some(pause) => {
                pause();
                true
            }
            None => false,
        }
    }

    /// Hangs `pause` on the bell until the returned guard is dropped: the runtime drops it
    /// when the call ends (or is dropped), after which no ring reaches the call.
    pub fn hang(&self, pause: Pause) -> Hung {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(pause);
        Hung(self.clone())
    }
}

impl fmt::Debug for Bell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hung = self.0.lock().map(|hung| hung.is_some()).unwrap_or(false);
        f.debug_struct("Bell").field("hung", &hung).finish()
    }
}

/// A pause hung on a [`Bell`]; dropping it takes the pause off (waiting for a ring in
/// progress to end).
pub struct Hung(Bell);

impl Drop for Hung {
    fn drop(&mut self) {
        *self.0 .0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }
}

/// A call's slice as the function runtime sees it.
#[derive(Clone)]
pub struct Slice {
    bell: Bell,
    limit: Arc<dyn TimeLimit>,
}

impl Slice {
    /// The slice whose end is rung on `bell`, under the CPU time limit `limit`.
    pub fn new(bell: Bell, limit: Arc<dyn TimeLimit>) -> Slice {
        Slice { bell, limit }
    }

    /// Where the function runtime hangs what pauses the call.
    pub fn bell(&self) -> &Bell {
        &self.bell
    }

    /// The error the call must end with: its CPU time limit is used up.
    pub fn time_limit(&self) -> Option<&'static str> {
        self.limit.reached()
    }
}

impl fmt::Debug for Slice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slice")
            .field("bell", &self.bell)
            .field("time_limit", &self.time_limit())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn a_ring_reaches_the_pause_hung_only_while_it_hangs() {
        let bell = Bell::new();
        assert!(!bell.ring(), "nothing hung yet");
        let paused = Arc::new(AtomicU32::new(0));
        let hung = {
            let paused = Arc::clone(&paused);
            bell.hang(Box::new(move || {
                paused.fetch_add(1, Ordering::Relaxed);
            }))
        };
        let rung_elsewhere = bell.clone();
        assert!(rung_elsewhere.ring());
        assert!(rung_elsewhere.ring());
        assert_eq!(paused.load(Ordering::Relaxed), 2);
        drop(hung);
        assert!(!rung_elsewhere.ring(), "the call ended");
        assert_eq!(paused.load(Ordering::Relaxed), 2);
    }

    struct Spent;

    impl TimeLimit for Spent {
        fn reached(&self) -> Option<&'static str> {
            Some("spent")
        }
    }

    #[test]
    fn a_slice_tells_its_runtimes_time_limit() {
        let slice = Slice::new(Bell::new(), Arc::new(Spent));
        assert_eq!(slice.clone().time_limit(), Some("spent"));
    }
}
