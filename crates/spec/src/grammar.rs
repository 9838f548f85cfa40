//! The grammar every flag value shares: durations (`NUMBER UNIT`, UNIT one of `ns`, `us`
//! or `µs`, `ms`, `s`; e.g. `10us`, `1.5ms`), bounded numbers and `key=value` lists.

use ferry_control::Nanos;

use crate::SpecError;

/// Largest accepted duration: 10⁶ s, far beyond any simulated or benchmark run.
pub const DURATION_MAX: Nanos = Nanos::from_secs(1_000_000);

/// Parses a duration such as `10us`, `1.5ms`, `5s`, `200ns`.
pub fn parse_duration(input: &str) -> Result<Nanos, SpecError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(SpecError::Empty { what: "duration" });
    }
    if s.starts_with('-') {
        return Err(SpecError::Negative {
            what: "duration",
            input: input.to_string(),
        });
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    if num.is_empty() {
        return Err(SpecError::BadNumber {
            what: "duration",
            input: input.to_string(),
        });
    }
    let value: f64 = num.parse().map_err(|_| SpecError::BadNumber {
        what: "duration",
        input: input.to_string(),
    })?;
    let scale = match unit {
        "" => {
            return Err(SpecError::MissingUnit {
                input: input.to_string(),
            })
        }
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => {
            return Err(SpecError::UnknownUnit {
                input: input.to_string(),
                unit: other.to_string(),
            })
        }
    };
    let ns = (value * scale).round();
    if !ns.is_finite() || ns > DURATION_MAX.0 as f64 {
        return Err(SpecError::OutOfRange {
            what: "duration",
            value: input.to_string(),
            range: "[0, 1000000s]",
        });
    }
    Ok(Nanos(ns as u64))
}

/// Parses a number in `[lo, hi]`.
pub fn parse_f64_in(what: &'static str, input: &str, lo: f64, hi: f64, range: &'static str) -> Result<f64, SpecError> {
    let v: f64 = input.trim().parse().map_err(|_| SpecError::BadNumber {
        what,
        input: input.to_string(),
    })?;
    if !v.is_finite() || v < lo || v > hi {
        return Err(SpecError::OutOfRange {
            what,
            value: input.to_string(),
            range,
        });
    }
    Ok(v)
}

/// Parses a non-negative integer no larger than `max`.
pub fn parse_u64_max(what: &'static str, input: &str, max: u64, range: &'static str) -> Result<u64, SpecError> {
    let t = input.trim();
    if t.starts_with('-') {
        return Err(SpecError::Negative {
            what,
            input: input.to_string(),
        });
    }
    let v: u64 = t.parse().map_err(|_| SpecError::BadNumber {
        what,
        input: input.to_string(),
    })?;
    if v > max {
        return Err(SpecError::OutOfRange {
            what,
            value: input.to_string(),
            range,
        });
    }
    Ok(v)
}

/// Splits `k=v,k=v` into pairs, rejecting duplicates and keys outside `allowed`.
pub fn parse_params<'a>(
    what: &'static str,
    input: &'a str,
    allowed: &'static str,
) -> Result<Vec<(&'a str, &'a str)>, SpecError> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for part in input.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let Some((k, v)) = part.split_once('=') else {
            return Err(SpecError::NotKeyValue {
                input: part.to_string(),
            });
        };
        let (k, v) = (k.trim(), v.trim());
        if !allowed.split(", ").any(|a| a == k) {
            return Err(SpecError::UnknownParam {
                what,
                key: k.to_string(),
                allowed,
            });
        }
        if out.iter().any(|(x, _)| *x == k) {
            return Err(SpecError::DuplicateParam { key: k.to_string() });
        }
        out.push((k, v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10us").unwrap(), Nanos::from_us(10));
        assert_eq!(parse_duration("10µs").unwrap(), Nanos::from_us(10));
        assert_eq!(parse_duration("5s").unwrap(), Nanos::from_secs(5));
        assert_eq!(parse_duration("1.5ms").unwrap(), Nanos(1_500_000));
        assert_eq!(parse_duration(" 200ns ").unwrap(), Nanos(200));
        assert_eq!(parse_duration("0s").unwrap(), Nanos::ZERO);
        assert!(matches!(parse_duration("10"), Err(SpecError::MissingUnit { .. })));
        assert!(matches!(parse_duration("10x"), Err(SpecError::UnknownUnit { .. })));
        assert!(matches!(parse_duration("-5s"), Err(SpecError::Negative { .. })));
        assert!(matches!(parse_duration("us"), Err(SpecError::BadNumber { .. })));
        assert!(matches!(parse_duration("1.2.3s"), Err(SpecError::BadNumber { .. })));
        assert!(matches!(parse_duration(""), Err(SpecError::Empty { .. })));
        assert!(parse_duration("1e30s").is_err());
        assert!(matches!(
            parse_duration("99999999999s"),
            Err(SpecError::OutOfRange { .. })
        ));
    }
}
