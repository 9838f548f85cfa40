//! The blocking pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP):
//! the connection runs the pop's non-blocking step (LMPOP, ZMPOP, LMOVE, RPOPLPUSH) as an
//! ordinary data command; while it finds nothing, it waits until the service says the
//! tenant's data may have changed ([`RespService::written`]) or [`RECHECK_MS`] passes, and
//! tries again, until the timeout. Each try is one OCC transaction, so a pop never takes
//! an element another took. As in Redis, the connection reads nothing else meanwhile.
//!
//! Unlike Redis, waiting clients are not served in the order they blocked: whichever tries
//! first after a push takes the element.

use std::time::Duration;

use ferry_resp::blocking::Blocking;
use ferry_resp::{Command, Reply};

use crate::resp::{Queued, RespService, Session};

/// Longest a waiting pop goes without trying again, for changes the service does not
/// announce (a write over the ferry protocol, a commit on another node).
pub const RECHECK_MS: u64 = 100;

/// Runs `blocking` (naming `keys`) for the session until it pops or times out: the reply,
/// or on a timeout the step's empty one (the null array for BLPOP, BZPOPMIN, BLMPOP…,
/// null for BLMOVE and BRPOPLPUSH, as Redis answers).
pub(crate) async fn run<S: RespService>(
    service: &S,
    session: &Session<S::Tenant>,
    blocking: Blocking,
    keys: Vec<bytes::Bytes>,
) -> Reply {
    let tenant = session.tenant.as_ref().expect("only a signed-in session pops");
    let deadline = blocking
        .timeout_ms
        .map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
    loop {
        let queued = Queued {
            command: Command::Data(blocking.step.clone()),
            keys: keys.clone(),
            replica_read: false,
        };
        let reply = service
            .execute(tenant, &session.table, vec![queued])
            .await
            .pop()
            .unwrap_or(Reply::Null);
        if !matches!(reply, Reply::Null | Reply::NullArray) {
            return blocking.shape.reply(reply);
        }
        let now = tokio::time::Instant::now();
        let mut wake = now + Duration::from_millis(RECHECK_MS);
        if let Some(deadline) = deadline {
            if now >= deadline {
                return reply;
            }
            wake = wake.min(deadline);
        }
        tokio::select! {
            () = service.written(tenant) => {}
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}
