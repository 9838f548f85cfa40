//! The rate limiter: a token bucket refilled at the rate the R loop chose, and the send
//! schedule of an open-loop backlog admitted at that rate.
//!
//! Pure state machines: the caller passes `now`. The bucket answers whether a request may go,
//! or when the next one may: the client's `invoke` throttles above the rate with it, and the
//! simulator's paced arrival mode schedules its next arrival there. A bucket forgives a
//! driver that fell behind (its depth caps what is banked), which is right for admission and
//! wrong for measurement: a load generator starved of CPU would restart its clock each time
//! and hide its own lateness (coordinated omission). [`Schedule`] never forgives: request k
//! is due one interval after request k − 1 whenever it is actually sent, and its latency is
//! measured from then.

use crate::error::{check_range, ControlError};
use crate::time::Nanos;

/// Default bucket depth in requests: a few requests of burst absorb scheduling jitter in
/// the driver without letting a stalled driver release a flood when it wakes.
pub const BURST_DEFAULT: f64 = 4.0;

/// Largest accepted bucket depth: beyond this the limiter no longer limits anything a
/// controller running at 200 Hz could observe.
pub const BURST_MAX: f64 = 1e6;

/// Largest accepted rate, in requests per second (one per nanosecond).
pub const RATE_OPS_MAX: f64 = 1e9;

/// A token bucket: `rate_ops` tokens per second, at most `burst` banked, one per request.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// Refill rate in tokens (requests) per second.
    rate_ops: f64,
    /// Bucket depth in tokens.
    burst: f64,
    /// Tokens banked at `last`.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    last: Nanos,
}

impl TokenBucket {
    /// A bucket refilling at `rate_ops`, holding at most `burst` tokens, full at `now`.
    pub fn new(now: Nanos, rate_ops: f64, burst: f64) -> Result<Self, ControlError> {
        check_range("rate", "(0, 1e9] ops/s", rate_ops, f64::MIN_POSITIVE, RATE_OPS_MAX)?;
        check_range("burst", "[1, 1e6] requests", burst, 1.0, BURST_MAX)?;
        Ok(TokenBucket {
            rate_ops,
            burst,
            tokens: burst,
            last: now,
        })
    }

    /// Current refill rate.
    pub fn rate_ops(&self) -> f64 {
        self.rate_ops
    }

    fn refill(&mut self, now: Nanos) {
        if now > self.last {
            let dt_s = (now - self.last).as_secs_f64();
            self.tokens = (self.tokens + dt_s * self.rate_ops).min(self.burst);
            self.last = now;
        }
    }

    /// Changes the refill rate from `now` on (tokens earned so far at the old rate are kept).
    /// Non-positive or non-finite rates are clamped to the smallest positive rate.
    pub fn set_rate(&mut self, now: Nanos, rate_ops: f64) {
        self.refill(now);
        self.rate_ops = if rate_ops.is_finite() && rate_ops > 0.0 {
            rate_ops.min(RATE_OPS_MAX)
        } else {
            f64::MIN_POSITIVE
        };
    }

    /// Takes a token if one is banked at `now`: true means the request may be sent.
    pub fn try_admit(&mut self, now: Nanos) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The earliest time at or after `now` when `try_admit` will succeed.
    pub fn next_admit_at(&mut self, now: Nanos) -> Nanos {
        self.refill(now);
        if self.tokens >= 1.0 {
            return now;
        }
        let wait_s = (1.0 - self.tokens) / self.rate_ops;
        // Round up so that admitting at the returned time always succeeds.
        let wait_ns = (wait_s * 1e9).ceil();
        if wait_ns >= u64::MAX as f64 {
            Nanos::MAX
        } else {
            now.saturating_add(Nanos(wait_ns as u64))
        }
    }
}

/// A request the [`Schedule`] releases: when it was due, and how many earlier ones were
/// skipped because they fell further behind than the schedule's lag bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// The request's intended send time (latency is measured from here).
    pub at: Nanos,
    /// Requests before it that were more than `lag_max` late and are given up (to be
    /// counted as dropped by the caller).
    pub skipped: u64,
}

/// Send times of a saturating backlog admitted at a changing rate: each request is due one
/// interval (at the rate current when it is taken) after the previous one, however late the
/// caller takes it. Lateness is bounded by `lag_max`: requests due earlier than `now −
/// lag_max` are skipped and reported, so a long stall neither queues unbounded work nor goes
/// unreported.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Requests per second.
    rate_ops: f64,
    /// When the previous request was due (None before the first).
    last_due: Option<Nanos>,
    /// When the first request is due.
    start: Nanos,
    /// Most a request may be behind its due time before it is skipped.
    lag_max: Nanos,
}

impl Schedule {
    /// A schedule whose first request is due at `start`.
    pub fn new(start: Nanos, rate_ops: f64, lag_max: Nanos) -> Result<Self, ControlError> {
        check_range("rate", "(0, 1e9] ops/s", rate_ops, f64::MIN_POSITIVE, RATE_OPS_MAX)?;
        Ok(Schedule {
            rate_ops,
            last_due: None,
            start,
            lag_max,
        })
    }

    /// Sets the rate; it applies from the previous request on (so a rate raised while the
    /// caller waits shortens the wait).
    pub fn set_rate(&mut self, rate_ops: f64) {
        self.rate_ops = if rate_ops.is_finite() && rate_ops > 0.0 {
            rate_ops.min(RATE_OPS_MAX)
        } else {
            f64::MIN_POSITIVE
        };
    }

    /// When the next request is due.
    pub fn next_due(&self) -> Nanos {
        match self.last_due {
            None => self.start,
            Some(last) => {
                let gap_ns = (1e9 / self.rate_ops).ceil();
                if gap_ns >= u64::MAX as f64 {
                    Nanos::MAX
                } else {
                    last.saturating_add(Nanos(gap_ns as u64))
                }
            }
        }
    }

    /// Releases the next request if it is due by `now`.
    pub fn take(&mut self, now: Nanos) -> Option<Due> {
        let due = self.next_due();
        if due > now {
            return None;
        }
        let oldest = now.saturating_sub(self.lag_max);
        let (at, skipped) = if due < oldest {
            let behind_s = (oldest - due).as_secs_f64();
            (oldest, (behind_s * self.rate_ops) as u64)
        } else {
            (due, 0)
        };
        self.last_due = Some(at);
        Some(Due { at, skipped })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_keeps_lateness_instead_of_forgiving_it() {
        let lag_max = Nanos::from_ms(100);
        let mut s = Schedule::new(Nanos::ZERO, 1_000.0, lag_max).unwrap();
        assert_eq!(s.next_due(), Nanos::ZERO);
        assert_eq!(
            s.take(Nanos::ZERO),
            Some(Due {
                at: Nanos::ZERO,
                skipped: 0
            })
        );
        assert_eq!(s.take(Nanos::from_us(999)), None, "not yet due");
        // A caller 10 ms late still gets every request, each with its own due time.
        let now = Nanos::from_ms(11);
        let dues: Vec<Nanos> = std::iter::from_fn(|| s.take(now).map(|d| d.at)).collect();
        assert_eq!(dues.len(), 11);
        assert_eq!(dues[0], Nanos::from_ms(1));
        assert_eq!(dues[10], Nanos::from_ms(11));
        // A stall longer than the lag bound skips (and reports) what fell off it.
        let now = Nanos::from_ms(1_011);
        let first = s.take(now).unwrap();
        assert_eq!(first.at, now - lag_max);
        assert!((899..=900).contains(&first.skipped), "{}", first.skipped);
        let rest = std::iter::from_fn(|| s.take(now)).count();
        assert_eq!(rest, 100);
    }

    #[test]
    fn schedule_rate_change_applies_to_the_pending_gap() {
        let mut s = Schedule::new(Nanos::ZERO, 100.0, Nanos::from_ms(100)).unwrap();
        s.take(Nanos::ZERO).unwrap();
        assert_eq!(s.next_due(), Nanos::from_ms(10));
        s.set_rate(1_000.0);
        assert_eq!(s.next_due(), Nanos::from_ms(1));
        s.set_rate(f64::NAN);
        assert_eq!(s.next_due(), Nanos::MAX, "a broken rate admits nothing");
        assert!(Schedule::new(Nanos::ZERO, 0.0, Nanos::ZERO).is_err());
    }

    #[test]
    fn saturated_bucket_releases_at_the_rate() {
        let mut b = TokenBucket::new(Nanos::ZERO, 1_000_000.0, 1.0).unwrap();
        let mut now = Nanos::ZERO;
        let mut admitted = 0;
        let end = Nanos::from_ms(10);
        while now < end {
            assert!(b.try_admit(now));
            admitted += 1;
            now = b.next_admit_at(now);
        }
        // 1 Mops for 10 ms: 10 000 requests (plus the initial token).
        assert!((10_000..=10_002).contains(&admitted), "{admitted}");
    }

    #[test]
    fn burst_is_capped_and_rate_change_applies_forward() {
        let mut b = TokenBucket::new(Nanos::ZERO, 1_000.0, 4.0).unwrap();
        // After a long idle period only `burst` requests pass at once.
        let t = Nanos::from_secs(10);
        let passed = (0..10).filter(|_| b.try_admit(t)).count();
        assert_eq!(passed, 4);
        b.set_rate(t, 1_000_000.0);
        assert_eq!(b.next_admit_at(t), t + Nanos(1_000));
        b.set_rate(t, -5.0);
        assert!(b.rate_ops() > 0.0);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(TokenBucket::new(Nanos::ZERO, 0.0, 1.0).is_err());
        assert!(TokenBucket::new(Nanos::ZERO, f64::NAN, 1.0).is_err());
        assert!(TokenBucket::new(Nanos::ZERO, 1.0, 0.5).is_err());
    }
}
