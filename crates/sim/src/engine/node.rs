//! The resources a message passes through: a node's cores (FCFS, one shared queue, with
//! node-wide stalls) and its link to the switch (FCFS transmission at the link's
//! bandwidth).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use ferry_control::Nanos;

/// Intervals are generated lazily, in time order, and dropped once in the past.
pub(super) struct Stalls {
    /// Mean gap between stalls in ns (0: no stalls).
    gap_mean_ns: f64,
    /// Mean stall length in ns.
    len_mean_ns: f64,
    /// Spread of the lengths, standard deviation over mean (1: exponential).
    len_cv: f64,
    /// Generated intervals `[a, b)`, sorted, non-overlapping.
    intervals: std::collections::VecDeque<(u64, u64)>,
    /// End of the last generated interval.
    last_end: u64,
    /// Source of the gaps and lengths.
    rng: ChaCha8Rng,
}

impl Stalls {
    pub(super) fn new(rate_hz: f64, mean: Nanos, len_cv: f64, rng: ChaCha8Rng) -> Self {
        Stalls {
            gap_mean_ns: if rate_hz > 0.0 && mean.0 > 0 {
                1e9 / rate_hz
            } else {
                0.0
            },
            len_mean_ns: mean.0 as f64,
            len_cv: len_cv.clamp(0.0, 1.0),
            intervals: std::collections::VecDeque::new(),
            last_end: 0,
            rng,
        }
    }

    fn exp(&mut self, mean: f64) -> u64 {
        let u: f64 = self.rng.gen();
        (-(1.0 - u).ln() * mean).round() as u64
    }

    /// One stall's length: exponential at a spread of 1 (the draws of the days before the
    /// spread existed), else a fixed part and an exponential part of mean `mean · cv`, whose
    /// standard deviation is `mean · cv`.
    fn length(&mut self) -> u64 {
        if self.len_cv >= 1.0 {
            return self.exp(self.len_mean_ns);
        }
        let fixed = (self.len_mean_ns * (1.0 - self.len_cv)).round() as u64;
        fixed + self.exp(self.len_mean_ns * self.len_cv)
    }

    /// Makes sure intervals are generated past `t`.
    fn ensure(&mut self, t: u64) {
        while self.last_end <= t {
            let a = self.last_end + self.exp(self.gap_mean_ns).max(1);
            let b = a + self.length().max(1);
            self.intervals.push_back((a, b));
            self.last_end = b;
        }
    }

    /// Runs `work` ns of CPU starting no earlier than `s` (with `now <= s`): returns the
    /// actual (start, finish), pushed back by any stall overlapping the job.
    fn run(&mut self, now: u64, s: u64, work: u64) -> (u64, u64) {
        if self.gap_mean_ns == 0.0 {
            return (s, s + work);
        }
        while self.intervals.front().is_some_and(|&(_, b)| b <= now) {
            self.intervals.pop_front();
        }
        let mut t = s;
        let mut left = work;
        let mut start = None;
        let mut i = 0;
        loop {
            if i == self.intervals.len() {
                self.ensure(t + left);
            }
            let (a, b) = self.intervals[i];
            i += 1;
            if b <= t {
                continue;
            }
            if a <= t {
                // Inside a stall: nothing runs until it ends.
                t = b;
                continue;
            }
            let st = *start.get_or_insert(t);
            if t + left <= a {
                return (st, t + left);
            }
            left -= a - t;
            t = b;
        }
    }
}

/// A FCFS node with `free_at.len()` cores sharing one queue, subject to node-wide stalls.
/// Only the first `active` cores take new jobs (elastic compute switches the others off;
/// a core switched off finishes the job it holds).
pub(super) struct Node {
    /// When each core becomes free.
    free_at: Vec<u64>,
    /// Cores taking new jobs.
    active: usize,
    /// The node's stall process.
    stalls: Stalls,
}

impl Node {
    pub(super) fn new(cores: u32, stalls: Stalls) -> Self {
        Node {
            free_at: vec![0; cores as usize],
            active: cores as usize,
            stalls,
        }
    }

    /// Lets the first `cores` cores (at least one, at most all) take new jobs.
    pub(super) fn set_active(&mut self, cores: usize) {
        self.active = cores.clamp(1, self.free_at.len());
    }

    /// Serves a job arriving at `t` needing `service` ns: returns (start, finish).
    pub(super) fn serve(&mut self, t: u64, service: u64) -> (u64, u64) {
        let mut best = 0;
        let mut best_at = self.free_at[0];
        for (i, &f) in self.free_at[..self.active].iter().enumerate().skip(1) {
            if f < best_at {
                best = i;
                best_at = f;
            }
        }
        // Stalls hit every core alike, so the earliest-free core is still the one to use.
        let (start, finish) = self.stalls.run(t, t.max(best_at), service);
        self.free_at[best] = finish;
        (start, finish)
    }
}

/// A node's link to a non-blocking switch: messages leave one at a time, in the order they
/// are sent, at the link's bandwidth, then take half the round trip to arrive. Only the
/// sending side queues: a receiver's link carries the sum of what many senders send, which
/// at the simulator's scales (one or a few storage nodes serving many app nodes) is the
/// storage nodes' sending links again, or far below a link's capacity.
pub(super) struct Link {
    /// When the link finishes sending what it holds.
    free_at: u64,
    /// Transmission time of one byte.
    ns_per_byte: f64,
    /// Propagation and stack latency, one way.
    one_way_ns: u64,
}

impl Link {
    pub(super) fn new(bandwidth_gbps: f64, rtt: Nanos) -> Self {
        Link {
            free_at: 0,
            ns_per_byte: if bandwidth_gbps.is_infinite() {
                0.0
            } else {
                8.0 / bandwidth_gbps
            },
            one_way_ns: rtt.0 / 2,
        }
    }

    /// Sends `bytes` at `t` (calls come in time order): returns when they arrive.
    pub(super) fn send(&mut self, t: u64, bytes: u64) -> u64 {
        let transfer = (bytes as f64 * self.ns_per_byte).round() as u64;
        self.free_at = t.max(self.free_at) + transfer;
        self.free_at + self.one_way_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_link_sends_one_message_at_a_time() {
        // 8 Gb/s: one byte per ns; 10 µs round trip.
        let mut link = Link::new(8.0, Nanos::from_us(10));
        // Idle: transfer plus half the round trip.
        assert_eq!(link.send(0, 1_000), 1_000 + 5_000);
        // Sent while the first is on the wire: waits for it.
        assert_eq!(link.send(500, 1_000), 2_000 + 5_000);
        // Sent after the link went idle: no wait.
        assert_eq!(link.send(10_000, 100), 10_100 + 5_000);
    }

    /// Mean and standard deviation over mean of 20,000 stall lengths at spread `cv`.
    fn lengths(cv: f64) -> (f64, f64) {
        let mut stalls = Stalls::new(100.0, Nanos::from_ms(2), cv, ChaCha8Rng::seed_from_u64(3));
        let v: Vec<f64> = (0..20_000).map(|_| stalls.length() as f64).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        (mean, sd / mean)
    }

    #[test]
    fn stall_lengths_have_the_mean_and_the_spread_asked_for() {
        for cv in [0.0, 0.3, 1.0] {
            let (mean, spread) = lengths(cv);
            assert!((mean / 2e6 - 1.0).abs() < 0.03, "cv {cv}: mean {mean}");
            assert!((spread - cv).abs() < 0.03, "cv {cv}: spread {spread}");
        }
    }

    #[test]
    fn a_node_serves_on_its_earliest_free_core() {
        let stalls = Stalls::new(0.0, Nanos::ZERO, 1.0, ChaCha8Rng::seed_from_u64(1));
        let mut node = Node::new(2, stalls);
        assert_eq!(node.serve(0, 10), (0, 10));
        assert_eq!(node.serve(0, 10), (0, 10));
        // Both cores busy until 10: the third job waits.
        assert_eq!(node.serve(5, 10), (10, 20));
        // One core switched off: jobs queue on the other, even while the first is idle.
        node.set_active(1);
        assert_eq!(node.serve(30, 10), (30, 40));
        assert_eq!(node.serve(30, 10), (40, 50));
    }
}
