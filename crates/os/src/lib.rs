//! The operating-system glue ferry's processes share: pinning to CPUs, keeping pinned CPUs
//! awake, starting ferry processes as children, and reading CPU time from /proc. Linux only
//! (`sched_setaffinity`, `/proc`); no other ferry crate is needed, so the production
//! commands (`ferry server`, `gateway`, `compute`, `cluster up`) get these without the
//! benchmark crate.
//!
//! Layout:
//! - [`affinity`]: parse CPU sets (`0`, `0,2`, `1-3`) and pin the calling thread and every
//!   thread it starts afterwards.
//! - [`keep_warm`]: [`KeepWarm`], idle-priority spinning threads that keep pinned vCPUs
//!   from halting.
//! - [`startup`]: the start-up lines a ferry process prints ([`StartupLine`]), printed and
//!   parsed through one type.
//! - [`child`]: [`ChildServer`], a `ferry` subcommand run as a child process whose
//!   addresses are read from its start-up lines; stopped when dropped.
//! - [`cpu_time`]: a process's or some of its threads' CPU time, leaving out keep-warm
//!   threads.
//! - [`priority`]: background threads (snapshots) lowered below the serving ones.

pub mod affinity;
pub mod child;
pub mod cpu_time;
pub mod inherit;
pub mod keep_warm;
pub mod priority;
pub mod startup;

pub use affinity::{online_cpus, parse_cpu_set, pin_current_thread, AffinityError, MAX_CPUS};
pub use child::{ChildError, ChildServer, ChildSpec};
pub use keep_warm::{KeepWarm, KEEP_WARM_THREAD_PREFIX};
pub use startup::{StartupKind, StartupLine};
