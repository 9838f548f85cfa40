//! The R loop against a small queueing machine: one FIFO server of exponential service
//! times behind a fixed network latency, stalls that freeze it, Poisson arrivals at R, and
//! a driver that keeps the loop's window (requests beyond it wait at the client, timed from
//! their due time, and are refused when their wait would break the SLO). Each part of the
//! loop has a test here that fails with the part switched off.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

const MS: u64 = 1_000_000;

/// The machine behind the loop.
#[derive(Clone)]
struct Machine {
    /// Requests per second the server completes when busy.
    mu: f64,
    /// Latency outside the server (network, client), ns.
    base_ns: u64,
    /// Intervals [start, end) in which the server makes no progress.
    stalls: Vec<(u64, u64)>,
}

/// What a run saw.
struct Run {
    /// (time, R) after every tick.
    rates: Vec<(u64, f64)>,
    /// (completion time, latency) of every request served, ns.
    served: Vec<(u64, u64)>,
    /// Times of refusals.
    refused: Vec<u64>,
    /// Most requests in the server at once, and the window in force then.
    inflight_max_seen: usize,
    /// Times the server held more requests than the window allowed.
    window_broken: u64,
    /// (time, decision, capacity, γ after it) of every decision.
    decisions: Vec<(u64, Decision, f64, f64)>,
}

impl Run {
    /// Mean R over [from, to), weighted by time.
    fn mean_rate(&self, from: u64, to: u64) -> f64 {
        let mut sum = 0.0;
        let mut last = (from, self.rate_at(from));
        for &(t, r) in self.rates.iter().filter(|(t, _)| *t > from && *t < to) {
            sum += last.1 * (t - last.0) as f64;
            last = (t, r);
        }
        sum += last.1 * (to - last.0) as f64;
        sum / (to - from) as f64
    }

    fn rate_at(&self, t: u64) -> f64 {
        self.rates
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .map_or(self.rates[0].1, |x| x.1)
    }

    /// Share of requests completing or refused in [from, to) that were slower than `slo`
    /// (a refusal counts as slow).
    fn slow_share(&self, from: u64, to: u64, slo: u64) -> f64 {
        let inside = |t: u64| t >= from && t < to;
        let served: Vec<_> = self.served.iter().filter(|(t, _)| inside(*t)).collect();
        let refused = self.refused.iter().filter(|&&t| inside(t)).count();
        let slow = served.iter().filter(|(_, l)| *l > slo).count() + refused;
        slow as f64 / (served.len() + refused).max(1) as f64
    }

    /// Requests served per second over [from, to).
    fn throughput(&self, from: u64, to: u64) -> f64 {
        let n = self.served.iter().filter(|(t, _)| *t >= from && *t < to).count();
        n as f64 / ((to - from) as f64 / 1e9)
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Event {
    Arrival,
    /// A request leaves the server (its due time).
    Done(u64),
    Tick,
}

/// Runs `cfg` on `machine` for `duration_ns`.
fn run(cfg: RateLoopConfig, machine: &Machine, duration_ns: u64, seed: u64) -> Run {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rl = RateLoop::new(cfg, Nanos::ZERO).unwrap();
    let mut heap: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<_>, t: u64, e: Event| {
        seq += 1;
        heap.push(Reverse((t, seq, e)));
    };
    push(&mut heap, 0, Event::Arrival);
    push(&mut heap, rl.next_tick().0, Event::Tick);
    let mut server_free_at = 0u64;
    let mut in_server = 0usize;
    let mut waiting: VecDeque<u64> = VecDeque::new();
    let mut out = Run {
        rates: vec![(0, rl.rate_ops())],
        served: Vec::new(),
        refused: Vec::new(),
        inflight_max_seen: 0,
        window_broken: 0,
        decisions: Vec::new(),
    };
    // Starts the request due at `due` in the server at `now`; returns when it leaves.
    let serve = |now: u64, rng: &mut ChaCha8Rng, free_at: &mut u64| -> u64 {
        let service = (-(1.0 - rng.gen::<f64>()).ln() / machine.mu * 1e9) as u64;
        let start = now.max(*free_at);
        let mut finish = start + service;
        for &(s, e) in &machine.stalls {
            if s < finish && e > start {
                finish += e - s.max(start);
            }
        }
        *free_at = finish;
        finish
    };
    while let Some(Reverse((t, _, event))) = heap.pop() {
        if t >= duration_ns {
            break;
        }
        let admission = rl.admission();
        let in_server_before = in_server;
        match event {
            Event::Arrival => {
                let gap = -(1.0 - rng.gen::<f64>()).ln() / rl.rate_ops() * 1e9;
                push(&mut heap, t + gap as u64, Event::Arrival);
                if in_server < admission.inflight_max && waiting.is_empty() {
                    in_server += 1;
                    let finish = serve(t, &mut rng, &mut server_free_at);
                    push(&mut heap, finish, Event::Done(t));
                } else if inflight::refuse_on_arrival(waiting.len(), admission.rate_ops, admission.wait_max) {
                    rl.on_refused(Nanos(t));
                    out.refused.push(t);
                } else {
                    waiting.push_back(t);
                }
            }
            Event::Done(due) => {
                in_server -= 1;
                let done = t + machine.base_ns;
                rl.on_completion(Nanos(done), done - due);
                out.served.push((done, done - due));
                while in_server < admission.inflight_max {
                    let Some(due) = waiting.pop_front() else { break };
                    if t - due > admission.wait_max.0 {
                        rl.on_refused(Nanos(t));
                        out.refused.push(t);
                        continue;
                    }
                    in_server += 1;
                    let finish = serve(t, &mut rng, &mut server_free_at);
                    push(&mut heap, finish, Event::Done(due));
                }
            }
            Event::Tick => {
                if let Some(d) = rl.tick(Nanos(t)).decision {
                    out.decisions.push((t, d, rl.capacity_ops().unwrap_or(0.0), rl.gamma()));
                }
                out.rates.push((t, rl.rate_ops()));
                push(&mut heap, rl.next_tick().0.max(t + 1), Event::Tick);
            }
        }
        out.inflight_max_seen = out.inflight_max_seen.max(in_server);
        // An event that sent a request past W breaks it (a W that shrank under the
        // requests already in flight does not: they are not recalled).
        if in_server > in_server_before
            && in_server > admission.inflight_max.max(1)
            && admission.inflight_max != inflight::WINDOW_UNKNOWN
        {
            out.window_broken += 1;
        }
    }
    out
}

fn without(part: &str, slo_ns: f64) -> RateLoopConfig {
    let mut cfg = RateLoopConfig::new(slo_ns);
    cfg.parts.disable(part).unwrap();
    cfg
}

/// 20k requests/s at 50 µs each, behind 200 µs of network, under a 2 ms p99.
fn node() -> Machine {
    Machine {
        mu: 20_000.0,
        base_ns: 200_000,
        stalls: Vec::new(),
    }
}

const SLO_NS: f64 = 2e6;

#[test]
fn finds_the_capacity_and_holds_the_slo_near_it() {
    let r = run(RateLoopConfig::new(SLO_NS), &node(), 10_000 * MS, 1);
    let throughput = r.throughput(5_000 * MS, 10_000 * MS);
    let slow = r.slow_share(5_000 * MS, 10_000 * MS, SLO_NS as u64);
    // M/M/1 behind 200 µs meets a 2 ms p99 up to ρ ≈ 0.79 (p99 of the sojourn is
    // ln(100)/(μ − λ) ≤ 1.8 ms): the loop should serve most of that.
    assert!(throughput > 0.6 * 20_000.0, "{throughput:.0}/s");
    assert!(slow < 0.01, "slow share {slow}");
}

/// The machine of [`node`] stalled for 200 ms at 5 s: every request in flight or arriving
/// then completes over the SLO.
fn collapse() -> Machine {
    Machine {
        stalls: vec![(5_000 * MS, 5_200 * MS)],
        ..node()
    }
}

#[test]
fn after_a_200_ms_collapse_r_is_back_within_a_second() {
    let r = run(RateLoopConfig::new(SLO_NS), &collapse(), 8_000 * MS, 2);
    let before = r.mean_rate(4_000 * MS, 5_000 * MS);
    let after = r.mean_rate(5_200 * MS, 6_200 * MS);
    assert!(
        after >= 0.8 * before,
        "R {after:.0} in the second after, {before:.0} before"
    );
}

#[test]
fn the_capacity_filter_keeps_r_up_where_the_last_window_alone_ratchets_it_down() {
    let with = run(RateLoopConfig::new(SLO_NS), &node(), 10_000 * MS, 3);
    let without = run(without("capacity-filter", SLO_NS), &node(), 10_000 * MS, 3);
    let (a, b) = (
        with.mean_rate(5_000 * MS, 10_000 * MS),
        without.mean_rate(5_000 * MS, 10_000 * MS),
    );
    assert!(b < 0.8 * a, "R {b:.0} without the filter, {a:.0} with");
}

/// Feeds `rl` one decision's window at `now`: `n` completions of `latency_ns`, a share
/// `slow` of them at `slow_ns` instead, spread over the 100 ms before `now`.
fn window(rl: &mut RateLoop, now: u64, n: u64, latency_ns: u64, slow: f64, slow_ns: u64) -> Option<Decision> {
    let slow_every = if slow > 0.0 {
        (1.0 / slow).round() as u64
    } else {
        u64::MAX
    };
    for i in 0..n {
        let at = now - 100 * MS + 1 + i * (100 * MS - 2) / n;
        let latency = if i % slow_every == slow_every - 1 {
            slow_ns
        } else {
            latency_ns
        };
        rl.on_completion(Nanos(at + latency), latency);
    }
    rl.tick(Nanos(now + 2 * MS)).decision
}

/// A loop out of startup and cruising: windows meet the SLO below 20k/s and are far over
/// it above.
fn cruising(cfg: RateLoopConfig) -> (RateLoop, u64) {
    let mut rl = RateLoop::new(cfg, Nanos::ZERO).unwrap();
    let mut now = 0;
    for _ in 0..40 {
        now += 200 * MS;
        let slow = if rl.rate_ops() < 20_000.0 { 0.0 } else { 0.5 };
        window(&mut rl, now, 2_500, 300_000, slow, 4 * SLO_NS as u64);
    }
    assert!(rl.capacity_ops().is_some(), "out of startup");
    (rl, now)
}

#[test]
fn a_small_overshoot_costs_a_small_cut() {
    // One window a little over the loop's target (2 % of it at 1.1 × 0.8 × the SLO): the
    // next rate is cut by a few percent, where halving takes half.
    let next_after_overshoot = |cfg: RateLoopConfig| {
        let (mut rl, now) = cruising(cfg);
        let before = rl.rate_ops();
        let slow_ns = (1.1 * LATENCY_TARGET * SLO_NS) as u64;
        let d = window(&mut rl, now + 200 * MS, 2_500, 300_000, 0.02, slow_ns).unwrap();
        assert!(!d.met, "{d:?}");
        rl.rate_ops() / before
    };
    let proportional = next_after_overshoot(RateLoopConfig::new(SLO_NS));
    let halving = next_after_overshoot(without("proportional-cut", SLO_NS));
    assert!(proportional > 0.9, "R cut to {proportional} of itself");
    assert!(halving < 0.6, "R cut to {halving} of itself when halving");
}

/// [`node`] stalled for 2.6 ms every 150 ms: the slack under the SLO is ~1.6 ms, so a
/// stall makes the requests of its first millisecond slow, and its backlog (draining in
/// D ρ/(1 − ρ)) those after them the more the higher the load: about 0.7 % / (1 − ρ) of
/// all, which the SLO's 1 % allows only at a low load.
fn stalls() -> Machine {
    Machine {
        stalls: (1..100).map(|k| (k * 150 * MS, k * 150 * MS + 2_600_000)).collect(),
        ..node()
    }
}

#[test]
fn gamma_learns_the_margin_a_stalling_machine_needs() {
    let slo = SLO_NS as u64;
    let with = run(RateLoopConfig::new(SLO_NS), &stalls(), 12_000 * MS, 5);
    let fixed = run(without("margin", SLO_NS), &stalls(), 12_000 * MS, 5);
    let (a, b) = (
        with.slow_share(4_000 * MS, 12_000 * MS, slo),
        fixed.slow_share(4_000 * MS, 12_000 * MS, slo),
    );
    // Within the SLO with γ learned, over it with γ fixed.
    assert!(a < 0.01, "slow share {a} with γ");
    assert!(b > 0.01 && b > 1.2 * a, "slow share {b} with γ fixed, {a} learned");
}

#[test]
fn the_window_bounds_what_a_stall_queues_and_sheds_what_would_miss() {
    let slo = SLO_NS as u64;
    let with = run(RateLoopConfig::new(SLO_NS), &collapse(), 8_000 * MS, 6);
    let rate_only = run(without("window", SLO_NS), &collapse(), 8_000 * MS, 6);
    assert_eq!(with.window_broken, 0, "requests in flight above W");
    assert!(
        with.inflight_max_seen * 4 < rate_only.inflight_max_seen,
        "in flight at most {} with the window, {} without",
        with.inflight_max_seen,
        rate_only.inflight_max_seen
    );
    // After the stall, the backlog is shed rather than served late: the requests over the
    // SLO (refusals included) in the half second after it are fewer.
    let (a, b) = (
        with.slow_share(5_000 * MS, 5_700 * MS, slo),
        rate_only.slow_share(5_000 * MS, 5_700 * MS, slo),
    );
    assert!(a < b, "slow share after the stall {a} with the window, {b} without");
    assert!(!with.refused.is_empty(), "the window refused nothing");
}

#[test]
fn rejects_bad_config() {
    let mut cfg = RateLoopConfig::new(SLO_NS);
    cfg.rate_init_ops = 0.0;
    assert!(RateLoop::new(cfg, Nanos::ZERO).is_err());
    assert!(RateLoop::new(RateLoopConfig::new(-1.0), Nanos::ZERO).is_err());
    assert!(RateLoopConfig::new(SLO_NS).parts.disable("nonsense").is_err());
}
