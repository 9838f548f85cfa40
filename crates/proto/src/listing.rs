//! Tables' listings over the wire (`list`): what a function running on the app side reads
//! for KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHDB and FLUSHALL, made at the reader's snapshot
//! of the node like a multiget's reads (docs/PROTOCOL.md §list).
//!
//! A listing read joins the transaction's read set as a [`ReadVersion`] with the empty key
//! (no object has it) and the snapshot's version: the node validates it at commit as "no
//! key of the table created, removed, retyped or re-expired since" (the storage node's
//! `tenant/membership.rs` says why that is enough).

use bytes::{BufMut, Bytes, BytesMut};

use crate::message::{DecodeError, ReadVersion};
use crate::wire::{put_bytes16, put_count, EncodeError, Reader};

/// Most tables one `list` may name: every database of a tenant (FLUSHALL).
pub const MAX_LIST_TABLES: usize = 1024;

/// Most keys one `list` answers with, over all its tables: a larger table is listed on the
/// storage node (ship compute) or not at all.
pub const MAX_LISTED_KEYS: usize = 1 << 20;

/// Why a listing over a cluster is refused (`cross_slot`): a function run on the app side
/// lists over a single storage node only.
pub const LISTING_NEEDS_ONE_NODE: &str =
    "listing keys (KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHDB) in a function run on the app side needs a single storage node; in a cluster run the function on the node";

/// The types a listing names, by their code on the wire (TYPE's answers).
pub const TYPE_NAMES: [&str; 5] = ["string", "list", "set", "zset", "hash"];

/// A key as a listing shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedKey {
    /// The key.
    pub key: Bytes,
    /// Its type, one of [`TYPE_NAMES`].
    pub type_name: &'static str,
    /// When it expires, in milliseconds since the Unix epoch.
    pub expires_at_ms: Option<u64>,
}

impl ReadVersion {
    /// The read of `table`'s listing made at read version `version`.
    pub fn listing(table: &str, version: u64) -> ReadVersion {
        ReadVersion {
            table: table.to_string(),
            key: Bytes::new(),
            version,
        }
    }

    /// Whether this is the read of a table's listing rather than of one object.
    pub fn is_listing(&self) -> bool {
        self.key.is_empty()
    }
}

/// Expiry tag: the key does not expire.
const NO_EXPIRY: u8 = 0;
/// Expiry tag: an expiry follows.
const EXPIRES: u8 = 1;

/// Writes the listings of a `list` answer, one per table asked for.
pub(crate) fn put_listings(out: &mut BytesMut, tables: &[Vec<ListedKey>]) -> Result<(), EncodeError> {
    put_count(out, tables.len(), "listed tables")?;
    for keys in tables {
        put_count(out, keys.len(), "listed keys")?;
        for listed in keys {
            put_bytes16(out, &listed.key, "key")?;
            let code = TYPE_NAMES
                .iter()
                .position(|name| *name == listed.type_name)
                .ok_or(EncodeError {
                    what: "type name",
                    len: listed.type_name.len(),
                    max: 0,
                })?;
            out.put_u8(code as u8);
            match listed.expires_at_ms {
                None => out.put_u8(NO_EXPIRY),
                Some(at_ms) => {
                    out.put_u8(EXPIRES);
                    out.put_u64_le(at_ms);
                }
            }
        }
    }
    Ok(())
}

/// Reads the listings of a `list` answer.
pub(crate) fn read_listings(r: &mut Reader) -> Result<Vec<Vec<ListedKey>>, DecodeError> {
    let tables = r.count(MAX_LIST_TABLES, "listed tables")?;
    let mut out = Vec::with_capacity(tables);
    let mut total = 0;
    for _ in 0..tables {
        let count = r.count(MAX_LISTED_KEYS - total, "listed keys")?;
        total += count;
        let mut keys = Vec::with_capacity(count);
        for _ in 0..count {
            let key = r.bytes16("key")?;
            let code = r.u8("type")?;
            let type_name = *TYPE_NAMES.get(usize::from(code)).ok_or(DecodeError::BadTag {
                what: "type",
                tag: code,
            })?;
            let expires_at_ms = match r.u8("expiry tag")? {
                NO_EXPIRY => None,
                EXPIRES => Some(r.u64("expiry")?),
                tag => return Err(DecodeError::BadTag { what: "expiry", tag }),
            };
            keys.push(ListedKey {
                key,
                type_name,
                expires_at_ms,
            });
        }
        out.push(keys);
    }
    Ok(out)
}

/// Writes the table names of a `list` request.
pub(crate) fn put_tables(out: &mut BytesMut, tables: &[String]) -> Result<(), EncodeError> {
    put_count(out, tables.len(), "tables")?;
    for table in tables {
        put_bytes16(out, table.as_bytes(), "table")?;
    }
    Ok(())
}

/// Reads the table names of a `list` request.
pub(crate) fn read_tables(r: &mut Reader) -> Result<Vec<String>, DecodeError> {
    let count = r.count(MAX_LIST_TABLES, "tables")?;
    (0..count).map(|_| r.string16("table")).collect()
}
