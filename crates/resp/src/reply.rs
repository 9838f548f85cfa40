//! Replies, encoded for the protocol version the connection speaks (RESP2 by default,
//! RESP3 after `HELLO 3`).

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol version of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2: maps are flat arrays, nulls are `$-1`.
    Resp2,
    /// RESP3: typed maps and nulls.
    Resp3,
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
    /// An array.
    Array(Vec<Reply>),
    /// A map (a flat array of keys and values in RESP2).
    Map(Vec<(Reply, Reply)>),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// `-ERR message`.
    pub fn err(message: impl std::fmt::Display) -> Reply {
        Reply::Error(format!("ERR {message}"))
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
                Protocol::Resp3 => out.put_slice(b"_\r\n"),
            },
            Reply::Array(items) => {
                line(out, b'*', items.len().to_string().as_bytes());
                for item in items {
                    item.encode(protocol, out);
                }
            }
            Reply::Map(pairs) => {
                match protocol {
                    Protocol::Resp2 => line(out, b'*', (pairs.len() * 2).to_string().as_bytes()),
                    Protocol::Resp3 => line(out, b'%', pairs.len().to_string().as_bytes()),
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
        let map = Reply::Map(vec![(Reply::text("a"), Reply::Integer(1))]);
        assert_eq!(encoded(&map, Protocol::Resp2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(encoded(&map, Protocol::Resp3), b"%1\r\n$1\r\na\r\n:1\r\n");
        let array = Reply::Array(vec![Reply::Null, Reply::text("x")]);
        assert_eq!(encoded(&array, Protocol::Resp2), b"*2\r\n$-1\r\n$1\r\nx\r\n");
    }
}
