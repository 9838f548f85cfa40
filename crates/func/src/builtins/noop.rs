//! `noop`: does nothing and returns nothing — the bare cost of an invocation.

use bytes::Bytes;

use crate::ctx::Ctx;
use crate::registry::FnFuture;

/// Registered name.
pub const NAME: &str = "noop";

/// Returns an empty result without touching data.
pub fn run(_ctx: &mut dyn Ctx) -> FnFuture<'_> {
    Box::pin(async move { Ok(Bytes::new()) })
}
