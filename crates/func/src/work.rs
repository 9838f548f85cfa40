//! Emulated compute: a calibrated busy-wait, the same code on both sides.
//!
//! The work is a fixed number of loop iterations, not "spin until the clock says so": a
//! storage function's compute is CPU work, so when its thread is preempted the work must
//! take longer, exactly as real computation would. The iteration rate is calibrated once
//! per process by the glue layer (this crate reads no clock) and can be set explicitly so
//! that a storage node and its clients spin identically.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

/// Iterations per millisecond used before calibration: the order of magnitude of one
/// iteration per cycle on a ~2–3 GHz core, so uncalibrated work is roughly right.
pub const DEFAULT_ITERS_PER_MS: u64 = 1_000_000;

/// Iterations timed per calibration round: long enough (~1 ms) to dwarf timer overhead.
const CALIBRATION_ITERS: u64 = 1_000_000;

/// Calibration rounds; the fastest wins, discarding rounds disturbed by preemption.
const CALIBRATION_ROUNDS: usize = 15;

static ITERS_PER_MS: AtomicU64 = AtomicU64::new(DEFAULT_ITERS_PER_MS);

/// Runs `iterations` iterations of the busy loop.
#[inline(never)]
pub fn spin_iterations(iterations: u64) {
    let mut acc = 0u64;
    for i in 0..iterations {
        acc = black_box(acc.wrapping_add(i));
    }
    black_box(acc);
}

/// Burns `ns` nanoseconds of CPU at the calibrated rate.
pub fn spin_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let per_ms = ITERS_PER_MS.load(Ordering::Relaxed);
    spin_iterations(ns.saturating_mul(per_ms) / 1_000_000);
}

/// The calibrated rate in iterations per millisecond.
pub fn iters_per_ms() -> u64 {
    ITERS_PER_MS.load(Ordering::Relaxed)
}

/// Sets the rate, e.g. to the value a benchmark measured once and hands to every process.
pub fn set_iters_per_ms(value: u64) {
    ITERS_PER_MS.store(value.max(1), Ordering::Relaxed);
}

/// Measures the rate with `time_ns`, which must run the closure it is given and return how
/// many nanoseconds that took (the caller owns the clock). Sets and returns the rate.
pub fn calibrate(mut time_ns: impl FnMut(&mut dyn FnMut()) -> u64) -> u64 {
    let mut best_ns = u64::MAX;
    for _ in 0..CALIBRATION_ROUNDS {
        let elapsed = time_ns(&mut || spin_iterations(CALIBRATION_ITERS));
        best_ns = best_ns.min(elapsed.max(1));
    }
    let per_ms = CALIBRATION_ITERS.saturating_mul(1_000_000) / best_ns;
    set_iters_per_ms(per_ms);
    per_ms.max(1)
}
