//! Typed requests and responses and their body encodings (docs/PROTOCOL.md §Bodies).

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::costs::InvokeCosts;
use crate::frame::{FrameKind, Header, Opcode, Status, HEADER_LEN};
use crate::wire::{put_bytes16, put_bytes32, put_count, EncodeError, Reader};

/// Most keys one multiget may name: bounds the work and the response size of one request.
pub const MAX_MULTIGET_KEYS: usize = 1024;

/// Most words of a command `read_part` runs (far more than any read command takes).
pub const MAX_COMMAND_WORDS: usize = 4096;

/// Most entries in a read set or a write set: bounds the locks one commit takes and the
/// memory one transaction can pin on the storage node.
pub const MAX_TX_ITEMS: usize = 4096;

/// Invoke flag: the client accepts a `pushback` answer.
const INVOKE_FLAG_PUSHBACK: u8 = 1;

/// Invoke flag: the client wants the invocation's [`InvokeTrace`] with its result.
const INVOKE_FLAG_TRACE: u8 = 2;
/// Invoke flag: on a cluster node, hand the invocation back (as a pushback) when it
/// reaches a key another node serves, instead of failing it with `moved`.
const INVOKE_FLAG_HANDOFF: u8 = 4;
/// Invoke flag: answer with the run's costs on both sides ([`InvokeCosts`]) when the
/// answering process has more to tell than its own CPU (a compute node, a gateway).
const INVOKE_FLAG_COSTS: u8 = 8;

/// Every invoke flag this version knows.
const INVOKE_FLAGS_KNOWN: u8 = INVOKE_FLAG_PUSHBACK | INVOKE_FLAG_TRACE | INVOKE_FLAG_HANDOFF | INVOKE_FLAG_COSTS;

/// Most entries in a stats response.
pub const MAX_STAT_ENTRIES: usize = 4096;

/// Most snapshots one read may carry: one per storage node a local run has read from.
pub const MAX_SNAPSHOTS: usize = 256;

/// A body could not be decoded: the frame itself was intact, so only this request fails
/// (with `bad_request`) and the connection carries on.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The body ended in the middle of a field.
    #[error("body truncated while reading {0}")]
    Truncated(&'static str),
    /// A string field is not UTF-8.
    #[error("{0} is not valid UTF-8")]
    InvalidUtf8(&'static str),
    /// A count exceeds its limit.
    #[error("{count} {what} exceeds the limit of {max}")]
    TooManyItems {
        /// Which list.
        what: &'static str,
        /// Count received.
        count: usize,
        /// Limit.
        max: usize,
    },
    /// Bytes left over after the last field.
    #[error("{0} unexpected trailing bytes in body")]
    TrailingBytes(usize),
    /// The header's costs flag on an answer that cannot carry a costs record (anything
    /// but a successful `invoke`).
    #[error("a costs record on a {0} answer, which cannot carry one")]
    MisplacedCosts(&'static str),
    /// A tag byte has an unknown value.
    #[error("invalid {what} tag {tag}")]
    BadTag {
        /// Which tag.
        what: &'static str,
        /// Value received.
        tag: u8,
    },
    /// A response frame arrived where a request was expected, or vice versa.
    #[error("expected a {expected:?} frame")]
    WrongKind {
        /// What the reader expected.
        expected: FrameKind,
    },
}

/// One entry of an OCC read set: the version of an object as a transaction saw it.
/// Version 0 means "absent".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReadVersion {
    /// Table of the object.
    pub table: String,
    /// Key of the object.
    pub key: Bytes,
    /// Version seen (0 = the object did not exist).
    pub version: u64,
}

/// A read version of one storage node's tenant clock (TL2): reads at it see the state as of
/// that version, and an object changed after it is answered `tx_abort` ("newer"), never
/// read. `clock` names the clock (each node's tenant store has its own), so a client
/// running a function over several nodes, directly or through a gateway, carries one
/// snapshot per node and each node picks its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Snapshot {
    /// Which clock: a storage node's tenant store's identity.
    pub clock: u64,
    /// The read version.
    pub version: u64,
}

/// The versions one invocation read and installed: what a history checker needs of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InvokeTrace {
    /// Every object it read, with the version seen, in the order first read.
    pub reads: Vec<ReadVersion>,
    /// Every object it wrote, with the version its commit installed.
    pub writes: Vec<ReadVersion>,
}

/// One entry of an OCC write set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitWrite {
    /// Table to write (created if needed).
    pub table: String,
    /// Key to write.
    pub key: Bytes,
    /// New value, or `None` to delete the object.
    pub value: Option<Bytes>,
}

/// A request from a client to the storage node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Authenticate as the header's tenant.
    Hello {
        /// Secret token of the tenant.
        token: Bytes,
    },
    /// Read one object. If `validate` is non-empty, the node first checks that every
    /// listed object still has the listed version, atomically with the read, and answers
    /// `tx_abort` otherwise: a local execution's reads then form a consistent snapshot
    /// without a separate validation round trip.
    Get {
        /// Table to read.
        table: String,
        /// Key to read.
        key: Bytes,
        /// Read set to validate atomically with this read.
        validate: Vec<ReadVersion>,
    },
    /// Write one object.
    Put {
        /// Table to write (created if needed).
        table: String,
        /// Key to write.
        key: Bytes,
        /// New value.
        value: Bytes,
    },
    /// Delete one object.
    Delete {
        /// Table.
        table: String,
        /// Key.
        key: Bytes,
    },
    /// Read several objects of one table; validation as for `Get`. Without a read set to
    /// validate, the keys are read at the node's snapshot among `snapshots` (or at a new
    /// one if none is the node's), and the answer says which: TL2 reads, O(1) each.
    MultiGet {
        /// Table to read.
        table: String,
        /// Keys to read, answered in order.
        keys: Vec<Bytes>,
        /// Read set to validate atomically with these reads.
        validate: Vec<ReadVersion>,
        /// The reader's snapshots so far, one per node it has read from.
        snapshots: Vec<Snapshot>,
    },
    /// Run a storage function next to the data.
    Invoke {
        /// Registered name of the function.
        function: String,
        /// Opaque arguments, passed to the function unchanged.
        args: Bytes,
        /// The client accepts a `pushback` answer (ASFP): an overloaded node may suspend
        /// the invocation and hand back its read and write sets for the client to finish.
        allow_pushback: bool,
        /// The client wants the versions the invocation read and installed with its
        /// result (for recording a history to check).
        trace: bool,
        /// The client can finish the invocation itself when it reaches a key another
        /// cluster node serves: the node hands it back (`pushback`) at that access.
        handoff: bool,
        /// The client wants both sides' costs of the run in the answer (a gateway asking
        /// a compute node, which spends CPU of its own and storage CPU): answered with a
        /// costs record by a process that has one, ignored by a storage node.
        costs: bool,
    },
    /// Validate `reads` and install `writes` atomically (OCC commit).
    Commit {
        /// Versions the transaction read.
        reads: Vec<ReadVersion>,
        /// Writes to install if validation succeeds.
        writes: Vec<CommitWrite>,
    },
    /// Ask for the node's counters.
    Stats,
    /// List the keys of `tables` at the reader's snapshot of this node (as `MultiGet`), or
    /// at one that starts now.
    List {
        /// Tables to list, answered in order.
        tables: Vec<String>,
        /// The reader's snapshots so far, one per node it has read from.
        snapshots: Vec<Snapshot>,
    },
    /// Ask for the node's INFO text as the tenant sees it.
    Info,
    /// Run the read-only data command `command` (its words; `key` its one key) at the
    /// reader's snapshot of this node (as `MultiGet`), or at one that starts now.
    ReadPart {
        /// Table of the key.
        table: String,
        /// The command's one key.
        key: Bytes,
        /// The command's words, its name first.
        command: Vec<Bytes>,
        /// The reader's snapshots so far, one per node it has read from.
        snapshots: Vec<Snapshot>,
    },
}

impl Request {
    /// The keys a request names (none for hello, stats and invoke: an invocation's is its
    /// routing key, which only the registry can find in its arguments).
    pub fn keys(&self) -> Vec<&[u8]> {
        self.keys_with_tables().into_iter().map(|(_, key)| key).collect()
    }

    /// The keys a request names, each with its table (see [`Request::keys`]).
    pub fn keys_with_tables(&self) -> Vec<(&str, &[u8])> {
        fn read(r: &ReadVersion) -> (&str, &[u8]) {
            (r.table.as_str(), &r.key[..])
        }
        match self {
            Request::Get { table, key, validate } => std::iter::once((table.as_str(), &key[..]))
                .chain(validate.iter().map(read))
                .collect(),
            Request::Put { table, key, .. } | Request::Delete { table, key } | Request::ReadPart { table, key, .. } => {
                vec![(table.as_str(), &key[..])]
            }
            Request::MultiGet {
                table, keys, validate, ..
            } => keys
                .iter()
                .map(|k| (table.as_str(), &k[..]))
                .chain(validate.iter().map(read))
                .collect(),
            Request::Commit { reads, writes } => reads
                .iter()
                .map(read)
                .chain(writes.iter().map(|w| (w.table.as_str(), &w.key[..])))
                .collect(),
            Request::Hello { .. } | Request::Stats | Request::Invoke { .. } | Request::List { .. } | Request::Info => {
                Vec::new()
            }
        }
    }

    /// The opcode this request travels under.
    pub fn opcode(&self) -> Opcode {
        match self {
            Request::Hello { .. } => Opcode::Hello,
            Request::Get { .. } => Opcode::Get,
            Request::Put { .. } => Opcode::Put,
            Request::Delete { .. } => Opcode::Delete,
            Request::MultiGet { .. } => Opcode::MultiGet,
            Request::Invoke { .. } => Opcode::Invoke,
            Request::Commit { .. } => Opcode::Commit,
            Request::Stats => Opcode::Stats,
            Request::List { .. } => Opcode::List,
            Request::Info => Opcode::Info,
            Request::ReadPart { .. } => Opcode::ReadPart,
        }
    }

    /// Appends the whole frame (header and body) to `out`.
    pub fn encode_frame(&self, tenant: u32, request_id: u64, out: &mut BytesMut) -> Result<(), EncodeError> {
        let header = Header::request(self.opcode(), tenant, request_id, 0);
        encode_with_header(header, out, |out| self.encode_body(out))
    }

    fn encode_body(&self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Request::Hello { token } => put_bytes16(out, token, "token"),
            Request::Get { table, key, validate } => {
                put_bytes16(out, table.as_bytes(), "table")?;
                put_bytes16(out, key, "key")?;
                put_read_set(out, validate)
            }
            Request::Put { table, key, value } => {
                put_bytes16(out, table.as_bytes(), "table")?;
                put_bytes16(out, key, "key")?;
                put_bytes32(out, value, "value")
            }
            Request::Delete { table, key } => {
                put_bytes16(out, table.as_bytes(), "table")?;
                put_bytes16(out, key, "key")
            }
            Request::MultiGet {
                table,
                keys,
                validate,
                snapshots,
            } => {
                put_bytes16(out, table.as_bytes(), "table")?;
                put_count(out, keys.len(), "keys")?;
                for key in keys {
                    put_bytes16(out, key, "key")?;
                }
                put_read_set(out, validate)?;
                put_count(out, snapshots.len(), "snapshots")?;
                for snapshot in snapshots {
                    put_snapshot(out, snapshot);
                }
                Ok(())
            }
            Request::Invoke {
                function,
                args,
                allow_pushback,
                trace,
                handoff,
                costs,
            } => {
                put_bytes16(out, function.as_bytes(), "function name")?;
                put_bytes32(out, args, "args")?;
                let mut flags = 0;
                if *allow_pushback {
                    flags |= INVOKE_FLAG_PUSHBACK;
                }
                if *trace {
                    flags |= INVOKE_FLAG_TRACE;
                }
                if *handoff {
                    flags |= INVOKE_FLAG_HANDOFF;
                }
                if *costs {
                    flags |= INVOKE_FLAG_COSTS;
                }
                out.put_u8(flags);
                Ok(())
            }
            Request::Commit { reads, writes } => {
                put_read_set(out, reads)?;
                put_write_set(out, writes)
            }
            Request::Stats | Request::Info => Ok(()),
            Request::ReadPart {
                table,
                key,
                command,
                snapshots,
            } => {
                put_bytes16(out, table.as_bytes(), "table")?;
                put_bytes16(out, key, "key")?;
                put_count(out, command.len(), "command words")?;
                for word in command {
                    put_bytes32(out, word, "command word")?;
                }
                put_count(out, snapshots.len(), "snapshots")?;
                for snapshot in snapshots {
                    put_snapshot(out, snapshot);
                }
                Ok(())
            }
            Request::List { tables, snapshots } => {
                crate::listing::put_tables(out, tables)?;
                put_count(out, snapshots.len(), "snapshots")?;
                for snapshot in snapshots {
                    put_snapshot(out, snapshot);
                }
                Ok(())
            }
        }
    }

    /// Decodes a request body for `opcode`.
    pub fn decode(opcode: Opcode, body: Bytes) -> Result<Request, DecodeError> {
        let mut r = Reader::new(body);
        let request = match opcode {
            Opcode::Hello => Request::Hello {
                token: r.bytes16("token")?,
            },
            Opcode::Get => Request::Get {
                table: r.string16("table")?,
                key: r.bytes16("key")?,
                validate: read_read_set(&mut r)?,
            },
            Opcode::Put => Request::Put {
                table: r.string16("table")?,
                key: r.bytes16("key")?,
                value: r.bytes32("value")?,
            },
            Opcode::Delete => Request::Delete {
                table: r.string16("table")?,
                key: r.bytes16("key")?,
            },
            Opcode::MultiGet => {
                let table = r.string16("table")?;
                let count = r.count(MAX_MULTIGET_KEYS, "keys")?;
                let mut keys = Vec::with_capacity(count);
                for _ in 0..count {
                    keys.push(r.bytes16("key")?);
                }
                let validate = read_read_set(&mut r)?;
                let count = r.count(MAX_SNAPSHOTS, "snapshots")?;
                let mut snapshots = Vec::with_capacity(count);
                for _ in 0..count {
                    snapshots.push(read_snapshot(&mut r)?);
                }
                Request::MultiGet {
                    table,
                    keys,
                    validate,
                    snapshots,
                }
            }
            Opcode::Invoke => {
                let function = r.string16("function name")?;
                let args = r.bytes32("args")?;
                let flags = r.u8("invoke flags")?;
                if flags & !INVOKE_FLAGS_KNOWN != 0 {
                    return Err(DecodeError::BadTag {
                        what: "invoke flags",
                        tag: flags,
                    });
                }
                Request::Invoke {
                    function,
                    args,
                    allow_pushback: flags & INVOKE_FLAG_PUSHBACK != 0,
                    trace: flags & INVOKE_FLAG_TRACE != 0,
                    handoff: flags & INVOKE_FLAG_HANDOFF != 0,
                    costs: flags & INVOKE_FLAG_COSTS != 0,
                }
            }
            Opcode::Commit => Request::Commit {
                reads: read_read_set(&mut r)?,
                writes: read_write_set(&mut r)?,
            },
            Opcode::Stats => Request::Stats,
            Opcode::Info => Request::Info,
            Opcode::ReadPart => {
                let table = r.string16("table")?;
                let key = r.bytes16("key")?;
                let count = r.count(MAX_COMMAND_WORDS, "command words")?;
                let command = (0..count)
                    .map(|_| r.bytes32("command word"))
                    .collect::<Result<_, _>>()?;
                let count = r.count(MAX_SNAPSHOTS, "snapshots")?;
                let snapshots = (0..count).map(|_| read_snapshot(&mut r)).collect::<Result<_, _>>()?;
                Request::ReadPart {
                    table,
                    key,
                    command,
                    snapshots,
                }
            }
            Opcode::List => {
                let tables = crate::listing::read_tables(&mut r)?;
                let count = r.count(MAX_SNAPSHOTS, "snapshots")?;
                let snapshots = (0..count).map(|_| read_snapshot(&mut r)).collect::<Result<_, _>>()?;
                Request::List { tables, snapshots }
            }
        };
        r.finish()?;
        Ok(request)
    }
}

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
        tenant: u32,
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
    tenant: u32,
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

/// Writes a header with a placeholder length, the body, then patches the length: one pass,
/// no intermediate buffer.
fn encode_with_header(
    header: Header,
    out: &mut BytesMut,
    body: impl FnOnce(&mut BytesMut) -> Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    let start = out.len();
    header.encode(out);
    if let Err(err) = body(out) {
        out.truncate(start);
        return Err(err);
    }
    let body_len = out.len() - start - HEADER_LEN;
    let body_len = match u32::try_from(body_len) {
        Ok(len) if len <= crate::frame::MAX_BODY_BYTES => len,
        _ => {
            out.truncate(start);
            return Err(EncodeError {
                what: "frame body",
                len: body_len,
                max: crate::frame::MAX_BODY_BYTES as usize,
            });
        }
    };
    // Offset of `body_len` inside the header (docs/PROTOCOL.md).
    const BODY_LEN_OFFSET: usize = 20;
    out[start + BODY_LEN_OFFSET..start + BODY_LEN_OFFSET + 4].copy_from_slice(&body_len.to_le_bytes());
    Ok(())
}

fn truncate_utf8(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn put_read_version(out: &mut BytesMut, read: &ReadVersion) -> Result<(), EncodeError> {
    put_bytes16(out, read.table.as_bytes(), "table")?;
    put_bytes16(out, &read.key, "key")?;
    out.put_u64_le(read.version);
    Ok(())
}

fn read_read_version(r: &mut Reader) -> Result<ReadVersion, DecodeError> {
    Ok(ReadVersion {
        table: r.string16("table")?,
        key: r.bytes16("key")?,
        version: r.u64("version")?,
    })
}

fn put_read_set(out: &mut BytesMut, reads: &[ReadVersion]) -> Result<(), EncodeError> {
    put_count(out, reads.len(), "read set")?;
    for read in reads {
        put_read_version(out, read)?;
    }
    Ok(())
}

fn read_read_set(r: &mut Reader) -> Result<Vec<ReadVersion>, DecodeError> {
    let count = r.count(MAX_TX_ITEMS, "read set entries")?;
    let mut reads = Vec::with_capacity(count);
    for _ in 0..count {
        reads.push(read_read_version(r)?);
    }
    Ok(reads)
}

fn put_snapshot(out: &mut BytesMut, snapshot: &Snapshot) {
    out.put_u64_le(snapshot.clock);
    out.put_u64_le(snapshot.version);
}

fn read_snapshot(r: &mut Reader) -> Result<Snapshot, DecodeError> {
    Ok(Snapshot {
        clock: r.u64("snapshot clock")?,
        version: r.u64("snapshot version")?,
    })
}

fn put_optional_snapshot(out: &mut BytesMut, snapshot: Option<&Snapshot>) {
    match snapshot {
        None => out.put_u8(TAG_ABSENT),
        Some(snapshot) => {
            out.put_u8(TAG_PRESENT);
            put_snapshot(out, snapshot);
        }
    }
}

fn read_optional_snapshot(r: &mut Reader) -> Result<Option<Snapshot>, DecodeError> {
    match r.u8("snapshot tag")? {
        TAG_ABSENT => Ok(None),
        TAG_PRESENT => Ok(Some(read_snapshot(r)?)),
        tag => Err(DecodeError::BadTag { what: "snapshot", tag }),
    }
}

/// Tag of an optional value: absent.
const TAG_ABSENT: u8 = 0;
/// Tag of an optional value: present.
const TAG_PRESENT: u8 = 1;

fn put_optional_value(out: &mut BytesMut, value: Option<&Bytes>) -> Result<(), EncodeError> {
    match value {
        None => {
            out.put_u8(TAG_ABSENT);
            Ok(())
        }
        Some(value) => {
            out.put_u8(TAG_PRESENT);
            put_bytes32(out, value, "value")
        }
    }
}

fn read_optional_value(r: &mut Reader) -> Result<Option<Bytes>, DecodeError> {
    match r.u8("value tag")? {
        TAG_ABSENT => Ok(None),
        TAG_PRESENT => Ok(Some(r.bytes32("value")?)),
        tag => Err(DecodeError::BadTag { what: "value", tag }),
    }
}

fn put_write_set(out: &mut BytesMut, writes: &[CommitWrite]) -> Result<(), EncodeError> {
    put_count(out, writes.len(), "write set")?;
    for write in writes {
        put_bytes16(out, write.table.as_bytes(), "table")?;
        put_bytes16(out, &write.key, "key")?;
        put_optional_value(out, write.value.as_ref())?;
    }
    Ok(())
}

fn read_write_set(r: &mut Reader) -> Result<Vec<CommitWrite>, DecodeError> {
    let count = r.count(MAX_TX_ITEMS, "write set entries")?;
    let mut writes = Vec::with_capacity(count);
    for _ in 0..count {
        writes.push(CommitWrite {
            table: r.string16("table")?,
            key: r.bytes16("key")?,
            value: read_optional_value(r)?,
        });
    }
    Ok(writes)
}
