//! Replies decoded from their bytes, in any protocol (losslessly in ferry's own): one whole
//! reply ([`Reply::decode`], a storage function's result passed between processes), or the
//! first reply at the front of a stream ([`Reply::decode_prefix`], a client reading its
//! server's answers as they arrive). Every length and count is bounded, so hostile bytes
//! neither allocate without limit nor recurse without limit.

use bytes::Bytes;

use crate::reply::Reply;

/// Deepest nesting decoding follows: bounds its recursion on hostile input.
pub const MAX_REPLY_DEPTH: usize = 32;

/// Longest bulk string decoded: Redis's own `proto-max-bulk-len` default (512 MiB).
pub const MAX_BULK_BYTES: usize = 512 << 20;

/// Most elements one array, map or set of pairs may announce.
pub const MAX_ELEMENTS: usize = 1 << 24;

/// Why bytes are not one encoded reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed reply: {0}")]
pub struct DecodeError(pub &'static str);

/// Why decoding stopped: the bytes end too soon (a stream may bring the rest), or they
/// are not a reply.
enum Stop {
    Short,
    Bad(&'static str),
}

impl From<DecodeError> for Stop {
    fn from(err: DecodeError) -> Stop {
        Stop::Bad(err.0)
    }
}

impl Reply {
    /// Decodes one whole reply as [`Reply::encode`] wrote it (any protocol; losslessly for
    /// [`crate::Protocol::Ferry`]), so a reply computed in one process (a storage
    /// function's result) can be sent on by another.
    pub fn decode(bytes: &Bytes) -> Result<Reply, DecodeError> {
        let mut at = 0;
        let reply = decode_at(bytes, &mut at, 0).map_err(|stop| match stop {
            Stop::Short => DecodeError("truncated"),
            Stop::Bad(why) => DecodeError(why),
        })?;
        if at != bytes.len() {
            return Err(DecodeError("trailing bytes"));
        }
        Ok(reply)
    }

    /// Decodes the first reply at the front of `bytes` and says how many bytes it took;
    /// `Ok(None)` when the bytes end before the reply does.
    pub fn decode_prefix(bytes: &Bytes) -> Result<Option<(Reply, usize)>, DecodeError> {
        let mut at = 0;
        match decode_at(bytes, &mut at, 0) {
            Ok(reply) => Ok(Some((reply, at))),
            Err(Stop::Short) => Ok(None),
            Err(Stop::Bad(why)) => Err(DecodeError(why)),
        }
    }
}

fn decode_line<'a>(bytes: &'a [u8], at: &mut usize) -> Result<&'a [u8], Stop> {
    let rest = &bytes[*at..];
    let end = rest.windows(2).position(|w| w == b"\r\n").ok_or(Stop::Short)?;
    *at += end + 2;
    Ok(&rest[..end])
}

fn decode_number(line: &[u8]) -> Result<i64, DecodeError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(DecodeError("bad number"))
}

/// An announced count of elements, each `per_element` replies of at least 3 bytes: more
/// than the bytes left can hold means the rest is still to come.
fn decode_count(line: &[u8], remaining: usize, per_element: usize) -> Result<usize, Stop> {
    let count = usize::try_from(decode_number(line)?)
        .ok()
        .filter(|&count| count <= MAX_ELEMENTS)
        .ok_or(Stop::Bad("bad count"))?;
    if count > remaining / (3 * per_element) {
        return Err(Stop::Short);
    }
    Ok(count)
}

fn decode_at(bytes: &Bytes, at: &mut usize, depth: usize) -> Result<Reply, Stop> {
    if depth > MAX_REPLY_DEPTH {
        return Err(Stop::Bad("nested too deeply"));
    }
    let kind = *bytes.get(*at).ok_or(Stop::Short)?;
    if !b"+-:_$*%&,".contains(&kind) {
        return Err(Stop::Bad("unknown reply type"));
    }
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
            let len = usize::try_from(decode_number(line)?)
                .ok()
                .filter(|&len| len <= MAX_BULK_BYTES)
                .ok_or(Stop::Bad("bad length"))?;
            let end = *at + len;
            if bytes.len() < end + 2 {
                return Err(Stop::Short);
            }
            if &bytes[end..end + 2] != b"\r\n" {
                return Err(Stop::Bad("bulk string without its CRLF"));
            }
            let value = bytes.slice(*at..end);
            *at = end + 2;
            Reply::Bulk(value)
        }
        b'*' => {
            let count = decode_count(line, bytes.len() - *at, 1)?;
            let mut items = Vec::with_capacity(count);
            for _ in 0..count {
                items.push(decode_at(bytes, at, depth + 1)?);
            }
            Reply::Array(items)
        }
        b'%' | b'&' => {
            let count = decode_count(line, bytes.len() - *at, 2)?;
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
        _ => Reply::Double(match line {
            b"inf" => f64::INFINITY,
            b"-inf" => f64::NEG_INFINITY,
            _ => std::str::from_utf8(line)
                .ok()
                .and_then(|text| text.parse().ok())
                .ok_or(Stop::Bad("bad double"))?,
        }),
    })
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::*;
    use crate::reply::Protocol;

    fn encoded(reply: &Reply, protocol: Protocol) -> Vec<u8> {
        let mut out = BytesMut::new();
        reply.encode(protocol, &mut out);
        out.to_vec()
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

    #[test]
    fn a_stream_gives_up_its_replies_one_by_one_and_waits_for_the_rest() {
        let first = Reply::Array(vec![Reply::text("a"), Reply::Integer(2), Reply::NullArray]);
        let second = Reply::Bulk(Bytes::from_static(b"x\r\ny"));
        let mut stream = encoded(&first, Protocol::Resp2);
        let first_len = stream.len();
        stream.extend(encoded(&second, Protocol::Resp2));
        let stream = Bytes::from(stream);
        assert_eq!(Reply::decode_prefix(&stream), Ok(Some((first, first_len))));
        assert_eq!(
            Reply::decode_prefix(&stream.slice(first_len..)),
            Ok(Some((second, stream.len() - first_len)))
        );
        for cut in 0..first_len {
            assert_eq!(
                Reply::decode_prefix(&stream.slice(..cut)),
                Ok(None),
                "prefix of {cut} bytes"
            );
        }
        for garbage in [&b"?x\r\n"[..], b"$5\r\nabcdefg", b"*99999999999\r\n", b":x\r\n"] {
            assert!(
                Reply::decode_prefix(&Bytes::copy_from_slice(garbage)).is_err(),
                "{garbage:?}"
            );
        }
    }
}
