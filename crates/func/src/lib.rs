//! Storage functions, written once and run on either side. No I/O.
//!
//! Layout:
//! - [`ctx`]: the [`Ctx`] trait a storage function is written against (get, put, delete,
//!   multiget, list, args) and [`CtxError`].
//! - [`interrupt`]: [`Interrupt`], how a running call is stopped from outside (FUNCTION
//!   KILL, SCRIPT KILL).
//! - [`slice`]: [`Slice`] and its [`Bell`], how a call on a shared thread is paused from
//!   another when its turn is over (the Lua VM yields it midway, so one long call cannot
//!   hold a storage node's core).
//! - [`tx`]: [`TxState`], the read set with versions and the buffered write set that both
//!   sides' `Ctx` implementations keep, so OCC behaves identically wherever a function runs.
//! - [`registry`]: functions registered by name; the same registry is linked into the
//!   storage node and the client runtime.
//! - [`work`]: emulated compute, a calibrated busy-wait identical on both sides.
//! - [`memory`]: a `Ctx` over a plain map, for running functions without a node.
//! - [`args`]: little-endian argument readers shared by the built-ins.
//! - [`builtins`]: `noop`, `traverse`, `ycsbt`, `aggregate`, `auth` and their data sets.

pub mod args;
pub mod builtins;
pub mod ctx;
pub mod interrupt;
pub mod memory;
pub mod registry;
pub mod slice;
pub mod tx;
pub mod work;

pub use ctx::{Ctx, CtxError, CtxFuture, Listed};
pub use interrupt::Interrupt;
pub use registry::{FnError, FnFuture, Registry, StorageFn};
pub use slice::{Bell, Slice, TimeLimit};
pub use tx::{TxRead, TxState};
