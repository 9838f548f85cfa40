//! `phases:period=DURATION;MIX;MIX[;...]`: a workload whose mix changes every `period`,
//! cycling through the MIXes (each a `+`-mix of workload elements, `A@0.2+B@0.8`): Pyxis
//! Fig. 9's changing mix or set of tasks. An element written the same way in two phases
//! is the same function.

use ferry_control::Nanos;

use crate::model::{FunctionSpec, PhaseMix, Workload, PHASES_MAX};
use ferry_spec::{parse_duration, SpecError};

use crate::mix::{mix_shares, parse_element};

/// Parses the part after `phases:` (see the module docs).
pub fn parse_phases(params: &str) -> Result<Workload, SpecError> {
    let mut parts = params.split(';');
    let period = parts
        .next()
        .and_then(|p| p.trim().strip_prefix("period="))
        .ok_or(SpecError::MissingParam {
            what: "phases",
            key: "period",
        })?;
    let period = parse_duration(period)?;
    if period == Nanos::ZERO {
        return Err(SpecError::OutOfRange {
            what: "phases period",
            value: "0".into(),
            range: "(0, 1000000s]",
        });
    }
    let mixes: Vec<&str> = parts.collect();
    if mixes.len() < 2 || mixes.len() > PHASES_MAX {
        return Err(SpecError::OutOfRange {
            what: "phases",
            value: mixes.len().to_string(),
            range: "[2, 64] mixes after period=",
        });
    }
    let mut names: Vec<String> = Vec::new();
    let mut functions: Vec<FunctionSpec> = Vec::new();
    let mut phases = Vec::new();
    for mix in mixes {
        let mut entries: Vec<(usize, f64)> = Vec::new();
        let elements: Vec<&str> = mix.split('+').collect();
        for element in &elements {
            let (f, weight) = parse_element(element)?;
            let key = element.split('@').next().unwrap_or(element).trim().to_string();
            let i = match names.iter().position(|n| *n == key) {
                Some(i) => i,
                None => {
                    names.push(key);
                    functions.push(f);
                    functions.len() - 1
                }
            };
            entries.push((i, weight));
        }
        let weights: Vec<f64> = entries.iter().map(|e| e.1).collect();
        for (e, share) in entries.iter_mut().zip(mix_shares(&elements, &weights)?) {
            e.1 = share;
        }
        phases.push(PhaseMix { entries });
    }
    Ok(Workload {
        label: format!("phases:{}", params.trim()),
        functions,
        phases,
        phase_period: period,
        demand: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_share_the_functions_written_alike_and_cycle() {
        let w = parse_phases("period=2s;light@0.2+heavy@0.8;light@0.8+heavy@0.2;medium").unwrap();
        assert!(w.validate().is_ok());
        assert_eq!(w.functions.len(), 3);
        assert_eq!(w.phases.len(), 3);
        assert_eq!(w.phases[1].entries, vec![(0, 0.8), (1, 0.2)]);
        assert_eq!(w.phases[2].entries, vec![(2, 1.0)]);
        assert_eq!(w.phase_at(Nanos::from_secs(5)), 2);
        for (bad, msg) in [
            ("light;heavy", "needs parameter 'period'"),
            ("period=0s;light;heavy", "out of range"),
            ("period=1s;light", "out of range"),
            ("period=1s;light;nope", "unknown workload 'nope'"),
            ("period=soon;light;heavy", "duration"),
            ("period=1s;light@0.2+heavy@0.9;medium", "sum to 1.1"),
        ] {
            let e = parse_phases(bad).unwrap_err().to_string();
            assert!(e.contains(msg), "{bad}: {e}");
        }
    }
}
