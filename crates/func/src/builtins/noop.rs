//! `noop`: does nothing and returns nothing — the bare cost of an invocation.

use bytes::Bytes;

use crate::ctx::Ctx;
use crate::registry::FnFuture;

/// Registered name.
pub const NAME: &str = "noop";

/// Touches no data, so it has no routing key: any node may run it.
pub fn route(_args: &Bytes) -> Option<Bytes> {
    None
}

/// Returns an empty result without touching data.
pub fn run(_ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move { Ok(Bytes::new()) })
}
