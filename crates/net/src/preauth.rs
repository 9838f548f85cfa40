//! Connections that have not said hello yet, bounded in number and in time, so idle or slow
//! unauthenticated connections cannot crowd out clients that authenticate.
//!
//! Each one holds a [`Ticket`] until it authenticates or closes. A connection that has not
//! authenticated within the hello timeout is closed. When as many are waiting as the limit
//! allows, a new one evicts the *oldest*: a flood of idle connections then only ever holds
//! the newest few, and a client that says hello promptly (a loopback round trip) gets in
//! unless the limit's worth of new connections arrives in that time.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Default most simultaneous authenticated connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// Default longest time a connection may take to authenticate (`hello`) before it is
/// closed: generous for any real client, short enough that idle connections cannot pile up.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// Default most connections waiting to authenticate at once, besides the authenticated
/// ones.
pub const DEFAULT_MAX_UNAUTHENTICATED: usize = 256;

/// Failed `hello` attempts before the connection is closed: slows token guessing.
pub const MAX_FAILED_HELLOS: u32 = 3;

/// Whether `offered` equals `expected`, in time that depends only on their lengths (a
/// token must not be guessable byte by byte from response times).
pub fn token_matches(expected: &[u8], offered: &[u8]) -> bool {
    if expected.len() != offered.len() {
        return false;
    }
    expected.iter().zip(offered).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// The waiting connections of one listening process.
pub struct PreAuth {
    inner: Arc<Inner>,
}

struct Inner {
    /// (ticket id, its eviction signal), oldest first.
    waiting: Mutex<VecDeque<(u64, Arc<Notify>)>>,
    limit: usize,
    next_id: AtomicU64,
}

/// One unauthenticated connection's place; released on drop.
pub struct Ticket {
    id: u64,
    evict: Arc<Notify>,
    inner: Arc<Inner>,
}

impl PreAuth {
    /// At most `limit` (at least 1) connections wait to authenticate at once.
    pub fn new(limit: usize) -> PreAuth {
        PreAuth {
            inner: Arc::new(Inner {
                waiting: Mutex::new(VecDeque::new()),
                limit: limit.max(1),
                next_id: AtomicU64::new(0),
            }),
        }
    }

    /// A place for a new connection, evicting the oldest waiting one if none is free.
    pub fn admit(&self) -> Ticket {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let evict = Arc::new(Notify::new());
        let mut waiting = self.inner.waiting.lock();
        if waiting.len() >= self.inner.limit {
            if let Some((_, oldest)) = waiting.pop_front() {
                // A stored permit: the connection sees it even if it is not waiting now.
                oldest.notify_one();
            }
        }
        waiting.push_back((id, Arc::clone(&evict)));
        Ticket {
            id,
            evict,
            inner: Arc::clone(&self.inner),
        }
    }

    /// Connections waiting now.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.lock().len()
    }
}

impl Ticket {
    /// Resolves when a newer connection evicted this one.
    pub async fn evicted(&self) {
        self.evict.notified().await;
    }
}

/// Resolves when an unauthenticated connection must go: its hello deadline passed, or a
/// newer connection evicted it. Never, once it authenticated (`ticket` is `None`).
pub async fn unauthenticated_over(ticket: Option<&Ticket>, deadline: tokio::time::Instant) {
    match ticket {
        Some(ticket) => tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {}
            _ = ticket.evicted() => {}
        },
        None => std::future::pending().await,
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut waiting = self.inner.waiting.lock();
        if let Some(at) = waiting.iter().position(|(id, _)| *id == self.id) {
            waiting.remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_is_evicted_and_a_released_place_is_reused() {
        let preauth = PreAuth::new(2);
        let first = preauth.admit();
        let second = preauth.admit();
        assert_eq!(preauth.waiting(), 2);
        let third = preauth.admit();
        assert_eq!(preauth.waiting(), 2);
        // The first holds a permit: its wait ends at once.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), first.evicted())
                .await
                .expect("the oldest was told to go");
        });
        drop(second);
        assert_eq!(preauth.waiting(), 1);
        let _fourth = preauth.admit();
        assert_eq!(preauth.waiting(), 2);
        // A free place evicts no one: the second's replacement did not signal the third.
        runtime.block_on(async {
            let waited = tokio::time::timeout(std::time::Duration::from_millis(50), third.evicted()).await;
            assert!(waited.is_err(), "the third was evicted without cause");
        });
        drop(third);
        drop(first);
        assert_eq!(preauth.waiting(), 1);
    }
}
