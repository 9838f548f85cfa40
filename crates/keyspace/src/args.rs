//! Arguments as Redis reads them, with Redis's error replies.

use bytes::Bytes;
use ferry_resp::Reply;

/// The error for an argument that should be an integer.
pub fn not_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

/// The error for an argument that should be a float.
pub fn not_float() -> Reply {
    Reply::err("value is not a valid float")
}

/// `-ERR syntax error`.
pub fn syntax() -> Reply {
    ferry_resp::command::syntax_error()
}

/// An integer exactly as Redis's `string2ll` takes it: an optional `-`, digits, no
/// leading zeros, no spaces, within `i64`.
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    let digits = arg.strip_prefix(b"-").unwrap_or(arg);
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// An integer argument.
pub fn int(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(not_integer)
}

/// A count above 0 (numkeys, COUNT), with Redis's one error for anything else (a
/// non-integer too): `ERR <what> should be greater than 0`.
pub fn positive(arg: &[u8], what: &str) -> Result<usize, Reply> {
    match parse_i64(arg) {
        Some(n) if n > 0 => Ok(n as usize),
        _ => Err(Reply::err(format!("{what} should be greater than 0"))),
    }
}

/// A LIMIT at least 0, with Redis's one error for anything else.
pub fn limit(arg: &[u8]) -> Result<usize, Reply> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n as usize),
        _ => Err(Reply::err("LIMIT can't be negative")),
    }
}

/// An integer argument that must not be negative, with the error Redis gives for it.
pub fn non_negative(arg: &[u8], message: &str) -> Result<u64, Reply> {
    match int(arg)? {
        n if n < 0 => Err(Reply::err(message)),
        n => Ok(n as u64),
    }
}

/// A float as Redis's `strtold` takes it: no spaces, `inf` and `-inf` allowed, NaN not.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(arg).ok()?;
    if text.is_empty() || text.trim() != text {
        return None;
    }
    let value: f64 = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        lower if lower.contains("inf") || lower.contains("nan") => return None,
        _ => text.parse().ok()?,
    };
    (!value.is_nan()).then_some(value)
}

/// A float argument.
pub fn float(arg: &[u8]) -> Result<f64, Reply> {
    parse_f64(arg).ok_or_else(not_float)
}

/// A float as Redis writes it in a reply (`ferry_resp::reply::format_double`).
pub fn format_f64(value: f64) -> Bytes {
    Bytes::from(ferry_resp::reply::format_double(value))
}

/// Most digits after the point in [`format_human`]: Redis's `%.17Lf`.
const HUMAN_DECIMALS: usize = 17;

/// A float as INCRBYFLOAT and HINCRBYFLOAT store and answer it (Redis's `LD_STR_HUMAN`):
/// fixed point, never an exponent, at most 17 digits after the point, no trailing zeros,
/// and `0` for a zero of either sign. Redis computes in long double; the shortest text
/// that reads back as the f64 is what a long double's 17 rounded decimals show for the
/// sums clients make (`10.5 + 0.1` is `10.6` in both).
pub fn format_human(value: f64) -> Bytes {
    let shortest = format!("{value}");
    let decimals = shortest.split_once('.').map_or(0, |(_, fraction)| fraction.len());
    let mut text = if decimals > HUMAN_DECIMALS {
        let rounded = format!("{value:.HUMAN_DECIMALS$}");
        rounded.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        shortest
    };
    if text == "-0" {
        text = "0".into();
    }
    Bytes::from(text)
}

/// A float reply (RESP2's bulk string).
pub fn float_reply(value: f64) -> Reply {
    Reply::Bulk(format_f64(value))
}

/// Whether `arg` is the option `name` (any case).
pub fn is(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}

/// A bulk reply of bytes held in a value (copied out: the value stays where it is).
pub fn bulk(bytes: &[u8]) -> Reply {
    Reply::Bulk(owned(bytes))
}

/// Bytes held in a value, copied out.
pub fn owned(bytes: &[u8]) -> Bytes {
    Bytes::copy_from_slice(bytes)
}

/// Bulk replies of byte strings held in a value.
pub fn bulks<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Reply {
    Reply::Array(items.into_iter().map(bulk).collect())
}

/// Resolves Redis's `start`/`end` (negative: from the end) over `len` items to an
/// inclusive range, or `None` if it selects nothing.
pub fn index_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    (start <= end && start < len && end >= 0).then_some((start as usize, end as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_floats_are_fixed_point_with_at_most_17_decimals() {
        let cases: [(f64, &str); 8] = [
            (10.5 + 0.1, "10.6"),
            (0.0000005, "0.0000005"),
            (17179869185.5, "17179869185.5"),
            (3.0, "3"),
            (-0.0, "0"),
            (1e-20, "0"),
            (-1.25e-18, "0"),
            (1e21, "1000000000000000000000"),
        ];
        for (value, text) in cases {
            assert_eq!(format_human(value), text, "{value:e}");
        }
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(parse_i64(b"42"), Some(42));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [&b""[..], b"+1", b" 1", b"01", b"1.0", b"9223372036854775808", b"-"] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn floats_take_infinities_and_refuse_nan() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        for bad in [&b"nan"[..], b"", b" 1", b"abc", b"1,5"] {
            assert_eq!(parse_f64(bad), None, "{bad:?}");
        }
        assert_eq!(&format_f64(3.0)[..], b"3");
        assert_eq!(&format_f64(0.1)[..], b"0.1");
        assert_eq!(&format_f64(f64::NEG_INFINITY)[..], b"-inf");
    }

    #[test]
    fn index_ranges_follow_redis() {
        assert_eq!(index_range(0, -1, 3), Some((0, 2)));
        assert_eq!(index_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(index_range(2, 1, 3), None);
        assert_eq!(index_range(5, 10, 3), None);
        assert_eq!(index_range(0, -1, 0), None);
        assert_eq!(index_range(-1, -1, 3), Some((2, 2)));
    }
}
