//! Elastic compute's inputs: the demand offered to the cluster over time (`--demand`) and
//! the range the app side scales in (`--elastic MIN..MAX`).
//!
//! Without a demand the backlog saturates, as in every other experiment: the rate limiter
//! alone sets the load. With one, a group admits `min(R, its share of the demand)`, so a
//! cluster with more app cores than the demand needs is visibly oversized (Pyxis Fig. 14).

use ferry_control::Nanos;

use ferry_spec::{parse_duration, parse_u64_max, SpecError};

/// Most steps of a demand schedule.
pub const DEMAND_STEPS_MAX: usize = 64;

/// Largest accepted demand: 10⁹ requests per second, far beyond any simulated cluster.
pub const DEMAND_OPS_MAX: f64 = 1e9;

/// A demand that steps through `rates_ops`, each held for `step` (the last one for good).
#[derive(Clone, Debug, PartialEq)]
pub struct Demand {
    /// The demand of each step, requests per second.
    pub rates_ops: Vec<f64>,
    /// How long each step lasts.
    pub step: Nanos,
}

impl Demand {
    /// The demand at `t`.
    pub fn at(&self, t: Nanos) -> f64 {
        let i = if self.step == Nanos::ZERO {
            0
        } else {
            (t.0 / self.step.0).min(self.rates_ops.len() as u64 - 1) as usize
        };
        self.rates_ops[i]
    }
}

/// Parses a rate such as `250000`, `250k` or `1.5M` (requests per second).
pub fn parse_rate(input: &str) -> Result<f64, SpecError> {
    let t = input.trim();
    let (number, scale) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        _ => (t, 1.0),
    };
    let v: f64 = number.parse().map_err(|_| SpecError::BadNumber {
        what: "demand",
        input: input.to_string(),
    })?;
    let v = v * scale;
    if !(v.is_finite() && v > 0.0 && v <= DEMAND_OPS_MAX) {
        return Err(SpecError::OutOfRange {
            what: "demand",
            value: input.to_string(),
            range: "(0, 1e9] requests per second",
        });
    }
    Ok(v)
}

/// Parses `RATE[,RATE...][@STEP]`: a constant demand, or one stepping through the rates
/// every STEP (e.g. `250k,500k,750k,1M@5s`, Pyxis Fig. 14's staircase).
pub fn parse_demand(input: &str) -> Result<Demand, SpecError> {
    let (rates, step) = match input.split_once('@') {
        Some((rates, step)) => (rates, parse_duration(step)?),
        None => (input, Nanos::ZERO),
    };
    let rates_ops = rates.split(',').map(parse_rate).collect::<Result<Vec<f64>, _>>()?;
    if rates_ops.len() > DEMAND_STEPS_MAX {
        return Err(SpecError::OutOfRange {
            what: "demand steps",
            value: rates_ops.len().to_string(),
            range: "[1, 64]",
        });
    }
    if rates_ops.len() > 1 && step == Nanos::ZERO {
        return Err(SpecError::Invalid(format!(
            "demand '{input}' steps through several rates: give how long each lasts, e.g. '{rates}@5s'"
        )));
    }
    Ok(Demand { rates_ops, step })
}

/// Parses `MIN..MAX`, the app cores elastic compute scales between.
pub fn parse_elastic(input: &str) -> Result<(u32, u32), SpecError> {
    let Some((lo, hi)) = input.split_once("..") else {
        return Err(SpecError::Invalid(format!(
            "elastic range '{input}' is not of the form MIN..MAX (e.g. 16..128)"
        )));
    };
    let bound = |s: &str| parse_u64_max("elastic cores", s, u64::from(u32::MAX), "[1, 4294967295]");
    Ok((bound(lo)? as u32, bound(hi)? as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demand_steps_and_holds_its_last_rate() {
        let d = parse_demand("250k,500k,1M@5s").unwrap();
        assert_eq!(d.rates_ops, vec![250e3, 500e3, 1e6]);
        assert_eq!(d.at(Nanos::from_secs(4)), 250e3);
        assert_eq!(d.at(Nanos::from_secs(5)), 500e3);
        assert_eq!(d.at(Nanos::from_secs(60)), 1e6);
        assert_eq!(parse_demand("120000").unwrap().at(Nanos::from_secs(9)), 120e3);
    }

    #[test]
    fn bad_demands_and_ranges_are_refused() {
        for bad in ["", "fast", "-5k", "0", "1k,2k", "1k@", "1k,,2k@1s", "2e9"] {
            assert!(parse_demand(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_elastic("16..128").unwrap(), (16, 128));
        for bad in ["16", "a..b", "-1..4", "4..", "..4"] {
            assert!(parse_elastic(bad).is_err(), "{bad}");
        }
    }
}
