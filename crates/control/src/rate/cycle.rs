//! The gain cycle: once per cycle the loop probes above its cruise and then drains what
//! the probe queued (BBR's ProbeBW, `[1.25, 0.75, 1 × 6]`, one decision a phase).
//!
//! The probe is what keeps the capacity filter true: a loop that only cruised under its
//! memory would deliver less than it remembers, and its memory would ratchet down as it
//! ages out; a probe that meets the SLO refreshes it, or raises it where the machine has
//! more to give. The probe's step starts smaller than BBR's because BBR's probe costs a
//! little queue and ours can cost the SLO: ×1.1 over a cruise at γ ≈ 0.9–0.95 is a probe at
//! the remembered capacity or a few percent above it (and never under it, whatever γ). A probe that finds more than it
//! asked for half of doubles the next one's step, up to [`PROBE_STEP_MAX`] (BBRv2's
//! ProbeBW_UP, whose increment doubles each round that finds more), so a loop far under the
//! machine's capacity (a startup misled by a cold start) climbs back geometrically; any
//! other outcome sets the step back to [`PROBE_STEP`]. The drain after a probe, at ×0.9, is
//! also the schedule on which the unloaded latency is re-measured.

/// Decisions per cycle: one probe, one drain, six at the cruise.
pub const PHASES: usize = 8;

/// The probe's first step over the cruise.
pub const PROBE_STEP: f64 = 0.1;

/// The largest probe step: a probe at twice the cruise, startup's growth.
pub const PROBE_STEP_MAX: f64 = 1.0;

/// The drain's gain: what the probe added, taken back.
pub const DRAIN_GAIN: f64 = 0.9;

/// The first cruise phase: where a window over the SLO sends the cycle (no probe right
/// after a failure).
const FIRST_CRUISE: usize = 2;

/// Where in the cycle the loop is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GainCycle {
    phase: usize,
    /// The next probe's step over the cruise.
    step: f64,
}

impl GainCycle {
    /// A cycle starting at its first cruise phase (a full cruise before the first probe).
    pub fn cruising() -> Self {
        GainCycle {
            phase: FIRST_CRUISE,
            step: PROBE_STEP,
        }
    }

    /// The gain of the current phase.
    pub fn gain(&self) -> f64 {
        match self.phase {
            0 => 1.0 + self.step,
            1 => DRAIN_GAIN,
            _ => 1.0,
        }
    }

    /// Moves to the next phase and returns its gain.
    pub fn advance(&mut self) -> f64 {
        self.phase = (self.phase + 1) % PHASES;
        self.gain()
    }

    /// After a window over the SLO: the cycle resumes at its first cruise phase, so the
    /// next probe comes a whole cruise later, and the probe's step starts again.
    pub fn restart_cruise(&mut self) {
        self.phase = FIRST_CRUISE;
        self.step = PROBE_STEP;
    }

    /// Learns what the probe just judged found: whether it met the SLO delivering more
    /// than the remembered capacity by half its step or more.
    pub fn probed(&mut self, found_more: bool) {
        self.step = if found_more {
            (2.0 * self.step).min(PROBE_STEP_MAX)
        } else {
            PROBE_STEP
        };
    }

    /// The probe's step now.
    pub fn step(&self) -> f64 {
        self.step
    }

    /// Whether the current phase probes above the cruise.
    pub fn probing(&self) -> bool {
        self.phase == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_once_a_cycle_and_drains_after_it() {
        let mut c = GainCycle::cruising();
        let gains: Vec<f64> = (0..2 * PHASES).map(|_| c.advance()).collect();
        assert_eq!(gains.iter().filter(|&&g| g > 1.0).count(), 2);
        let probe = gains.iter().position(|&g| g > 1.0).unwrap();
        assert_eq!(gains[probe], 1.0 + PROBE_STEP);
        assert_eq!(gains[probe + 1], DRAIN_GAIN);
        c.restart_cruise();
        assert!(!c.probing());
    }

    #[test]
    fn a_probe_that_finds_more_doubles_the_next_step() {
        let mut c = GainCycle::cruising();
        for expected in [0.2, 0.4, 0.8, 1.0, 1.0] {
            c.probed(true);
            assert!((c.step() - expected).abs() < 1e-12, "{}", c.step());
        }
        c.probed(false);
        assert_eq!(c.step(), PROBE_STEP);
        c.probed(true);
        c.restart_cruise();
        assert_eq!(c.step(), PROBE_STEP);
    }
}
