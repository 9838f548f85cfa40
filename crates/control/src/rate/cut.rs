//! The answer to a window over the SLO: R cut in proportion to how far the tail is over
//! it, bounded below (Breakwater's `C ← C · max(1 − β (d − t) / t, 0.5)`), and memoryless:
//! the cut applies until a window meets the SLO, and the window after a met one is back at
//! the margin's share of the remembered capacity. Consecutive windows over the SLO cut
//! again, but the loop never takes R below [`CUT_FLOOR`] of its cruise however long an
//! episode lasts. Nothing is owed for a window that has passed.
//!
//! The cut applies to the lower of the rate offered and the rate delivered: past the
//! capacity a window delivers the capacity, and a cut from the offered rate would leave the
//! next window over it.

/// β: a tail twice the SLO takes half the rate (the floor); 10 % over takes 5 %. Breakwater
/// cuts by β = 0.02 every ~10 µs; one cut per decision (tens of milliseconds) must do the
/// work of many of its steps.
pub const CUT_GAIN: f64 = 0.5;

/// The most one decision cuts: to half; and the lowest share of the cruise an episode of
/// windows over the SLO takes R to: a window whose tail was one stall's costs at most half
/// a window's rate, and a lasting overload is answered by the margin and the capacity
/// filter's memory ageing, not by cutting to nothing.
pub const CUT_FLOOR: f64 = 0.5;

/// The rate after a window whose tail `tail_ns` was over the SLO `slo_ns`, offered at
/// `offered_ops` and delivering `delivered_ops`; `proportional` false cuts to the floor
/// whatever the overshoot (the ablation: TCP's halving).
pub fn cut(offered_ops: f64, delivered_ops: f64, tail_ns: f64, slo_ns: f64, proportional: bool) -> f64 {
    let base = if delivered_ops > 0.0 {
        offered_ops.min(delivered_ops)
    } else {
        offered_ops
    };
    let factor = if proportional {
        let over = ((tail_ns - slo_ns) / slo_ns).max(0.0);
        (1.0 - CUT_GAIN * over).max(CUT_FLOOR)
    } else {
        CUT_FLOOR
    };
    base * factor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_in_proportion_to_the_overshoot_never_below_half() {
        let slo = 1_000_000.0;
        assert!((cut(10_000.0, 10_000.0, 1.1 * slo, slo, true) - 9_500.0).abs() < 1e-6);
        assert!((cut(10_000.0, 10_000.0, 1.5 * slo, slo, true) - 7_500.0).abs() < 1e-6);
        assert_eq!(cut(10_000.0, 10_000.0, 9.0 * slo, slo, true), 5_000.0);
        // Past the capacity the delivered rate is the base.
        assert_eq!(cut(20_000.0, 8_000.0, 9.0 * slo, slo, true), 4_000.0);
        // The halving ablation ignores the overshoot.
        assert_eq!(cut(10_000.0, 10_000.0, 1.1 * slo, slo, false), 5_000.0);
    }
}
