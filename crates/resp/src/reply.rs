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
}
