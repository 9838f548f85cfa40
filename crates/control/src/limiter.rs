//! The rate limiter: a token bucket refilled at the rate the R loop chose.
//!
//! A pure state machine: the caller passes `now`, asks whether a request may go, or when
//! the next one may. The real client parks requests until `next_admit_at`; the simulator's
//! paced arrival mode schedules its next arrival there.

use crate::error::{check_range, ConfigError};
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
    pub fn new(now: Nanos, rate_ops: f64, burst: f64) -> Result<Self, ConfigError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
