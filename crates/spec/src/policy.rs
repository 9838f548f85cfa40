//! The policy flag value shared by `ferry sim`, `sim-sweep`, `sim-suite`, `bench`, `sweep`
//! and `demo`, and the factory that builds the policy it names.
//!
//! Grammar: `NAME[:PARAMS]`, PARAMS a comma-separated list of `key=value`:
//! - `kv`, `rpc`, `fixed:X[,...]`: a fixed RPC fraction X (0 and 1 for kv and rpc) with the
//!   R loop setting the rate;
//! - `balance[:slicing=share|equal,...]`: X from each side's measured CPU (the load
//!   model's balance on capture-scaled costs, then steps toward balanced utilisation), the
//!   default; on a mix of functions X is Pyxis' turning point, cut into the functions'
//!   slices by their shares of the requests (`share`, the default) or equally (`equal`);
//! - `pyxis[:alpha0=F,slicing=share|equal,m=M,...]`: Pyxis as published: profile at 50 %, then
//!   Algorithm 1 over the whole of [0, 1] from α0 (default 0.5), no prediction (default
//!   slicing `equal`, the paper's equation (14));
//! - `kayak[:x0=F,r-hz=F,x-hz=F,...]`: Kayak's dual loop as published (Algorithm II: the R
//!   loop inside a gradient-ascent X loop), the baseline; `kayak-xr[:...]`: Algorithm I;
//!   `kayak-plus[:...]`: Kayak+, Algorithm II with one X per function, climbed in turn;
//! - `asfp`: everything remote, the node pushes invocations back (real system only).
//!
//! Every policy with an R loop also takes `without=PART[+PART...]`, the parts to switch
//! off for an ablation: the R loop's (`window`, `capacity-filter`, `proportional-cut`,
//! `margin`) and, for `balance`, its own (`capture`, `feed-forward`).

use ferry_control::placement::balance::{Balance, BalanceConfig, Parts as BalanceParts, PART_NAMES as BALANCE_PARTS};
use ferry_control::placement::load_model::Capacity;
use ferry_control::placement::mix::Slicing;
use ferry_control::rate::{RateLoopConfig, PART_NAMES as RATE_PARTS};
use ferry_control::{ControlError, FixedFraction, Kayak, KayakConfig, Nanos, Policy, Pyxis, PyxisConfig};

use crate::grammar::{parse_f64_in, parse_params, parse_u64_max};
use crate::SpecError;

/// Largest accepted loop frequency: 1 MHz, a period of 1 µs (the R loop's minimum period).
pub const LOOP_HZ_MAX: f64 = 1e6;

/// The policies, for messages.
pub const POLICIES: &str = "kv, rpc, fixed:X, balance, pyxis, kayak, kayak-xr, kayak-plus, asfp";

/// What every policy with an R loop may be told about it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RateParams {
    /// Parts to switch off, by name (the R loop's and the policy's own).
    pub without: Vec<String>,
}

/// What a `balance` spec may carry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BalanceParams {
    /// How a mix's turning point is cut (`slicing=`; default `share`).
    pub slicing: Option<Slicing>,
    /// The R loop's parameters (and the policy's parts to switch off).
    pub rate: RateParams,
}

/// What a `pyxis` spec may carry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PyxisParams {
    /// Where Algorithm 1 starts (`alpha0=`; default 0.5).
    pub alpha0: Option<f64>,
    /// How the turning point is cut (`slicing=`; default `equal`).
    pub slicing: Option<Slicing>,
    /// Algorithm 1's grid segments M (`m=`; default 5).
    pub segments: Option<u32>,
    /// The R loop's parameters (and the policy's parts to switch off).
    pub rate: RateParams,
}

fn parse_slicing(v: &str) -> Result<Slicing, SpecError> {
    match v {
        "share" => Ok(Slicing::Share),
        "equal" => Ok(Slicing::Equal),
        _ => Err(SpecError::Invalid(format!("slicing '{v}' is not one of share, equal"))),
    }
}

/// Tuning knobs a Kayak policy spec may carry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KayakParams {
    /// Starting X.
    pub x0: Option<f64>,
    /// R-loop frequency in Hz.
    pub r_hz: Option<f64>,
    /// X-loop frequency in Hz.
    pub x_hz: Option<f64>,
    /// The R loop's parameters.
    pub rate: RateParams,
}

/// A parsed policy spec.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicySpec {
    /// All local (X = 0) with the R loop.
    Kv(RateParams),
    /// All remote (X = 1) with the R loop.
    Rpc(RateParams),
    /// Fixed X with the R loop.
    Fixed(f64, RateParams),
    /// Placement from measured costs.
    Balance(BalanceParams),
    /// Pyxis as published.
    Pyxis(PyxisParams),
    /// Kayak, R-X ordering (Algorithm II).
    Kayak(KayakParams),
    /// Kayak, X-R ordering (Algorithm I).
    KayakXr(KayakParams),
    /// Kayak+: Algorithm II per function.
    KayakPlus(KayakParams),
    /// ASFP: every invocation remote, the node pushes compute-bound ones back when it is
    /// overloaded (real system only: the simulator does not model pushback).
    Asfp,
}

/// ferry's default adaptive policy: what `ferry sim-suite`, `ferry bench` and `ferry demo`
/// run when no policy is named (the better one on `ferry sim-suite`; docs/SIMULATION.md
/// has the numbers).
pub fn default_policy() -> PolicySpec {
    PolicySpec::Balance(BalanceParams::default())
}

/// The names `without=` accepts for a policy with these own parts.
fn check_parts(names: &[String], own: &'static str) -> Result<(), SpecError> {
    for name in names {
        let known = RATE_PARTS.split(", ").chain(own.split(", ").filter(|s| !s.is_empty()));
        if !known.clone().any(|k| k == name) {
            return Err(SpecError::Invalid(format!(
                "unknown part '{name}' in without= (allowed: {RATE_PARTS}{}{own})",
                if own.is_empty() { "" } else { ", " }
            )));
        }
    }
    Ok(())
}

/// `key=value` pairs of a spec.
type Pairs<'a> = Vec<(&'a str, &'a str)>;

/// Parses the `without` key shared by every policy with an R loop, from the key-value
/// pairs `kv` (it is removed; the rest are returned).
fn take_rate_params<'a>(kv: Pairs<'a>, own: &'static str) -> Result<(RateParams, Pairs<'a>), SpecError> {
    let mut p = RateParams::default();
    let mut rest = Vec::new();
    for (k, v) in kv {
        match k {
            "without" => {
                p.without = v
                    .split('+')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                check_parts(&p.without, own)?;
            }
            _ => rest.push((k, v)),
        }
    }
    Ok((p, rest))
}

fn parse_kayak_params(params: &str) -> Result<KayakParams, SpecError> {
    let kv = parse_params("kayak", params, "x0, r-hz, x-hz, without")?;
    let (rate, rest) = take_rate_params(kv, "")?;
    let mut p = KayakParams {
        rate,
        ..KayakParams::default()
    };
    for (k, v) in rest {
        match k {
            "x0" => p.x0 = Some(parse_f64_in("x0", v, 0.0, 1.0, "[0, 1]")?),
            "r-hz" => p.r_hz = Some(parse_f64_in("r-hz", v, 1e-3, LOOP_HZ_MAX, "[0.001, 1e6]")?),
            "x-hz" => p.x_hz = Some(parse_f64_in("x-hz", v, 1e-3, LOOP_HZ_MAX, "[0.001, 1e6]")?),
            _ => unreachable!("parse_params only returns allowed keys"),
        }
    }
    Ok(p)
}

/// Parses a policy spec (see the module docs for the grammar).
pub fn parse_policy(input: &str) -> Result<PolicySpec, SpecError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(SpecError::Empty { what: "policy" });
    }
    let (name, params) = match s.split_once(':') {
        Some((n, p)) => (n.trim(), p),
        None => (s, ""),
    };
    let rate_only = |what: &'static str, params: &str, own: &'static str| -> Result<RateParams, SpecError> {
        let kv = parse_params(what, params, "without")?;
        Ok(take_rate_params(kv, own)?.0)
    };
    match name {
        "kv" => Ok(PolicySpec::Kv(rate_only("kv", params, "")?)),
        "rpc" => Ok(PolicySpec::Rpc(rate_only("rpc", params, "")?)),
        "fixed" => {
            let (x, rest) = match params.split_once(',') {
                Some((x, rest)) => (x, rest),
                None => (params, ""),
            };
            if x.trim().is_empty() {
                return Err(SpecError::Invalid(
                    "fixed needs an RPC fraction, e.g. 'fixed:0.4'".into(),
                ));
            }
            let x = parse_f64_in("rpc fraction", x, 0.0, 1.0, "[0, 1]")?;
            Ok(PolicySpec::Fixed(x, rate_only("fixed", rest, "")?))
        }
        "balance" => {
            let kv = parse_params("balance", params, "slicing, without")?;
            let (rate, rest) = take_rate_params(kv, BALANCE_PARTS)?;
            let mut p = BalanceParams {
                rate,
                ..BalanceParams::default()
            };
            for (_, v) in rest {
                p.slicing = Some(parse_slicing(v)?);
            }
            Ok(PolicySpec::Balance(p))
        }
        "pyxis" => {
            let kv = parse_params("pyxis", params, "alpha0, slicing, m, without")?;
            let (rate, rest) = take_rate_params(kv, "")?;
            let mut p = PyxisParams {
                rate,
                ..PyxisParams::default()
            };
            for (k, v) in rest {
                match k {
                    "alpha0" => p.alpha0 = Some(parse_f64_in("alpha0", v, 0.0, 1.0, "[0, 1]")?),
                    "m" => p.segments = Some(parse_u64_max("m", v, 100, "[3, 100]")? as u32),
                    _ => p.slicing = Some(parse_slicing(v)?),
                }
            }
            Ok(PolicySpec::Pyxis(p))
        }
        "kayak" => Ok(PolicySpec::Kayak(parse_kayak_params(params)?)),
        "kayak-xr" => Ok(PolicySpec::KayakXr(parse_kayak_params(params)?)),
        "kayak-plus" => Ok(PolicySpec::KayakPlus(parse_kayak_params(params)?)),
        "asfp" if params.trim().is_empty() => Ok(PolicySpec::Asfp),
        "asfp" => Err(SpecError::Invalid("policy 'asfp' takes no parameters".into())),
        _ => Err(SpecError::UnknownPolicy { name: name.to_string() }),
    }
}

impl RateParams {
    /// `cfg` with these parameters applied.
    fn apply(&self, cfg: &mut RateLoopConfig) -> Result<(), ControlError> {
        for name in &self.without {
            if RATE_PARTS.split(", ").any(|g| g == name) {
                cfg.parts.disable(name)?;
            }
        }
        Ok(())
    }
}

impl PolicySpec {
    /// Short name (`balance`, `fixed:0.4`, ...).
    pub fn name(&self) -> String {
        match self {
            PolicySpec::Kv(_) => "kv".into(),
            PolicySpec::Rpc(_) => "rpc".into(),
            PolicySpec::Fixed(x, _) => format!("fixed:{x}"),
            PolicySpec::Balance(_) => "balance".into(),
            PolicySpec::Pyxis(_) => "pyxis".into(),
            PolicySpec::Kayak(_) => "kayak".into(),
            PolicySpec::KayakXr(_) => "kayak-xr".into(),
            PolicySpec::KayakPlus(_) => "kayak-plus".into(),
            PolicySpec::Asfp => "asfp".into(),
        }
    }

    /// The X values this policy may use: its fixed X, or the whole range.
    pub fn fixed_x(&self) -> Option<f64> {
        match self {
            PolicySpec::Kv(_) => Some(0.0),
            PolicySpec::Rpc(_) | PolicySpec::Asfp => Some(1.0),
            PolicySpec::Fixed(x, _) => Some(*x),
            PolicySpec::Balance(_)
            | PolicySpec::Pyxis(_)
            | PolicySpec::Kayak(_)
            | PolicySpec::KayakXr(_)
            | PolicySpec::KayakPlus(_) => None,
        }
    }

    /// The R-loop parameters the spec carries (defaults for ASFP).
    pub fn rate_params(&self) -> RateParams {
        match self {
            PolicySpec::Kv(p) | PolicySpec::Rpc(p) | PolicySpec::Fixed(_, p) => p.clone(),
            PolicySpec::Balance(b) => b.rate.clone(),
            PolicySpec::Pyxis(p) => p.rate.clone(),
            PolicySpec::Kayak(k) | PolicySpec::KayakXr(k) | PolicySpec::KayakPlus(k) => k.rate.clone(),
            PolicySpec::Asfp => RateParams::default(),
        }
    }

    /// Builds the policy for an SLO on the `quantile` latency of `slo`, starting at time 0,
    /// for a deployment with `capacity` cores on each side (if known; `balance` needs it).
    pub fn build(
        &self,
        slo: Nanos,
        quantile: f64,
        capacity: Option<Capacity>,
        seed: u64,
    ) -> Result<Box<dyn Policy>, ControlError> {
        let mut rate = RateLoopConfig::new(slo.0 as f64);
        rate.quantile = quantile;
        self.rate_params().apply(&mut rate)?;
        let now = Nanos::ZERO;
        let fixed = |name: String, x: f64| FixedFraction::new(name, x, rate.clone(), now, seed);
        Ok(match self {
            PolicySpec::Kv(_) => Box::new(fixed("kv".into(), 0.0)?),
            PolicySpec::Rpc(_) => Box::new(fixed("rpc".into(), 1.0)?),
            PolicySpec::Fixed(x, _) => Box::new(fixed(format!("fixed:{x}"), *x)?),
            PolicySpec::Asfp => Box::new(FixedFraction::asfp(rate, now, seed)?),
            PolicySpec::Balance(p) => {
                let capacity = capacity.ok_or(ControlError::Missing {
                    what: "the cores of each side (balance places by each side's load)",
                })?;
                let mut cfg = BalanceConfig::new(slo.0 as f64, capacity, seed);
                cfg.rate = rate;
                cfg.parts = BalanceParts::without(&p.rate.without)?;
                cfg.slicing = p.slicing.unwrap_or_default();
                Box::new(Balance::new(cfg, now)?)
            }
            PolicySpec::Pyxis(p) => {
                let capacity = capacity.ok_or(ControlError::Missing {
                    what: "the cores of each side (pyxis feeds R forward by each side's load)",
                })?;
                let mut cfg = PyxisConfig::new(slo.0 as f64, capacity, seed);
                cfg.rate = rate;
                if let Some(alpha0) = p.alpha0 {
                    cfg.alpha0 = alpha0;
                }
                if let Some(m) = p.segments {
                    cfg.segments = m;
                }
                if let Some(slicing) = p.slicing {
                    cfg.slicing = slicing;
                }
                Box::new(Pyxis::new(cfg, now)?)
            }
            PolicySpec::Kayak(p) | PolicySpec::KayakXr(p) | PolicySpec::KayakPlus(p) => {
                let mut cfg = match self {
                    PolicySpec::Kayak(_) => KayakConfig::rate_then_fraction(rate, seed),
                    PolicySpec::KayakPlus(_) => KayakConfig::per_function(rate, seed),
                    _ => KayakConfig::fraction_then_rate(rate, seed),
                };
                if let Some(x0) = p.x0 {
                    cfg.x_init = x0;
                }
                if let Some(hz) = p.r_hz {
                    cfg.rate.period = Nanos::from_hz(hz);
                }
                if let Some(hz) = p.x_hz {
                    cfg.x_period = Nanos::from_hz(hz);
                }
                Box::new(Kayak::new(cfg, now)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies() {
        assert_eq!(parse_policy("kv").unwrap(), PolicySpec::Kv(RateParams::default()));
        assert_eq!(parse_policy("rpc").unwrap(), PolicySpec::Rpc(RateParams::default()));
        assert_eq!(
            parse_policy("fixed:0.4").unwrap(),
            PolicySpec::Fixed(0.4, RateParams::default())
        );
        assert_eq!(
            parse_policy("fixed:0.4,without=margin").unwrap(),
            PolicySpec::Fixed(
                0.4,
                RateParams {
                    without: vec!["margin".into()]
                }
            )
        );
        assert_eq!(parse_policy("balance").unwrap(), default_policy());
        assert_eq!(
            parse_policy("balance:without=capture+window").unwrap(),
            PolicySpec::Balance(BalanceParams {
                slicing: None,
                rate: RateParams {
                    without: vec!["capture".into(), "window".into()]
                }
            })
        );
        assert_eq!(
            parse_policy("pyxis:alpha0=0,slicing=share").unwrap(),
            PolicySpec::Pyxis(PyxisParams {
                alpha0: Some(0.0),
                slicing: Some(Slicing::Share),
                segments: None,
                rate: RateParams::default(),
            })
        );
        assert!(matches!(
            parse_policy("balance:slicing=equal").unwrap(),
            PolicySpec::Balance(BalanceParams {
                slicing: Some(Slicing::Equal),
                ..
            })
        ));
        let p = parse_policy("kayak:x0=0.25,x-hz=10").unwrap();
        assert_eq!(
            p,
            PolicySpec::Kayak(KayakParams {
                x0: Some(0.25),
                r_hz: None,
                x_hz: Some(10.0),
                rate: RateParams::default(),
            })
        );
        assert!(matches!(parse_policy("kayak-xr").unwrap(), PolicySpec::KayakXr(_)));
        assert!(matches!(
            parse_policy("kayak-plus:x0=0").unwrap(),
            PolicySpec::KayakPlus(_)
        ));
        for (input, want) in [
            ("fixed:1.5", "out of range"),
            ("fixed", "needs an RPC fraction"),
            ("fixed:abc", "not a number"),
            ("turbo", "unknown policy 'turbo'"),
            ("asfp:1", "takes no parameters"),
            ("kv:1", "not of the form key=value"),
            ("kayak:speed=3", "unknown parameter"),
            ("kayak:budget=0.5", "unknown parameter"),
            ("kayak:without=capture", "unknown part 'capture'"),
            ("balance:search=on", "unknown parameter"),
            ("balance:slicing=even", "slicing 'even' is not one of share, equal"),
            ("pyxis:alpha0=1.5", "out of range"),
            ("pyxis:search=on", "unknown parameter 'search'"),
            ("pyxis:m=x", "not a number"),
            ("balance:without=nothing", "unknown part 'nothing'"),
            ("rpc:x0=1", "unknown parameter"),
        ] {
            let err = parse_policy(input).unwrap_err().to_string();
            assert!(err.contains(want), "{input}: {err}");
        }
    }

    #[test]
    fn build_rejects_what_cannot_run() {
        // The R loop at 20 Hz cannot be the inner loop of an X loop at 200 Hz.
        let err = parse_policy("kayak:r-hz=20,x-hz=200")
            .unwrap()
            .build(Nanos::from_us(200), 0.99, None, 1)
            .err()
            .unwrap();
        assert!(matches!(err, ControlError::InnerNotFaster { .. }), "{err}");
        assert!(parse_policy("kayak")
            .unwrap()
            .build(Nanos::from_us(200), 0.99, None, 1)
            .is_ok());
        // Balance places by each side's load: it needs the cores.
        let err = default_policy()
            .build(Nanos::from_us(200), 0.99, None, 1)
            .err()
            .unwrap();
        assert!(err.to_string().contains("cores of each side"), "{err}");
        let cores = Capacity {
            app_cores: 8.0,
            storage_cores: 8.0,
            links: None,
        };
        assert!(default_policy()
            .build(Nanos::from_us(200), 0.99, Some(cores), 1)
            .is_ok());
    }
}
