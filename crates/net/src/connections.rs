//! What the listeners of one process (its ferry-protocol door and its RESP listener) share
//! about their connections: the counters, the authenticated seats and the bound on
//! connections that have not authenticated yet.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::{Sample, Scope};
use crate::preauth::PreAuth;

/// Connection counters of one process, over all its listeners.
#[derive(Debug, Default)]
pub struct ConnectionCounters {
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections accepted since the start.
    pub total: AtomicU64,
    /// Connections authenticated now (holding a [`Seat`]).
    pub authenticated: AtomicU64,
    /// Connections (or sign-ins) refused because every seat was taken.
    pub refused: AtomicU64,
    /// Connections closed for not authenticating in time (or evicted by newer ones).
    pub unauthenticated_closed: AtomicU64,
    /// Connections closed because their framing broke.
    pub framing_errors: AtomicU64,
    /// Connections whose TLS handshake failed (a certificate refused, a client speaking
    /// without TLS, a peer gone mid-handshake).
    pub tls_handshake_failures: AtomicU64,
}

impl ConnectionCounters {
    /// Every counter as a sample of `scope` (`connections_open`, …), for stats and metrics.
    pub fn samples(&self, scope: &Scope) -> [Sample; 7] {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        [
            Sample::gauge(scope.clone(), "connections_open", get(&self.open)),
            Sample::counter(scope.clone(), "connections_accepted", get(&self.total)),
            Sample::gauge(scope.clone(), "connections_authenticated", get(&self.authenticated)),
            Sample::counter(scope.clone(), "connections_refused", get(&self.refused)),
            Sample::counter(
                scope.clone(),
                "connections_unauthenticated_closed",
                get(&self.unauthenticated_closed),
            ),
            Sample::counter(scope.clone(), "framing_errors", get(&self.framing_errors)),
            Sample::counter(
                scope.clone(),
                "tls_handshake_failures",
                get(&self.tls_handshake_failures),
            ),
        ]
    }
}

/// The connections of one process.
pub struct Connections {
    pub counters: ConnectionCounters,
    /// Connections waiting to authenticate.
    pub preauth: PreAuth,
    /// Longest a connection may take to authenticate.
    pub hello_timeout: Duration,
    /// Most authenticated connections at once.
    max_authenticated: usize,
}

/// One of the process's authenticated-connection seats, given back on drop.
pub struct Seat(Arc<Connections>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.counters.authenticated.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An open connection, counted until it drops.
pub struct Open(Arc<Connections>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.counters.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Connections {
    pub fn new(max_authenticated: usize, max_unauthenticated: usize, hello_timeout: Duration) -> Arc<Connections> {
        Arc::new(Connections {
            counters: ConnectionCounters::default(),
            preauth: PreAuth::new(max_unauthenticated),
            hello_timeout,
            max_authenticated,
        })
    }

    /// Most authenticated connections at once.
    pub fn max_authenticated(&self) -> usize {
        self.max_authenticated
    }

    /// Whether every seat is taken: a new connection could not authenticate, so the
    /// listener refuses it at once (unauthenticated ones are bounded by `preauth`), and
    /// this counts the refusal.
    pub fn full(&self) -> bool {
        let full = self.counters.authenticated.load(Ordering::Acquire) >= self.max_authenticated as u64;
        if full {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
        }
        full
    }

    /// Counts a new connection as open until the guard drops.
    pub fn open(self: &Arc<Self>) -> Open {
        self.counters.open.fetch_add(1, Ordering::AcqRel);
        self.counters.total.fetch_add(1, Ordering::Relaxed);
        Open(Arc::clone(self))
    }

    /// Takes a seat for a connection that just authenticated, or says why not.
    pub fn take_seat(self: &Arc<Self>) -> Result<Seat, String> {
        let max = self.max_authenticated as u64;
        self.counters
            .authenticated
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .map(|_| Seat(Arc::clone(self)))
            .map_err(|_| {
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                format!("this process serves at most {max} authenticated connections")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seats_are_bounded_and_given_back_on_drop() {
        let connections = Connections::new(2, 4, Duration::from_secs(1));
        let first = connections.take_seat().unwrap();
        let _second = connections.take_seat().unwrap();
        assert!(connections.full());
        assert!(connections.take_seat().err().unwrap().contains("at most 2"));
        drop(first);
        assert!(!connections.full());
        assert!(connections.take_seat().is_ok());
        assert_eq!(connections.counters.refused.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn an_open_connection_is_counted_until_it_drops() {
        let connections = Connections::new(1, 1, Duration::from_secs(1));
        let open = connections.open();
        assert_eq!(connections.counters.open.load(Ordering::Relaxed), 1);
        drop(open);
        assert_eq!(connections.counters.open.load(Ordering::Relaxed), 0);
        assert_eq!(connections.counters.total.load(Ordering::Relaxed), 1);
    }
}
