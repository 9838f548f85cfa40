//! The latency of one class of requests (one function placed one way), as the latency
//! model reads it: a floor and an exponential spread above it, and how much of that spread
//! the model's queues explained when it was measured.
//!
//! A class's latency is modelled as `L = f + E` with E exponential of mean θ: the sojourn
//! time of an M/M/1 queue is exactly that, and a request that waits in several queues, or
//! computes for a variable time, has a tail close enough to it. f and θ are fitted to the
//! class's median and 95th percentile over its last [`TAIL_GENERATION`]–2 ×
//! [`TAIL_GENERATION`] completions: `t50 = f + θ ln 2`, `t95 = f + θ ln 20`. The two
//! quantiles are read from a sketch, so one stall of milliseconds among thousands of
//! completions moves neither (a mean and a variance would be ruled by it), while a tail
//! that every twentieth request sees is counted.
//!
//! The spread measured includes the queueing of the load it was measured at. The model
//! knows that load, so each completion also records what the model predicted for it then:
//! its queueing wait, and how much the load it met amplifies an interruption (see
//! [`super::latency_model::Waits::amplification`]). What the queues do not explain (node
//! stalls, compute that varies, the network) is the class's own spread; the model scales
//! it by the amplification at the load it predicts for, and adds that load's queueing.
//!
//! [`mixture_quantile`] is the tail of a mix of classes: the latency t at which the
//! classes' weighted shares slower than t add up to 1 − q. A class carrying more than
//! 1 − q of the requests sets the p-quantile at or above its own floor, however fast the
//! others are.

use crate::quantile::LatencySketch;

/// Completions per sketch generation: the shape is read from the last one to two
/// generations, enough for a 95th percentile to rest on 50–100 completions, recent enough to
/// follow a change of load within a few thousand requests.
pub const TAIL_GENERATION: u64 = 1_000;

/// Completions a class needs before its shape is used: ten beyond its 95th percentile.
pub const TAIL_SAMPLES_MIN: u64 = 200;

/// ln 2 and ln 20: where the median and the 95th percentile of an exponential sit, in
/// units of its mean.
const LN_2: f64 = std::f64::consts::LN_2;
const LN_20: f64 = 2.995_732_273_553_991;

/// Weight of the newest completion in the mean of the modelled wait: the same memory as a
/// sketch generation.
const WAIT_WEIGHT: f64 = 1.0 / TAIL_GENERATION as f64;

/// Bisection steps of [`mixture_quantile`]: 2⁻⁶⁰ of the bracket, far below a nanosecond.
const QUANTILE_STEPS: u32 = 60;

/// One class's latency, fitted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TailShape {
    /// Latency no request of the class goes below, ns.
    pub floor_ns: f64,
    /// Mean of the exponential part above the floor, ns, as measured.
    pub spread_ns: f64,
    /// The part of the spread the model's queues predicted where it was measured, ns.
    pub modelled_wait_ns: f64,
    /// How much the load where it was measured amplified an interruption (≥ 1).
    pub amplification: f64,
}

impl TailShape {
    /// The spread the model's queues do not explain, as measured.
    pub fn own_spread_ns(&self) -> f64 {
        (self.spread_ns - self.modelled_wait_ns).max(0.0)
    }

    /// The class's own spread at a load amplifying interruptions `amplification` times:
    /// a stall leaves a backlog that drains at the capacity the load leaves free.
    pub fn own_spread_at_ns(&self, amplification: f64) -> f64 {
        self.own_spread_ns() * amplification.max(1.0) / self.amplification.max(1.0)
    }
}

/// The completions of one class, for its shape.
#[derive(Clone, Debug, Default)]
pub struct ClassTail {
    /// The generation being filled.
    current: LatencySketch,
    /// The last full generation.
    previous: Option<LatencySketch>,
    /// Mean of the wait the model predicted for each completion when it completed, ns.
    modelled_wait_ns: f64,
    /// Mean of the amplification the model predicted for each completion.
    amplification: f64,
    /// Completions seen.
    samples: u64,
}

impl ClassTail {
    /// Learns one completion of `latency_ns`, for which the model predicted `seen` at the
    /// load it completed under.
    pub fn learn(&mut self, latency_ns: f64, seen: Predicted) {
        self.samples += 1;
        let w = (1.0 / self.samples as f64).max(WAIT_WEIGHT);
        self.modelled_wait_ns += w * (seen.wait_ns - self.modelled_wait_ns);
        self.amplification += w * (seen.amplification.max(1.0) - self.amplification);
        self.current.record(latency_ns);
        if self.current.count() >= TAIL_GENERATION {
            self.previous = Some(std::mem::take(&mut self.current));
        }
    }

    /// Completions seen.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The fitted shape, once [`TAIL_SAMPLES_MIN`] completions were seen.
    pub fn shape(&self) -> Option<TailShape> {
        if self.samples < TAIL_SAMPLES_MIN {
            return None;
        }
        let mut merged = self.previous.clone().unwrap_or_default();
        merged.merge(&self.current);
        let (t50, t95) = (merged.quantile(0.5)?, merged.quantile(0.95)?);
        let spread_ns = ((t95 - t50) / (LN_20 - LN_2)).max(0.0);
        Some(TailShape {
            floor_ns: (t50 - spread_ns * LN_2).max(0.0),
            spread_ns,
            modelled_wait_ns: self.modelled_wait_ns,
            amplification: self.amplification.max(1.0),
        })
    }
}

/// What the model predicted for one completion at the load it completed under.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Predicted {
    /// Its queueing wait, ns.
    pub wait_ns: f64,
    /// How much that load amplified an interruption (≥ 1).
    pub amplification: f64,
}

impl Predicted {
    /// No load: no wait, no amplification (a policy without a model).
    pub const NONE: Predicted = Predicted {
        wait_ns: 0.0,
        amplification: 1.0,
    };
}

/// One class in a mix: its share of the requests and its predicted shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weighted {
    /// Share of the requests.
    pub weight: f64,
    /// Floor, ns.
    pub floor_ns: f64,
    /// Mean of the exponential part, ns.
    pub spread_ns: f64,
}

impl Weighted {
    /// The share of this class's requests slower than `t_ns`.
    fn slower_than(&self, t_ns: f64) -> f64 {
        if t_ns < self.floor_ns {
            1.0
        } else if self.spread_ns <= 0.0 {
            0.0
        } else {
            (-(t_ns - self.floor_ns) / self.spread_ns).exp()
        }
    }
}

/// The `q`-quantile of a mix of classes (weights summing to 1), ns: the latency at which
/// the shares slower add up to 1 − q.
pub fn mixture_quantile(classes: &[Weighted], q: f64) -> f64 {
    let allowed = 1.0 - q;
    let slower = |t: f64| classes.iter().map(|c| c.weight * c.slower_than(t)).sum::<f64>();
    let mut lo = 0.0;
    // Beyond every floor by ln(1/(1 − q)) spreads, each class alone is under its allowance.
    let mut hi = classes
        .iter()
        .map(|c| c.floor_ns + c.spread_ns * (1.0 / allowed).ln() + 1.0)
        .fold(1.0, f64::max);
    for _ in 0..QUANTILE_STEPS {
        let mid = 0.5 * (lo + hi);
        if slower(mid) > allowed {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn seen(wait_ns: f64) -> Predicted {
        Predicted {
            wait_ns,
            amplification: 2.0,
        }
    }

    #[test]
    fn an_exponential_above_a_floor_is_fitted_back() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut tail = ClassTail::default();
        for _ in 0..(TAIL_SAMPLES_MIN - 1) {
            tail.learn(1.0, seen(4_000.0));
        }
        assert!(tail.shape().is_none(), "too few completions");
        for _ in 0..3_000 {
            let u: f64 = rng.gen();
            tail.learn(40_000.0 - 10_000.0 * (1.0 - u).ln(), seen(4_000.0));
        }
        let s = tail.shape().unwrap();
        assert!((s.floor_ns / 40_000.0 - 1.0).abs() < 0.05, "{s:?}");
        assert!((s.spread_ns / 10_000.0 - 1.0).abs() < 0.15, "{s:?}");
        assert!((s.own_spread_ns() - (s.spread_ns - 4_000.0)).abs() < 1.0);
        // Measured where a stall's backlog doubled; at no load it is half as long.
        assert!((s.own_spread_at_ns(1.0) - s.own_spread_ns() / 2.0).abs() < 1.0);
    }

    #[test]
    fn rare_stalls_do_not_move_the_shape() {
        let mut tail = ClassTail::default();
        for i in 0..2_000u64 {
            // One request in 200 caught by a 2 ms stall.
            let latency = if i % 200 == 0 {
                2_000_000.0
            } else {
                50_000.0 + (i % 10) as f64 * 1_000.0
            };
            tail.learn(latency, Predicted::NONE);
        }
        let s = tail.shape().unwrap();
        assert!(s.floor_ns > 45_000.0 && s.spread_ns < 10_000.0, "{s:?}");
    }

    #[test]
    fn a_class_carrying_more_than_the_allowance_sets_the_tail() {
        let fast = Weighted {
            weight: 0.95,
            floor_ns: 10_000.0,
            spread_ns: 2_000.0,
        };
        let slow = Weighted {
            weight: 0.05,
            floor_ns: 80_000.0,
            spread_ns: 10_000.0,
        };
        // Alone the fast class's p99 is its floor + 2 ln 100 µs ≈ 19.2 µs.
        let alone = mixture_quantile(&[Weighted { weight: 1.0, ..fast }], 0.99);
        assert!((alone - (10_000.0 + 2_000.0 * 100f64.ln())).abs() < 1.0, "{alone}");
        // With 5 % slow requests the p99 is the slow class's 80th percentile.
        let mixed = mixture_quantile(&[fast, slow], 0.99);
        let expected = 80_000.0 + 10_000.0 * 5f64.ln();
        assert!((mixed / expected - 1.0).abs() < 0.01, "{mixed} vs {expected}");
        // Under 1 %, the slow class no longer sets it alone.
        let rare = Weighted { weight: 0.005, ..slow };
        let fast_rest = Weighted { weight: 0.995, ..fast };
        assert!(mixture_quantile(&[fast_rest, rare], 0.99) < 30_000.0);
    }
}
