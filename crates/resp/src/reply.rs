//! Replies, encoded for the protocol version the connection speaks (RESP2 by default,
//! RESP3 after `HELLO 3`).

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol version of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2: maps are flat arrays, nulls are `$-1`.
    Resp2,
    /// RESP3: typed maps, nulls, doubles and pairs.
    Resp3,
    /// ferry's own form between its processes (a storage function's result): RESP3, plus
    /// a type of its own (`&`) for [`Reply::Pairs`], so a reply decoded in another process
    /// encodes again as it would have, in either protocol.
    Ferry,
}

/// One reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`-style status.
    Simple(String),
    /// `-ERR …`-style error; the text must start with its code (`ERR`, `WRONGTYPE`, …).
    Error(String),
    /// `:N`.
    Integer(i64),
    /// A bulk string.
    Bulk(Bytes),
    /// The null reply (`$-1` in RESP2, `_` in RESP3).
    Null,
    /// The null array (`*-1` in RESP2, `_` in RESP3): what Redis answers where an array
    /// would be and there is none (a blocking pop that timed out, EXEC after a changed
    /// WATCH, LPOP with a count on a missing key).
    NullArray,
    /// An array.
    Array(Vec<Reply>),
    /// A map (a flat array of keys and values in RESP2).
    Map(Vec<(Reply, Reply)>),
    /// A double (a bulk string of its text in RESP2): a sorted set's score.
    Double(f64),
    /// Pairs that RESP2 gives flat and RESP3 as an array of two-element arrays (ZRANGE
    /// WITHSCORES, HRANDFIELD WITHVALUES).
    Pairs(Vec<(Reply, Reply)>),
}

/// A double as Redis writes it: the shortest text that reads back the same, `inf` and
/// `-inf` for the infinities.
pub fn format_double(value: f64) -> String {
    if value == f64::INFINITY {
        "inf".into()
    } else if value == f64::NEG_INFINITY {
        "-inf".into()
    } else if value.is_nan() {
        "nan".into()
    } else if value == 0.0 {
        // Redis prints -0 as "-0" (its %.17g); the shortest form agrees.
        if value.is_sign_negative() { "-0" } else { "0" }.into()
    } else {
        shortest(value)
    }
}

/// The shortest digits that read back as `value`, laid out as Redis 7.2's `fpconv_dtoa`
/// lays them out: an integer up to 7 zeros past its digits, a decimal down to 7 places
/// (or an exponent below 4), scientific notation (`1.7976931348623157e+308`) otherwise.
fn shortest(value: f64) -> String {
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let ndigits = digits.len() as i32;
    let k = exponent - (ndigits - 1);
    let exp = (k + ndigits - 1).abs();
    let mut out = String::with_capacity(24);
    if value.is_sign_negative() {
        out.push('-');
    }
    if k >= 0 && exp < ndigits + 7 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', k as usize));
    } else if k < 0 && (k > -7 || exp < 4) {
        let offset = ndigits + k;
        if offset <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-offset) as usize));
            out.push_str(&digits);
        } else {
            out.push_str(&digits[..offset as usize]);
            out.push('.');
            out.push_str(&digits[offset as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if ndigits > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if k + ndigits - 1 < 0 { '-' } else { '+' });
        out.push_str(&exp.to_string());
    }
    out
}

/// Redis's words for a command refused past `maxmemory`.
pub const OUT_OF_MEMORY: &str = "OOM command not allowed when used memory > 'maxmemory'";

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// `-ERR message`.
    pub fn err(message: impl std::fmt::Display) -> Reply {
        Reply::Error(format!("ERR {message}"))
    }

    /// Redis's out-of-memory refusal (`-OOM …`), which clients raise as their
    /// out-of-memory error.
    pub fn out_of_memory() -> Reply {
        Reply::Error(format!("{OUT_OF_MEMORY}."))
    }

    /// A bulk string of text.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(Bytes::from(text.into()))
    }

    /// Appends the encoded reply to `out`.
    pub fn encode(&self, protocol: Protocol, out: &mut BytesMut) {
        match self {
            Reply::Simple(text) => line(out, b'+', text.as_bytes()),
            Reply::Error(text) => line(out, b'-', text.as_bytes()),
            Reply::Integer(n) => line(out, b':', n.to_string().as_bytes()),
            Reply::Bulk(bytes) => {
                line(out, b'$', bytes.len().to_string().as_bytes());
                out.put_slice(bytes);
                out.put_slice(b"\r\n");
            }
            Reply::Null => match protocol {
                Protocol::Resp2 => out.put_slice(b"$-1\r\n"),
                Protocol::Resp3 | Protocol::Ferry => out.put_slice(b"_\r\n"),
            },
            Reply::NullArray => match protocol {
                Protocol::Resp2 | Protocol::Ferry => out.put_slice(b"*-1\r\n"),
                Protocol::Resp3 => out.put_slice(b"_\r\n"),
            },
            Reply::Double(value) => match protocol {
                Protocol::Resp2 => Reply::Bulk(Bytes::from(format_double(*value))).encode(protocol, out),
                Protocol::Resp3 | Protocol::Ferry => line(out, b',', format_double(*value).as_bytes()),
            },
            Reply::Pairs(pairs) => {
                match protocol {
                    Protocol::Resp2 => line(out, b'*', (pairs.len() * 2).to_string().as_bytes()),
                    Protocol::Resp3 => line(out, b'*', pairs.len().to_string().as_bytes()),
                    Protocol::Ferry => line(out, b'&', pairs.len().to_string().as_bytes()),
                }
                for (first, second) in pairs {
                    if protocol == Protocol::Resp3 {
                        out.put_slice(b"*2\r\n");
                    }
                    first.encode(protocol, out);
                    second.encode(protocol, out);
                }
            }
            Reply::Array(items) => {
                line(out, b'*', items.len().to_string().as_bytes());
                for item in items {
                    item.encode(protocol, out);
                }
            }
            Reply::Map(pairs) => {
                match protocol {
                    Protocol::Resp2 => line(out, b'*', (pairs.len() * 2).to_string().as_bytes()),
                    Protocol::Resp3 | Protocol::Ferry => line(out, b'%', pairs.len().to_string().as_bytes()),
                }
                for (key, value) in pairs {
                    key.encode(protocol, out);
                    value.encode(protocol, out);
                }
            }
        }
    }
}

/// Deepest nesting [`Reply::decode`] follows: bounds its recursion on hostile input.
pub const MAX_REPLY_DEPTH: usize = 32;

/// Why bytes are not one encoded reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed reply: {0}")]
pub struct DecodeError(pub &'static str);

impl Reply {
    /// Decodes one whole reply as [`Reply::encode`] wrote it (any protocol; losslessly for
    /// [`Protocol::Ferry`]), so a reply computed in one process (a storage function's
    /// result) can be sent on by another.
    pub fn decode(bytes: &Bytes) -> Result<Reply, DecodeError> {
        let mut at = 0;
        let reply = decode_at(bytes, &mut at, 0)?;
        if at != bytes.len() {
            return Err(DecodeError("trailing bytes"));
        }
        Ok(reply)
    }
}

fn decode_line<'a>(bytes: &'a [u8], at: &mut usize) -> Result<&'a [u8], DecodeError> {
    let rest = &bytes[*at..];
    let end = rest
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(DecodeError("unterminated line"))?;
    *at += end + 2;
    Ok(&rest[..end])
}

fn decode_number(line: &[u8]) -> Result<i64, DecodeError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(DecodeError("bad number"))
}

fn decode_count(line: &[u8], remaining: usize) -> Result<usize, DecodeError> {
    let count = decode_number(line)?;
    // Every element takes at least 3 bytes, so a larger count is a lie.
    usize::try_from(count)
        .ok()
        .filter(|&count| count <= remaining / 3)
        .ok_or(DecodeError("bad count"))
}

fn decode_at(bytes: &Bytes, at: &mut usize, depth: usize) -> Result<Reply, DecodeError> {
    if depth > MAX_REPLY_DEPTH {
        return Err(DecodeError("nested too deeply"));
    }
    let kind = *bytes.get(*at).ok_or(DecodeError("truncated"))?;
    *at += 1;
    let line = decode_line(bytes, at)?;
    let text = || String::from_utf8_lossy(line).into_owned();
    Ok(match kind {
        b'+' => Reply::Simple(text()),
        b'-' => Reply::Error(text()),
        b':' => Reply::Integer(decode_number(line)?),
        b'_' => Reply::Null,
        b'$' if line == b"-1" => Reply::Null,
        b'*' if line == b"-1" => Reply::NullArray,
        b'$' => {
            let len = usize::try_from(decode_number(line)?).map_err(|_| DecodeError("bad length"))?;
            let end = at.checked_add(len).ok_or(DecodeError("bad length"))?;
            if bytes.len() < end + 2 || &bytes[end..end + 2] != b"\r\n" {
                return Err(DecodeError("truncated bulk string"));
            }
            let value = bytes.slice(*at..end);
            *at = end + 2;
            Reply::Bulk(value)
        }
        b'*' => {
            let count = decode_count(line, bytes.len() - *at)?;
            let mut items = Vec::with_capacity(count);
            for _ in 0..count {
                items.push(decode_at(bytes, at, depth + 1)?);
            }
            Reply::Array(items)
        }
        b'%' | b'&' => {
            let count = decode_count(line, (bytes.len() - *at) / 2)?;
            let mut pairs = Vec::with_capacity(count);
            for _ in 0..count {
                pairs.push((decode_at(bytes, at, depth + 1)?, decode_at(bytes, at, depth + 1)?));
            }
            if kind == b'%' {
                Reply::Map(pairs)
            } else {
                Reply::Pairs(pairs)
            }
        }
        b',' => Reply::Double(match line {
            b"inf" => f64::INFINITY,
            b"-inf" => f64::NEG_INFINITY,
            _ => std::str::from_utf8(line)
                .ok()
                .and_then(|text| text.parse().ok())
                .ok_or(DecodeError("bad double"))?,
        }),
        _ => return Err(DecodeError("unknown reply type")),
    })
}

/// `TYPE text CRLF`, with CR and LF in the text replaced (a status line cannot hold them).
fn line(out: &mut BytesMut, kind: u8, text: &[u8]) {
    out.put_u8(kind);
    for &byte in text {
        out.put_u8(if byte == b'\r' || byte == b'\n' { b' ' } else { byte });
    }
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: &Reply, protocol: Protocol) -> Vec<u8> {
        let mut out = BytesMut::new();
        reply.encode(protocol, &mut out);
        out.to_vec()
    }

    #[test]
    fn replies_encode_per_protocol() {
        assert_eq!(encoded(&Reply::ok(), Protocol::Resp2), b"+OK\r\n");
        assert_eq!(
            encoded(&Reply::err("bad\r\nthing"), Protocol::Resp2),
            b"-ERR bad  thing\r\n"
        );
        assert_eq!(encoded(&Reply::Integer(-3), Protocol::Resp2), b":-3\r\n");
        assert_eq!(encoded(&Reply::text("hi"), Protocol::Resp2), b"$2\r\nhi\r\n");
        assert_eq!(encoded(&Reply::Null, Protocol::Resp2), b"$-1\r\n");
        assert_eq!(encoded(&Reply::Null, Protocol::Resp3), b"_\r\n");
        assert_eq!(encoded(&Reply::NullArray, Protocol::Resp2), b"*-1\r\n");
        assert_eq!(encoded(&Reply::NullArray, Protocol::Resp3), b"_\r\n");
        let map = Reply::Map(vec![(Reply::text("a"), Reply::Integer(1))]);
        assert_eq!(encoded(&map, Protocol::Resp2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(encoded(&map, Protocol::Resp3), b"%1\r\n$1\r\na\r\n:1\r\n");
        let array = Reply::Array(vec![Reply::Null, Reply::text("x")]);
        assert_eq!(encoded(&array, Protocol::Resp2), b"*2\r\n$-1\r\n$1\r\nx\r\n");
    }

    #[test]
    fn doubles_and_pairs_take_each_protocols_shape() {
        let pairs = Reply::Pairs(vec![
            (Reply::text("a"), Reply::Double(1.5)),
            (Reply::text("b"), Reply::Double(f64::NEG_INFINITY)),
        ]);
        assert_eq!(
            encoded(&pairs, Protocol::Resp2),
            b"*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$4\r\n-inf\r\n"
        );
        assert_eq!(
            encoded(&pairs, Protocol::Resp3),
            b"*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,-inf\r\n"
        );
        assert_eq!(encoded(&Reply::Double(3.0), Protocol::Resp3), b",3\r\n");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(-0.0), "-0");
    }

    #[test]
    fn doubles_are_laid_out_as_redis_lays_them_out() {
        for (value, text) in [
            (f64::MAX, "1.7976931348623157e+308"),
            (1e21, "1e+21"),
            (123456789.0, "123456789"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (3.0e10, "3e+10"),
            (1234567e3, "1234567000"),
            (1e17, "1e+17"),
            (0.3, "0.3"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(format_double(value), text, "{value:e}");
            assert_eq!(format_double(value).parse::<f64>().unwrap(), value);
        }
    }

    #[test]
    fn replies_decode_as_encoded_and_garbage_is_refused() {
        let nested = Reply::Array(vec![
            Reply::ok(),
            Reply::Error("ERR no".into()),
            Reply::Integer(-7),
            Reply::Bulk(Bytes::from_static(b"a\r\nb")),
            Reply::Null,
            Reply::Map(vec![(Reply::text("k"), Reply::Array(vec![]))]),
            Reply::Double(-2.5),
            Reply::Double(f64::INFINITY),
            Reply::Pairs(vec![(Reply::text("m"), Reply::Double(1.0))]),
        ]);
        let bytes = Bytes::from(encoded(&nested, Protocol::Ferry));
        assert_eq!(Reply::decode(&bytes), Ok(nested));
        for cut in 0..bytes.len() {
            assert!(Reply::decode(&bytes.slice(..cut)).is_err(), "prefix of {cut} bytes");
        }
        for garbage in [
            &b"*999999999\r\n"[..],
            b"$5\r\nab\r\n",
            b"?x\r\n",
            b":1\r\n:2\r\n",
            b"$-5\r\n",
        ] {
            assert!(Reply::decode(&Bytes::copy_from_slice(garbage)).is_err(), "{garbage:?}");
        }
        let deep = "*1\r\n".repeat(MAX_REPLY_DEPTH + 2) + ":1\r\n";
        assert!(Reply::decode(&Bytes::from(deep)).is_err());
    }
}
