//! Time as the controllers see it: a nanosecond count handed in by the caller.
//!
//! Controllers never read a clock. The simulator passes its virtual time, the real
//! client passes `Instant`-derived nanoseconds since its start; both are just `Nanos`.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in time or a duration, in nanoseconds, as passed in by the driver.
///
/// One type for both keeps the arithmetic in the controllers simple; the driver decides
/// where zero is (simulation start, client start).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Time zero / an empty duration.
    pub const ZERO: Nanos = Nanos(0);
    /// The far future: used for "never" without an `Option`.
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// A duration of `us` microseconds.
    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }

    /// A duration of `ms` milliseconds.
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }

    /// A duration of `s` seconds.
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }

    /// A duration of `s` seconds (rounded to whole nanoseconds; negative and NaN give zero,
    /// beyond `u64::MAX` nanoseconds saturates).
    pub fn from_secs_f64(s: f64) -> Nanos {
        Nanos((s * 1e9).round() as u64)
    }

    /// The period of a loop running at `hz` (rounded down to whole nanoseconds).
    pub fn from_hz(hz: f64) -> Nanos {
        Nanos((1e9 / hz) as u64)
    }

    /// The raw nanosecond count.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds as a float, for rates and reports.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    /// Microseconds as a float, for reports.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 * 1e-3
    }

    /// Milliseconds as a float, for reports.
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }

    /// `self - other`, or zero when `other` is later.
    pub fn saturating_sub(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(other.0))
    }

    /// `self + other`, saturating at `Nanos::MAX` ("never" stays "never").
    pub fn saturating_add(self, other: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(other.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 + rhs.0)
    }
}

impl AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 += rhs.0;
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 - rhs.0)
    }
}

impl fmt::Display for Nanos {
    /// Human form with the largest unit that keeps the number readable (`5ms`, `200us`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= 1_000_000_000 && n.is_multiple_of(1_000_000) {
            write!(f, "{}s", n as f64 / 1e9)
        } else if n >= 1_000_000 && n.is_multiple_of(1_000) {
            write!(f, "{}ms", n as f64 / 1e6)
        } else if n >= 1_000 {
            write!(f, "{}us", n as f64 / 1e3)
        } else {
            write!(f, "{n}ns")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_and_display_agree() {
        assert_eq!(Nanos::from_us(10), Nanos(10_000));
        assert_eq!(Nanos::from_ms(5), Nanos(5_000_000));
        assert_eq!(Nanos::from_hz(200.0), Nanos::from_ms(5));
        assert_eq!(Nanos::from_secs(2).to_string(), "2s");
        assert_eq!(Nanos::from_ms(5).to_string(), "5ms");
        assert_eq!(Nanos::from_us(200).to_string(), "200us");
        assert_eq!(Nanos(1500).to_string(), "1.5us");
        assert_eq!(Nanos(100).to_string(), "100ns");
        assert_eq!(Nanos(3).saturating_sub(Nanos(5)), Nanos::ZERO);
        assert_eq!(Nanos::MAX.saturating_add(Nanos(1)), Nanos::MAX);
    }
}
