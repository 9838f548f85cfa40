//! Pausing a running call from another thread. A call on a storage node's core hangs a
//! [`Pausable`] on its slice's bell (`ferry_func::Bell`); when the slice ends, the node's
//! watchdog rings it, which arms a count hook of one instruction on the call's coroutine;
//! the hook removes itself and yields the coroutine, and the call's future is pending once
//! (`ferry_func::ctx::yield_once`) before the coroutine resumes where it stopped.
//!
//! No hook runs while the slice lasts: in Lua 5.4 an installed count hook costs a call of
//! `luaG_traceexec` on every instruction, whatever the count (profiled: half the time of a
//! loop of arithmetic), so a hook armed only at the slice's end costs a call nothing until
//! it is paused. This is how Lua's own interpreter stops a script on Ctrl-C (`lua.c` arms
//! a hook from its signal handler).

use std::ffi::c_int;

use mlua::{ffi, Thread};

/// Instructions between two tries to yield a call paused where Lua cannot yield (inside a
/// C function such as `table.sort`'s comparator): the hook stays armed at this count until
/// the call is back where it can yield.
const RETRY_EVERY_INSTRUCTIONS: c_int = 1000;

/// A coroutine's Lua state, to pause from any thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pausable(usize);

impl Pausable {
    /// The state of `thread`.
    pub(crate) fn of(thread: &Thread) -> Pausable {
        Pausable(thread.to_pointer() as usize)
    }

    /// Makes the coroutine yield at its next instruction (or, inside a C function, at the
    /// first instruction it runs back where it can).
    ///
    /// The state must be alive: a call hangs its `Pausable` on a bell only while it runs,
    /// and takes it off (waiting for a ring in progress) before its VM can be dropped.
    /// Arming a hook from another thread while the state runs is what Lua allows
    /// (`lua_sethook`: "This function can be called during a signal", ldebug.c): the hook
    /// mask is an atomic value and the hook is checked before it is called.
    pub(crate) fn pause(self) {
        // SAFETY: the state is alive (above), and lua_sethook may run concurrently with it.
        unsafe {
            ffi::lua_sethook(self.state(), Some(pause_hook), ffi::LUA_MASKCOUNT, 1);
        }
    }

    /// Removes any hook from the coroutine (a pause armed for an earlier call included).
    /// Called on the thread that runs the coroutine, between its resumes.
    pub(crate) fn clear(self) {
        // SAFETY: the state is alive: the caller owns the VM holding it.
        unsafe {
            ffi::lua_sethook(self.state(), None, 0, 0);
        }
    }

    fn state(self) -> *mut ffi::lua_State {
        self.0 as *mut ffi::lua_State
    }
}

/// The hook a pause arms: removes itself and yields the coroutine with no values (every
/// command a call yields has its words, so an empty yield is a pause).
unsafe extern "C-unwind" fn pause_hook(state: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
    // SAFETY: Lua calls the hook on the running state; a hook may yield with no values
    // (the yield happens once the hook returns, so no Rust frame is unwound).
    unsafe {
        if ffi::lua_isyieldable(state) != 0 {
            ffi::lua_sethook(state, None, 0, 0);
            ffi::lua_yield(state, 0);
        } else {
            ffi::lua_sethook(state, Some(pause_hook), ffi::LUA_MASKCOUNT, RETRY_EVERY_INSTRUCTIONS);
        }
    }
}
