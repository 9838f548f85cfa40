//! A request from a client to the storage node and its body encoding (docs/PROTOCOL.md
//! §Bodies).

use bytes::{BufMut, Bytes, BytesMut};

use crate::frame::{Header, Opcode};
use crate::message::*;
use crate::tenant::TenantId;
use crate::wire::{put_bytes16, put_bytes32, put_count, EncodeError, Reader};

/// Invoke flag: the client accepts a `pushback` answer.
const INVOKE_FLAG_PUSHBACK: u8 = 1;

/// Invoke flag: the client wants the invocation's [`crate::InvokeTrace`] with its result.
const INVOKE_FLAG_TRACE: u8 = 2;
/// Invoke flag: on a cluster node, hand the invocation back (as a pushback) when it
/// reaches a key another node serves, instead of failing it with `moved`.
const INVOKE_FLAG_HANDOFF: u8 = 4;
/// Invoke flag: answer with the run's costs on both sides ([`crate::InvokeCosts`]) when the
/// answering process has more to tell than its own CPU (a compute node, a gateway).
const INVOKE_FLAG_COSTS: u8 = 8;

/// Every invoke flag this version knows.
const INVOKE_FLAGS_KNOWN: u8 = INVOKE_FLAG_PUSHBACK | INVOKE_FLAG_TRACE | INVOKE_FLAG_HANDOFF | INVOKE_FLAG_COSTS;

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
    pub fn encode_frame(&self, tenant: TenantId, request_id: u64, out: &mut BytesMut) -> Result<(), EncodeError> {
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
