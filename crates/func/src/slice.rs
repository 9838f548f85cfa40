//! A running call's share of a shared thread: the runtime that runs a function on a
//! thread other work waits for (a storage node's core) hands it a [`Slice`]
//! (`Ctx::slice`), and a function runtime that can pause a call midway (the Lua VM's
//! instruction hook) asks it, at every check, whether the slice has ended; the call then
//! yields, its transaction waits, and the thread serves others before it resumes. The
//! slice reads the clock, not this crate: it is the runtime's own [`SliceEnd`]. It also
//! tells when the call has used all the CPU time its runtime allows it, so a call that
//! cannot be paused where it spins (inside a C function) still ends.

use std::fmt;
use std::sync::Arc;

/// Whether the slice of the call asking has ended (implemented by the runtime that gave it).
pub trait SliceEnd: Send + Sync {
    /// True once the call should give its thread back.
    fn reached(&self) -> bool;

    /// The error the call ends with once it has used the CPU time its runtime allows.
    fn time_limit(&self) -> Option<&'static str>;
}

/// A call's slice as the function runtime sees it.
#[derive(Clone)]
pub struct Slice(Arc<dyn SliceEnd>);

impl Slice {
    /// The slice whose end `end` tells.
    pub fn new(end: Arc<dyn SliceEnd>) -> Slice {
        Slice(end)
    }

    /// True once the call should give its thread back.
    pub fn ended(&self) -> bool {
        self.0.reached()
    }

    /// The error the call must end with: its CPU time limit is used up.
    pub fn time_limit(&self) -> Option<&'static str> {
        self.0.time_limit()
    }
}

impl fmt::Debug for Slice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slice").field("ended", &self.ended()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Flag(AtomicBool);

    impl SliceEnd for Flag {
        fn reached(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }

        fn time_limit(&self) -> Option<&'static str> {
            None
        }
    }

    #[test]
    fn a_slice_tells_what_its_runtime_says() {
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let slice = Slice::new(flag.clone());
        let seen_by_the_call = slice.clone();
        assert!(!seen_by_the_call.ended());
        flag.0.store(true, Ordering::Relaxed);
        assert!(seen_by_the_call.ended());
    }
}
