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
use crate::resp_clients::Unblock;

/// CLIENT UNBLOCK ... ERROR's reply to the pop it ends, in Redis's words.
const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";

/// Longest a waiting pop goes without trying again, for changes the service does not
/// announce (a write over the ferry protocol, a commit on another node).
pub const RECHECK_MS: u64 = 100;

/// Whether a key `blocking` pops from holds the type it pops: what would wake a blocked
/// client in Redis.
async fn any_source_ready<S: RespService>(service: &S, session: &Session<S::Tenant>, blocking: &Blocking) -> bool {
    let Some(tenant) = session.tenant.as_ref() else {
        return false;
    };
    let types = blocking
        .sources()
        .into_iter()
        .map(|key| Queued {
            command: Command::Data(vec![bytes::Bytes::from_static(b"TYPE"), key.clone()]),
            keys: vec![key],
            replica_read: false,
        })
        .collect();
    let wanted = blocking.source_type();

    service
        .execute(tenant, &session.table, types)
        .await
        .iter()
        .any(|reply| matches!(reply, Reply::Simple(name) if name == wanted))
}

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
    let mut blocked = None;
    // The step's answer when there is nothing to pop (null or the null array), given on a
    // timeout.
    let mut empty = Reply::Null;
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
        // A key that became another type while the pop waited does not wake it (as in
        // Redis, which serves a blocked client only once a key it pops from holds a list
        // or sorted set); on the first try, or once such a key is there (LMOVE's
        // destination of another type), it is the pop's error.
        let wrong_type_later = blocked.is_some()
            && matches!(&reply, Reply::Error(text) if text.starts_with("WRONGTYPE"))
            && !any_source_ready(service, session, &blocking).await;
        if !matches!(reply, Reply::Null | Reply::NullArray) && !wrong_type_later {
            return blocking.shape.reply(reply);
        }
        if !wrong_type_later {
            empty = reply;
        }
        let now = tokio::time::Instant::now();
        let mut wake = now + Duration::from_millis(RECHECK_MS);
        if let Some(deadline) = deadline {
            if now >= deadline {
                return empty;
            }
            wake = wake.min(deadline);
        }
        // Blocked (INFO's blocked_clients) from its first wait on; CLIENT UNBLOCK ends it.
        blocked.get_or_insert_with(|| session.client.blocking());
        tokio::select! {
            () = service.written(tenant) => {}
            () = tokio::time::sleep_until(wake) => {}
            () = session.client.unblocked.notified() => match session.client.take_unblock() {
                Some(Unblock::Timeout) => return empty,
                Some(Unblock::Error) => return Reply::Error(UNBLOCKED.into()),
                None => {}
            },
        }
    }
}
