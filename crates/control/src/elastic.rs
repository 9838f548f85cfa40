//! Elastic compute (Pyxis §IV-D): a loop slower than placement that sizes the app side to
//! the demand.
//!
//! Every [`ELASTIC_PERIOD`] the driver reports how many app cores were active, how many
//! were busy on average, and whether the rate limiter held requests back (its rate below
//! the demand). The loop then asks for:
//! - more cores, by [`GROW_FACTOR`], when requests were held back (Pyxis: "when requests
//!   are dropped, this loop gradually increases the amount of compute"). Whichever side
//!   binds, more app cores help while the placement can move work onto them: with the
//!   placement balancing the sides, an SLO-bound rate left both sides at 0.7 of their
//!   cores, and a rule that also asked for a busy app side never grew;
//! - with the demand met, the fewest cores that run the measured work at
//!   [`UTILIZATION_TARGET`] (Pyxis' "minimum amount of compute resources without impacting
//!   throughput", read off the app side's load ρ_C), but only once the work fits in the
//!   cores a shrink by [`GROW_FACTOR`] leaves, and by at most that factor per decision:
//!   a step down that undoes the last step up would cycle between the two sizes.
//!
//! Always within the configured range. The placement is told of every change (its load
//! model divides by the app cores), so the split moves with the cores.

use crate::error::ControlError;
use crate::time::Nanos;

/// How often the loop decides: twenty placement decisions' worth, slow enough that each
/// decision sees the placement settled at the last size, fast enough to follow a demand
/// that steps every few seconds within a fraction of a second.
pub const ELASTIC_PERIOD: Nanos = Nanos::from_ms(100);

/// The share of the active app cores the loop keeps busy: the headroom a multi-core side
/// needs before its waits grow (square-root staffing leaves 0.8–0.95 usable; the rest is
/// margin for the tail and for demand growing between decisions).
pub const UTILIZATION_TARGET: f64 = 0.75;

/// Growth per decision while demand is unmet: +25 %, so doubling takes three decisions.
pub const GROW_FACTOR: f64 = 1.25;

/// Most app cores the loop manages.
pub const CORES_MAX: u32 = 1 << 20;

/// What the driver measured over one period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElasticInput {
    /// App cores active over the period.
    pub active_cores: u32,
    /// App cores busy on average over the period (CPU-seconds per second).
    pub busy_cores: f64,
    /// Whether the rate limiter admitted less than the demand.
    pub throttled: bool,
}

/// The loop (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Elastic {
    min_cores: u32,
    max_cores: u32,
}

impl Elastic {
    /// Scales between `min_cores` and `max_cores` app cores.
    pub fn new(min_cores: u32, max_cores: u32) -> Result<Self, ControlError> {
        if min_cores == 0 || min_cores > max_cores || max_cores > CORES_MAX {
            return Err(ControlError::Range {
                name: "elastic app cores",
                min: u64::from(min_cores),
                max: u64::from(max_cores),
                limit: u64::from(CORES_MAX),
            });
        }
        Ok(Elastic { min_cores, max_cores })
    }

    /// The cores to start with: all of them, as Pyxis does, until the first decision
    /// has measured the work.
    pub fn initial_cores(&self) -> u32 {
        self.max_cores
    }

    /// The cores to run the next period with.
    pub fn decide(&self, input: &ElasticInput) -> u32 {
        let busy = input.busy_cores.max(0.0);
        let needed = (busy / UTILIZATION_TARGET).ceil() as u32;
        let active = input.active_cores.max(1);
        let cores = if input.throttled {
            needed.max((active as f64 * GROW_FACTOR).ceil() as u32)
        } else if needed as f64 * GROW_FACTOR <= active as f64 {
            needed.max((active as f64 / GROW_FACTOR).floor() as u32)
        } else {
            needed.max(active)
        };
        cores.clamp(self.min_cores, self.max_cores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(active_cores: u32, busy_cores: f64, throttled: bool) -> ElasticInput {
        ElasticInput {
            active_cores,
            busy_cores,
            throttled,
        }
    }

    #[test]
    fn grows_while_demand_is_unmet() {
        let e = Elastic::new(8, 128).unwrap();
        assert_eq!(e.decide(&input(32, 30.0, true)), 40);
        // Held back with the app side at 0.4: still grows (the placement moves work over).
        assert_eq!(e.decide(&input(32, 12.0, true)), 40);
        // Never beyond the range.
        assert_eq!(e.decide(&input(120, 119.0, true)), 128);
    }

    #[test]
    fn shrinks_toward_the_work_when_demand_is_met() {
        let e = Elastic::new(8, 128).unwrap();
        // 24 busy cores at a 0.75 target need 32; one step down goes to 51 of 64.
        assert_eq!(e.decide(&input(64, 24.0, false)), 51);
        assert_eq!(e.decide(&input(40, 24.0, false)), 32);
        // Work that would not fit after a step down: hold.
        assert_eq!(e.decide(&input(40, 25.0, false)), 40);
        // Idle: down a step at a time to the floor.
        assert_eq!(e.decide(&input(9, 0.0, false)), 8);
        // Busier than the target with the demand met: grows to the target.
        assert_eq!(e.decide(&input(32, 30.0, false)), 40);
    }

    #[test]
    fn rejects_an_empty_or_inverted_range() {
        assert!(Elastic::new(0, 8).is_err());
        assert!(Elastic::new(9, 8).is_err());
        assert_eq!(Elastic::new(4, 4).unwrap().initial_cores(), 4);
    }
}
