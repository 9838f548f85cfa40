//! Background threads that must not take CPU from the ones serving requests: the storage
//! node's snapshot thread runs at the lowest normal priority (nice 19). It still makes
//! progress on a saturated CPU (about 1.5 % of it against one thread at nice 0), unlike
//! `SCHED_IDLE`, which would starve it and let the log grow without bound.

/// The nice value of a background thread.
pub const BACKGROUND_NICE: i32 = 19;

/// Lowers the calling thread to [`BACKGROUND_NICE`] (lowering needs no privilege).
pub fn lower_to_background() -> std::io::Result<()> {
    // SAFETY: setpriority with PRIO_PROCESS and 0 names the calling thread on Linux; it
    // reads no memory of ours.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, BACKGROUND_NICE) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_thread_runs_at_nice_19_and_others_do_not() {
        let nice_of_this_thread = || {
            // SAFETY: as above; getpriority only returns a value.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
        };
        let before = nice_of_this_thread();
        let lowered = std::thread::spawn(move || {
            lower_to_background().unwrap();
            nice_of_this_thread()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, BACKGROUND_NICE);
        assert_eq!(nice_of_this_thread(), before, "only the calling thread is lowered");
    }
}
