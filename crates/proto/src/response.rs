//! The storage node's response and its body encoding (docs/PROTOCOL.md §Bodies).

use bytes::{BufMut, Bytes, BytesMut};

use crate::costs::InvokeCosts;
use crate::frame::{FrameKind, Header, Opcode, Status};
use crate::message::*;
use crate::tenant::TenantId;
use crate::wire::{put_bytes16, put_bytes32, put_count, EncodeError, Reader};

/// What the node tells a client that said hello.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloInfo {
    /// Worker threads (cores) the storage node runs.
    pub workers: u32,
    /// The home core of this tenant on the node.
    pub home_core: u32,
}

/// One answer of a multiget, in the order of the request's keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiGetEntry {
    /// Version of the object (0 when absent).
    pub version: u64,
    /// Value, or `None` when the object does not exist.
    pub value: Option<Bytes>,
}

/// A named counter in a stats response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatEntry {
    /// Dotted name, e.g. `tenant.1.cpu_ns`.
    pub name: String,
    /// Counter value.
    pub value: u64,
}

/// An object an invocation read before the node pushed it back, with its value so the
/// client need not fetch it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushbackRead {
    /// Version and identity of the object.
    pub read: ReadVersion,
    /// Its value as read (`None` when absent).
    pub value: Option<Bytes>,
}

/// The state of an invocation the node suspended and handed back (ASFP pushback).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushbackState {
    /// What it read so far.
    pub reads: Vec<PushbackRead>,
    /// What it buffered to write so far.
    pub writes: Vec<CommitWrite>,
    /// The snapshot its reads were made at, for the client to read on at.
    pub snapshot: Option<Snapshot>,
}

/// Body of a response, by opcode and status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseBody {
    /// `hello` succeeded.
    Hello(HelloInfo),
    /// `get` found the object.
    Get {
        /// Version of the object.
        version: u64,
        /// Its value.
        value: Bytes,
    },
    /// `put` installed the value.
    Put {
        /// New version.
        version: u64,
    },
    /// `delete` removed the object.
    Delete {
        /// Version of the deletion.
        version: u64,
    },
    /// `multiget` answers.
    MultiGet {
        /// One per key, in order.
        entries: Vec<MultiGetEntry>,
        /// The snapshot they were read at (none for a validated read).
        snapshot: Option<Snapshot>,
    },
    /// `invoke` result.
    Invoke {
        /// Opaque bytes the function returned.
        result: Bytes,
        /// Both sides' costs of the run, when the request asked for them and the answering
        /// process ran it over the cluster's data (see [`InvokeCosts`]).
        costs: Option<InvokeCosts>,
        /// What it read and installed, when the request asked for it.
        trace: Option<InvokeTrace>,
    },
    /// `commit` installed the write set.
    Commit {
        /// Version given to the installed writes (0 for a read-only commit).
        version: u64,
    },
    /// `stats` counters.
    Stats(Vec<StatEntry>),
    /// Invocation handed back to the client.
    Pushback(PushbackState),
    /// `read_part` answer: the command's reply and what it read.
    ReadPart {
        /// The key's version (0: absent).
        version: u64,
        /// The command's reply in ferry's lossless RESP form.
        reply: Bytes,
        /// The snapshot it ran at.
        snapshot: Snapshot,
    },
    /// `info` answer: INFO's text.
    Info {
        /// The sections, as INFO shows them.
        text: Bytes,
    },
    /// `list` answers: each table's keys, in the order asked.
    List {
        /// One listing per table asked for, in no order within it.
        tables: Vec<Vec<crate::listing::ListedKey>>,
        /// The snapshot they were listed at.
        snapshot: Snapshot,
    },
    /// Any status other than `ok` and `pushback`: a human-readable reason.
    Error {
        /// Why the request failed.
        message: String,
    },
}

/// A response from the storage node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Outcome.
    pub status: Status,
    /// Storage-node CPU nanoseconds the request cost.
    pub cpu_ns: u64,
    /// Object bytes returned.
    pub bytes_returned: u32,
    /// A gateway's admission rate R for the tenant, requests per second (0: not a
    /// gateway). Travels in the header, so every answer of a gateway carries it.
    pub admission_rate_ops: u32,
    /// Result or error.
    pub body: ResponseBody,
}

impl Response {
    /// An error response with a message and no cost.
    pub fn error(status: Status, message: impl Into<String>) -> Response {
        debug_assert!(status != Status::Ok && status != Status::Pushback);
        Response {
            status,
            cpu_ns: 0,
            bytes_returned: 0,
            admission_rate_ops: 0,
            body: ResponseBody::Error {
                message: message.into(),
            },
        }
    }

    /// A successful response with no cost recorded yet.
    pub fn ok(body: ResponseBody) -> Response {
        Response {
            status: Status::Ok,
            cpu_ns: 0,
            bytes_returned: 0,
            admission_rate_ops: 0,
            body,
        }
    }

    /// Appends the whole frame answering `request_id` to `out`.
    pub fn encode_frame(
        &self,
        opcode: Opcode,
        tenant: TenantId,
        request_id: u64,
        out: &mut BytesMut,
    ) -> Result<(), EncodeError> {
        let header = Header {
            opcode,
            kind: FrameKind::Response,
            status: self.status,
            tenant,
            request_id,
            body_len: 0,
            cpu_ns: self.cpu_ns,
            bytes_returned: self.bytes_returned,
            carries_costs: matches!(self.body, ResponseBody::Invoke { costs: Some(_), .. }),
            admission_rate_ops: self.admission_rate_ops,
        };
        encode_with_header(header, out, |out| self.encode_body(out))
    }

    fn encode_body(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match &self.body {
            ResponseBody::Hello(info) => {
                out.put_u32_le(info.workers);
                out.put_u32_le(info.home_core);
                Ok(())
            }
            ResponseBody::Get { version, value } => {
                out.put_u64_le(*version);
                put_bytes32(out, value, "value")
            }
            ResponseBody::Put { version } | ResponseBody::Delete { version } | ResponseBody::Commit { version } => {
                out.put_u64_le(*version);
                Ok(())
            }
            ResponseBody::MultiGet { entries, snapshot } => {
                put_count(out, entries.len(), "entries")?;
                for entry in entries {
                    out.put_u64_le(entry.version);
                    put_optional_value(out, entry.value.as_ref())?;
                }
                put_optional_snapshot(out, snapshot.as_ref());
                Ok(())
            }
            ResponseBody::Invoke { result, costs, trace } => {
                put_bytes32(out, result, "result")?;
                // The costs record, when present, follows the result (the header says so).
                if let Some(costs) = costs {
                    costs.encode(out);
                }
                // The trace, when asked for, comes last; its absence is an end.
                if let Some(trace) = trace {
                    put_read_set(out, &trace.reads)?;
                    put_read_set(out, &trace.writes)?;
                }
                Ok(())
            }
            ResponseBody::Stats(entries) => {
                put_count(out, entries.len(), "stats")?;
                for entry in entries {
                    put_bytes16(out, entry.name.as_bytes(), "stat name")?;
                    out.put_u64_le(entry.value);
                }
                Ok(())
            }
            ResponseBody::Pushback(state) => {
                put_count(out, state.reads.len(), "pushback reads")?;
                for read in &state.reads {
                    put_read_version(out, &read.read)?;
                    put_optional_value(out, read.value.as_ref())?;
                }
                put_write_set(out, &state.writes)?;
                put_optional_snapshot(out, state.snapshot.as_ref());
                Ok(())
            }
            ResponseBody::Info { text } => put_bytes32(out, text, "info text"),
            ResponseBody::ReadPart {
                version,
                reply,
                snapshot,
            } => {
                out.put_u64_le(*version);
                put_bytes32(out, reply, "reply")?;
                put_snapshot(out, snapshot);
                Ok(())
            }
            ResponseBody::List { tables, snapshot } => {
                put_snapshot(out, snapshot);
                crate::listing::put_listings(out, tables)
            }
            ResponseBody::Error { message } => {
                // Messages are for humans; cut rather than fail on an absurdly long one.
                let cut = truncate_utf8(message, u16::MAX as usize);
                put_bytes16(out, cut.as_bytes(), "message")
            }
        }
    }

    /// Decodes a response frame.
    pub fn decode(header: &Header, body: Bytes) -> Result<Response, DecodeError> {
        if header.kind != FrameKind::Response {
            return Err(DecodeError::WrongKind {
                expected: FrameKind::Response,
            });
        }
        if header.carries_costs && (header.status != Status::Ok || header.opcode != Opcode::Invoke) {
            let what = if header.status == Status::Ok {
                header.opcode.name()
            } else {
                header.status.name()
            };
            return Err(DecodeError::MisplacedCosts(what));
        }
        let mut r = Reader::new(body);
        let body = match header.status {
            Status::Ok => decode_ok_body(header.opcode, header.carries_costs, &mut r)?,
            Status::Pushback => {
                let count = r.count(MAX_TX_ITEMS, "pushback reads")?;
                let mut reads = Vec::with_capacity(count);
                for _ in 0..count {
                    let read = read_read_version(&mut r)?;
                    let value = read_optional_value(&mut r)?;
                    reads.push(PushbackRead { read, value });
                }
                let writes = read_write_set(&mut r)?;
                let snapshot = read_optional_snapshot(&mut r)?;
                ResponseBody::Pushback(PushbackState {
                    reads,
                    writes,
                    snapshot,
                })
            }
            _ => ResponseBody::Error {
                message: r.string16("message")?,
            },
        };
        r.finish()?;
        Ok(Response {
            status: header.status,
            cpu_ns: header.cpu_ns,
            bytes_returned: header.bytes_returned,
            admission_rate_ops: header.admission_rate_ops,
            body,
        })
    }
}

/// Appends the `bad_request` answer to a frame whose opcode this version does not know,
/// echoing the raw opcode byte so the peer can match it to what it sent.
pub fn encode_unknown_opcode_response(
    raw_opcode: u8,
    tenant: TenantId,
    request_id: u64,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let start = out.len();
    let response = Response::error(Status::BadRequest, format!("unknown opcode {raw_opcode}"));
    // Encode with a known opcode, then patch the opcode byte (offset 3, docs/PROTOCOL.md).
    response.encode_frame(Opcode::Stats, tenant, request_id, out)?;
    const OPCODE_OFFSET: usize = 3;
    out[start + OPCODE_OFFSET] = raw_opcode;
    Ok(())
}

/// The body of an `ok` answer to `opcode`; `costs`: the header says a costs record follows
/// an invocation's result.
fn decode_ok_body(opcode: Opcode, costs: bool, r: &mut Reader) -> Result<ResponseBody, DecodeError> {
    Ok(match opcode {
        Opcode::Hello => ResponseBody::Hello(HelloInfo {
            workers: r.u32("workers")?,
            home_core: r.u32("home core")?,
        }),
        Opcode::Get => ResponseBody::Get {
            version: r.u64("version")?,
            value: r.bytes32("value")?,
        },
        Opcode::Put => ResponseBody::Put {
            version: r.u64("version")?,
        },
        Opcode::Delete => ResponseBody::Delete {
            version: r.u64("version")?,
        },
        Opcode::Commit => ResponseBody::Commit {
            version: r.u64("version")?,
        },
        Opcode::MultiGet => {
            let count = r.count(MAX_MULTIGET_KEYS, "entries")?;
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                let version = r.u64("version")?;
                let value = read_optional_value(r)?;
                entries.push(MultiGetEntry { version, value });
            }
            let snapshot = read_optional_snapshot(r)?;
            ResponseBody::MultiGet { entries, snapshot }
        }
        Opcode::Invoke => {
            let result = r.bytes32("result")?;
            let costs = if costs { Some(InvokeCosts::decode(r)?) } else { None };
            let trace = if r.has_remaining() {
                Some(InvokeTrace {
                    reads: read_read_set(r)?,
                    writes: read_read_set(r)?,
                })
            } else {
                None
            };
            ResponseBody::Invoke { result, costs, trace }
        }
        Opcode::ReadPart => ResponseBody::ReadPart {
            version: r.u64("version")?,
            reply: r.bytes32("reply")?,
            snapshot: read_snapshot(r)?,
        },
        Opcode::Info => ResponseBody::Info {
            text: r.bytes32("info text")?,
        },
        Opcode::List => {
            let snapshot = read_snapshot(r)?;
            let tables = crate::listing::read_listings(r)?;
            ResponseBody::List { tables, snapshot }
        }
        Opcode::Stats => {
            let count = r.count(MAX_STAT_ENTRIES, "stats")?;
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                entries.push(StatEntry {
                    name: r.string16("stat name")?,
                    value: r.u64("stat value")?,
                });
            }
            ResponseBody::Stats(entries)
        }
    })
}
