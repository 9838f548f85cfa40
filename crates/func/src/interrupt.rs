//! A running call stopped from outside (FUNCTION KILL, SCRIPT KILL): the runtime that runs a
//! function hands it an [`Interrupt`] (`Ctx::interrupt`), another thread raises it with the
//! error the call ends with, and the function's own runtime (the Lua VM's instruction hook)
//! ends the call at its next check. The call then fails like any failed call: its buffered
//! writes are never committed, so a call is stopped whole, whatever it wrote.

use std::sync::{Arc, OnceLock};

/// A flag another thread raises, once, with the error a stopped call ends with.
#[derive(Clone, Debug, Default)]
pub struct Interrupt(Arc<OnceLock<&'static str>>);

impl Interrupt {
    /// A flag not raised yet.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Raises it with `error` (the first raise's error stands); true if this raised it.
    pub fn raise(&self, error: &'static str) -> bool {
        self.0.set(error).is_ok()
    }

    /// The error it was raised with, if it was.
    pub fn raised(&self) -> Option<&'static str> {
        self.0.get().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raise_is_seen_by_every_clone_and_the_first_error_stands() {
        let interrupt = Interrupt::new();
        let seen_by_the_call = interrupt.clone();
        assert_eq!(seen_by_the_call.raised(), None);
        assert!(interrupt.raise("first"));
        assert!(!interrupt.raise("second"));
        assert_eq!(seen_by_the_call.raised(), Some("first"));
    }
}
