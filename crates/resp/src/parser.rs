//! Commands from RESP clients: arrays of bulk strings (what every client library,
//! redis-cli and redis-benchmark send) or inline commands (a line of words, for telnet).
//!
//! The parser is incremental: it consumes whole elements as they arrive and keeps the
//! arguments of a command in progress, so a large pipelined command is read once, not
//! re-scanned per chunk. Every size is bounded before anything is allocated for it.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

/// Most arguments in one command (Redis's own limit is 1,048,576).
pub const MAX_ARGS: usize = 1 << 20;
/// Largest bulk string (an argument), bytes: Redis's `proto-max-bulk-len` default.
pub const MAX_BULK_BYTES: usize = 512 * 1024 * 1024;
/// Largest command, all arguments together, bytes (Redis's `client-query-buffer-limit`).
pub const MAX_COMMAND_BYTES: usize = 1024 * 1024 * 1024;
/// Most arguments of a command from a connection that has not signed in (Redis's limit
/// for an unauthenticated client): AUTH and HELLO need no more.
pub const MAX_ARGS_BEFORE_SIGN_IN: usize = 10;
/// Largest argument from a connection that has not signed in (Redis's): a stranger must
/// not make the process reserve a large value's memory.
pub const MAX_BULK_BYTES_BEFORE_SIGN_IN: usize = 16 * 1024;
/// Longest header or inline line, bytes.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Why the input is not RESP; the connection cannot continue after one.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// A type byte other than `*` and `$` where a command or argument must start.
    #[error("Protocol error: expected '{expected}', got '{got}'")]
    UnexpectedByte {
        /// What was expected.
        expected: char,
        /// What came (as a character, escaped if not printable).
        got: String,
    },
    /// A length that is not a number, or is negative where that is not allowed.
    #[error("Protocol error: invalid {what} length")]
    BadLength {
        /// Which length.
        what: &'static str,
    },
    /// Past one of the limits above.
    #[error("Protocol error: {what} exceeds {limit}")]
    TooLarge {
        /// What.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// A bulk string not followed by CRLF.
    #[error("Protocol error: bulk string not terminated by CRLF")]
    MissingCrlf,
    /// An inline command with an unbalanced quote.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
}

/// A command in progress: its arguments so far.
#[derive(Debug, Default)]
struct Pending {
    remaining: usize,
    args: Vec<Bytes>,
    bytes: usize,
}

/// The incremental parser of one connection.
#[derive(Debug, Default)]
pub struct Parser {
    pending: Option<Pending>,
    /// The connection has not signed in: the small limits apply.
    before_sign_in: bool,
}

/// The position of the first CRLF-terminated line in `buf`, or an error if it runs past
/// [`MAX_LINE_BYTES`] without one.
fn line_end(buf: &[u8]) -> Result<Option<usize>, ParseError> {
    match buf.windows(2).position(|w| w == b"\r\n") {
        Some(end) if end <= MAX_LINE_BYTES => Ok(Some(end)),
        Some(_) => Err(ParseError::TooLarge {
            what: "line",
            limit: MAX_LINE_BYTES,
        }),
        None if buf.len() > MAX_LINE_BYTES + 1 => Err(ParseError::TooLarge {
            what: "line",
            limit: MAX_LINE_BYTES,
        }),
        None => Ok(None),
    }
}

fn parse_len(digits: &[u8], what: &'static str) -> Result<i64, ParseError> {
    let text = std::str::from_utf8(digits).map_err(|_| ParseError::BadLength { what })?;
    text.parse::<i64>().map_err(|_| ParseError::BadLength { what })
}

fn shown(byte: u8) -> String {
    if byte.is_ascii_graphic() {
        (byte as char).to_string()
    } else {
        format!("\\x{byte:02x}")
    }
}

impl Parser {
    /// A parser at the start of a stream of a signed-in connection.
    pub fn new() -> Parser {
        Parser::default()
    }

    /// A parser at the start of a stream of a connection that has not signed in yet:
    /// commands of at most [`MAX_ARGS_BEFORE_SIGN_IN`] arguments of at most
    /// [`MAX_BULK_BYTES_BEFORE_SIGN_IN`] bytes, until [`Parser::signed_in`].
    pub fn before_sign_in() -> Parser {
        Parser {
            pending: None,
            before_sign_in: true,
        }
    }

    /// The connection signed in: the full limits apply from the next command.
    pub fn signed_in(&mut self) {
        self.before_sign_in = false;
    }

    fn max_args(&self) -> usize {
        if self.before_sign_in {
            MAX_ARGS_BEFORE_SIGN_IN
        } else {
            MAX_ARGS
        }
    }

    /// The next whole command in `buf` (consumed), `None` if more input is needed. An
    /// empty command (`*0`, or a blank inline line) is skipped.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ParseError> {
        loop {
            let Some(pending) = self.pending.as_mut() else {
                let Some(&first) = buf.first() else { return Ok(None) };
                if first != b'*' {
                    match parse_inline(buf)? {
                        Some(args) if args.is_empty() => continue,
                        other => return Ok(other),
                    }
                }
                let Some(end) = line_end(buf)? else { return Ok(None) };
                let count = parse_len(&buf[1..end], "multibulk")?;
                buf.advance(end + 2);
                if count <= 0 {
                    // `*0` and the null array `*-1` carry no command.
                    continue;
                }
                let count = count as usize;
                if count > self.max_args() {
                    return Err(ParseError::TooLarge {
                        what: "multibulk length",
                        limit: self.max_args(),
                    });
                }
                self.pending = Some(Pending {
                    remaining: count,
                    // Reserved as arguments arrive, never from the claimed count alone.
                    args: Vec::with_capacity(count.min(64)),
                    bytes: 0,
                });
                continue;
            };
            let max_bulk = if self.before_sign_in {
                MAX_BULK_BYTES_BEFORE_SIGN_IN
            } else {
                MAX_BULK_BYTES
            };
            while pending.remaining > 0 {
                let Some(&first) = buf.first() else { return Ok(None) };
                if first != b'$' {
                    return Err(ParseError::UnexpectedByte {
                        expected: '$',
                        got: shown(first),
                    });
                }
                let Some(end) = line_end(buf)? else { return Ok(None) };
                let len = parse_len(&buf[1..end], "bulk")?;
                if len < 0 {
                    return Err(ParseError::BadLength { what: "bulk" });
                }
                let len = len as usize;
                if len > max_bulk {
                    return Err(ParseError::TooLarge {
                        what: "bulk length",
                        limit: max_bulk,
                    });
                }
                if pending.bytes + len > MAX_COMMAND_BYTES {
                    return Err(ParseError::TooLarge {
                        what: "command",
                        limit: MAX_COMMAND_BYTES,
                    });
                }
                let whole = end + 2 + len + 2;
                if buf.len() < whole {
                    // Room for the rest, once: the length is bounded above.
                    buf.reserve(whole - buf.len());
                    return Ok(None);
                }
                if &buf[end + 2 + len..whole] != b"\r\n" {
                    return Err(ParseError::MissingCrlf);
                }
                buf.advance(end + 2);
                let arg = buf.split_to(len).freeze();
                buf.advance(2);
                pending.bytes += len;
                pending.args.push(arg);
                pending.remaining -= 1;
            }
            let done = self.pending.take().expect("a command was in progress");
            return Ok(Some(done.args));
        }
    }
}

/// An inline command: one line of words separated by spaces, with `"…"` and `'…'` quoting
/// as redis-cli's telnet mode accepts (escapes inside double quotes: `\"`, `\\`, `\n`,
/// `\r`, `\t`, `\xHH`).
fn parse_inline(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ParseError> {
    let end = match buf.iter().position(|&b| b == b'\n') {
        Some(end) if end <= MAX_LINE_BYTES => end,
        Some(_) => {
            return Err(ParseError::TooLarge {
                what: "inline command",
                limit: MAX_LINE_BYTES,
            })
        }
        None if buf.len() > MAX_LINE_BYTES => {
            return Err(ParseError::TooLarge {
                what: "inline command",
                limit: MAX_LINE_BYTES,
            })
        }
        None => return Ok(None),
    };
    let line = buf.split_to(end + 1);
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    split_words(line).map(Some)
}

fn split_words(line: &[u8]) -> Result<Vec<Bytes>, ParseError> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            break;
        }
        let mut word = Vec::new();
        match line[i] {
            quote @ (b'"' | b'\'') => {
                i += 1;
                loop {
                    let Some(&byte) = line.get(i) else {
                        return Err(ParseError::UnbalancedQuotes);
                    };
                    i += 1;
                    if byte == quote {
                        break;
                    }
                    if byte == b'\\' && quote == b'"' {
                        let Some(&next) = line.get(i) else {
                            return Err(ParseError::UnbalancedQuotes);
                        };
                        i += 1;
                        word.push(match next {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'x' if i + 1 < line.len() => {
                                let hex = std::str::from_utf8(&line[i..i + 2]).ok();
                                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                                    Some(value) => {
                                        i += 2;
                                        value
                                    }
                                    None => b'x',
                                }
                            }
                            other => other,
                        });
                    } else {
                        word.push(byte);
                    }
                }
                // A closing quote must end the word.
                if line.get(i).is_some_and(|b| !b.is_ascii_whitespace()) {
                    return Err(ParseError::UnbalancedQuotes);
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    word.push(line[i]);
                    i += 1;
                }
            }
        }
        words.push(Bytes::from(word));
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ParseError> {
        let mut parser = Parser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(command) = parser.next(&mut buf)? {
            out.push(command);
        }
        Ok(out)
    }

    fn words(command: &[&str]) -> Vec<Bytes> {
        command.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn arrays_and_inline_commands_parse_pipelined() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*0\r\nPING\r\nSET k \"a b\\x41\" 'c'\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n";
        assert_eq!(
            all(input).unwrap(),
            vec![
                words(&["GET", "k"]),
                words(&["PING"]),
                words(&["SET", "k", "a bA", "c"]),
                words(&["SET", "k", ""]),
            ]
        );
    }

    #[test]
    fn a_command_split_anywhere_parses_the_same() {
        let input: &[u8] = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$5\r\nworld\r\nPING\r\n";
        for split in 0..input.len() {
            let mut parser = Parser::new();
            let mut buf = BytesMut::from(&input[..split]);
            let mut got = Vec::new();
            while let Some(command) = parser.next(&mut buf).unwrap() {
                got.push(command);
            }
            buf.extend_from_slice(&input[split..]);
            while let Some(command) = parser.next(&mut buf).unwrap() {
                got.push(command);
            }
            assert_eq!(
                got,
                vec![words(&["SET", "hello", "world"]), words(&["PING"])],
                "split at {split}"
            );
        }
    }

    #[test]
    fn hostile_lengths_are_refused_before_allocating() {
        assert!(matches!(all(b"*99999999999\r\n"), Err(ParseError::TooLarge { .. })));
        assert!(matches!(all(b"*1\r\n$999999999\r\n"), Err(ParseError::TooLarge { .. })));
        assert!(matches!(all(b"*1\r\n$-1\r\n"), Err(ParseError::BadLength { .. })));
        assert!(matches!(all(b"*x\r\n"), Err(ParseError::BadLength { .. })));
        assert!(matches!(all(b"*1\r\n+OK\r\n"), Err(ParseError::UnexpectedByte { .. })));
        assert!(matches!(all(b"*1\r\n$2\r\nabcd\r\n"), Err(ParseError::MissingCrlf)));
        assert!(matches!(all(b"SET \"open\r\n"), Err(ParseError::UnbalancedQuotes)));
        let long = vec![b'a'; MAX_LINE_BYTES + 10];
        assert!(matches!(all(&long), Err(ParseError::TooLarge { .. })));
        // A header without its end is simply incomplete.
        assert_eq!(all(b"*2\r\n$3\r\nGE").unwrap(), Vec::<Vec<Bytes>>::new());
    }
}
