//! The window on requests in flight, as the client runtime keeps it: at most the policy's
//! W requests are sent at once; the others wait here, first come first served, timed from
//! their due time; a request whose wait would break the SLO is refused at once (or as
//! soon as its wait has used what the SLO left it), so a backlog never grows past what can
//! still be served in time, and the caller is told why.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ferry_control::rate::inflight::refuse_on_arrival;
use ferry_control::Admission;
use parking_lot::Mutex;
use tokio::sync::oneshot;

/// Most requests waiting for a slot: far more than any SLO lets wait (the refusal rule
/// keeps the queue to what drains within the SLO), so it only bounds memory if the rate
/// handed in is absurd.
pub const WAITING_MAX: usize = 65_536;

struct State {
    /// Requests sent and not yet back.
    in_flight: usize,
    /// The window and the refusal rule in force.
    admission: Admission,
    /// Requests waiting for a slot, oldest first (a dropped receiver is a waiter that
    /// gave up: skipped).
    waiting: VecDeque<oneshot::Sender<()>>,
}

/// The window (see the module docs).
pub struct Gate {
    state: Mutex<State>,
}

/// Why a request did not get a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// How long it had waited since its due time.
    pub waited: Duration,
}

/// A slot in the window, given back when dropped.
pub struct Slot<'a> {
    gate: &'a Gate,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut state = self.gate.state.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        Gate::wake(&mut state);
    }
}

impl Gate {
    /// A window admitting by `admission`.
    pub fn new(admission: Admission) -> Self {
        Gate {
            state: Mutex::new(State {
                in_flight: 0,
                admission,
                waiting: VecDeque::new(),
            }),
        }
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.state.lock().in_flight
    }

    /// Sets the window and the refusal rule (after a tick of the policy); a wider window
    /// lets waiters go at once.
    pub fn set(&self, admission: Admission) {
        let mut state = self.state.lock();
        state.admission = admission;
        Gate::wake(&mut state);
    }

    /// Hands free slots to the oldest live waiters.
    fn wake(state: &mut State) {
        while state.in_flight < state.admission.inflight_max {
            let Some(waiter) = state.waiting.pop_front() else { break };
            if waiter.send(()).is_ok() {
                state.in_flight += 1;
            }
        }
    }

    /// A slot for a request due at `due`, waiting for one if the window is full; refused
    /// if its wait would break the SLO.
    pub async fn acquire(&self, due: Instant) -> Result<Slot<'_>, Refused> {
        let refused = || Refused { waited: due.elapsed() };
        let (rx, budget) = {
            let mut state = self.state.lock();
            let admission = state.admission;
            let budget = Duration::from_nanos(admission.wait_max.0).saturating_sub(due.elapsed());
            if state.in_flight < admission.inflight_max && state.waiting.is_empty() {
                state.in_flight += 1;
                return Ok(Slot { gate: self });
            }
            let ahead = state.waiting.len();
            if budget.is_zero()
                || ahead >= WAITING_MAX
                || refuse_on_arrival(
                    ahead,
                    admission.rate_ops,
                    ferry_control::Nanos(budget.as_nanos() as u64),
                )
            {
                return Err(refused());
            }
            let (tx, rx) = oneshot::channel();
            state.waiting.push_back(tx);
            (rx, budget)
        };
        match tokio::time::timeout(budget, rx).await {
            Ok(Ok(())) => Ok(Slot { gate: self }),
            // Timed out (its receiver is dropped, so the waker skips it), or the gate went
            // away.
            _ => Err(refused()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_control::Nanos;

    fn admission(inflight_max: usize, wait_max_ms: u64) -> Admission {
        Admission {
            rate_ops: 1_000.0,
            inflight_max,
            wait_max: Nanos::from_ms(wait_max_ms),
        }
    }

    #[tokio::test]
    async fn holds_the_window_and_lets_the_next_one_go_when_a_slot_frees() {
        let gate = Gate::new(admission(2, 1_000));
        let now = Instant::now();
        let a = gate.acquire(now).await.unwrap();
        let _b = gate.acquire(now).await.unwrap();
        assert_eq!(gate.in_flight(), 2);
        let waiting = gate.acquire(now);
        tokio::pin!(waiting);
        // Full: the third waits.
        assert!(futures_poll_once(waiting.as_mut()).await.is_none());
        drop(a);
        let c = waiting.await.unwrap();
        assert_eq!(gate.in_flight(), 2);
        drop(c);
        assert_eq!(gate.in_flight(), 1);
    }

    #[tokio::test]
    async fn refuses_what_would_wait_past_the_slo() {
        // 1,000/s frees a slot every millisecond: with 5 ms allowed, the fifth in line
        // would wait 5 ms, more than it has left, and is refused at once.
        let gate = Gate::new(admission(1, 5));
        let now = Instant::now();
        let _held = gate.acquire(now).await.unwrap();
        let mut queued = Vec::new();
        for _ in 0..4 {
            let fut = Box::pin(gate.acquire(now));
            queued.push(fut);
        }
        for fut in &mut queued {
            assert!(futures_poll_once(fut.as_mut()).await.is_none());
        }
        assert!(gate.acquire(now).await.is_err());
        // One already past its allowance is refused without waiting.
        let late = Instant::now() - Duration::from_millis(10);
        assert!(gate.acquire(late).await.is_err());
        // The queued ones give up once their allowance is spent.
        for fut in queued {
            assert!(fut.await.is_err());
        }
    }

    /// Polls `fut` once: its output if it is ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(fut: F) -> Option<F::Output> {
        let mut fut = fut;
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
