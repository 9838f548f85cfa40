//! The admission rate a gateway reports on every answer, where a client's connections
//! leave it for the policy that follows it ([`crate::FollowGateway`]).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The admission rate a gateway last reported for this client's tenant (0: none yet, the
/// peer is not a gateway). Cheap to clone; clones share it.
#[derive(Clone, Debug, Default)]
pub struct GatewayRate(Arc<AtomicU32>);

impl GatewayRate {
    /// The latest R in requests/s, if a gateway reported one.
    pub fn rate_ops(&self) -> Option<u32> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            rate => Some(rate),
        }
    }

    /// Notes the rate field of an answer (0, from a process that is not a gateway, is no
    /// news and leaves the last rate in place).
    pub fn observe(&self, rate_ops: u32) {
        if rate_ops > 0 {
            self.0.store(rate_ops, Ordering::Relaxed);
        }
    }
}
