//! `read_part`: a read-only data command on one key, run where the key is for a function
//! running on the app side, so HGET of a large hash moves the field, not the hash. The
//! command runs over the key's entry at the reader's snapshot (TL2, as a multiget's reads
//! are made) in the keyspace executor's read-only view (an expired key reads as absent and
//! is left for the node to delete), and the answer carries the key's version, which joins
//! the reader's read set as if it had read the whole value.

use bytes::{Bytes, BytesMut};

use ferry_keyspace::{Keys, Slot};
use ferry_proto::{Response, ResponseBody, Snapshot, Status};
use ferry_resp::table::{lookup, BLOCKING, READ_ONLY, WRITE};
use ferry_resp::Protocol;
use ferry_store::TenantStore;

/// Whether `command` is a read-only data command whose one key is `key`.
fn reads_only(command: &[Bytes], key: &[u8]) -> bool {
    let Some(spec) = command.first().and_then(|name| lookup(name)) else {
        return false;
    };
    spec.is(READ_ONLY)
        && !spec.is(WRITE)
        && !spec.is(BLOCKING)
        && spec.arity_fits(command.len())
        && matches!(spec.keys(command)[..], [only] if only[..] == *key)
}

/// Answers `read_part`: `command` over `key` of `table` at the reader's snapshot of this
/// node (`snapshots`), or at one that starts now.
pub(crate) fn answer(
    store: &TenantStore,
    table: &str,
    key: &Bytes,
    command: &[Bytes],
    snapshots: &[Snapshot],
) -> Response {
    if !reads_only(command, key) {
        return Response::error(
            Status::BadRequest,
            "read_part runs a known read-only data command whose one key is the request's key",
        );
    }
    let keys = [&key[..]];
    let read = crate::snapshot_read::at_snapshot(store, snapshots, |read_version| {
        store.read_entries_at(table, &keys, read_version)
    });
    let (mut entries, read_version) = match read {
        Ok(read) => read,
        Err(err) => return crate::exec::store_error(err),
    };
    let found = entries.pop().flatten();
    let version = found
        .as_ref()
        .map_or(ferry_store::VERSION_ABSENT, |(version, _)| *version);
    let now_us = crate::store_ctx::unix_time_us();
    let mut slots = [Slot::new(key.clone(), found.map(|(_, entry)| entry))];
    let mut view = Keys::read_only(
        &mut slots,
        now_us,
        ferry_keyspace::keys::fresh_seed(now_us),
        store.encodings(),
    );
    let mut encoded = BytesMut::new();
    ferry_keyspace::run(command, &mut view).encode(Protocol::Ferry, &mut encoded);
    let reply = encoded.freeze();
    let bytes_returned = u32::try_from(reply.len()).unwrap_or(u32::MAX);
    let mut response = Response::ok(ResponseBody::ReadPart {
        version,
        reply,
        snapshot: Snapshot {
            clock: store.clock_id(),
            version: read_version,
        },
    });
    response.bytes_returned = bytes_returned;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Bytes> {
        text.split(' ').map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn only_read_only_commands_of_the_one_key_run() {
        assert!(reads_only(&words("HGET h f"), b"h"));
        assert!(reads_only(&words("LRANGE l 0 9"), b"l"));
        assert!(!reads_only(&words("HGET h f"), b"other"), "another key");
        assert!(!reads_only(&words("HSET h f v"), b"h"), "a write");
        assert!(!reads_only(&words("MGET a b"), b"a"), "two keys");
        assert!(!reads_only(&words("BLPOP l 0"), b"l"), "blocking");
        assert!(!reads_only(&words("HGET h"), b"h"), "arity");
        assert!(!reads_only(&words("NOPE h"), b"h"), "unknown");
    }

    #[test]
    fn a_part_is_read_at_the_snapshot_with_the_keys_version() {
        let store = TenantStore::new(1 << 20);
        let hash = ferry_value::Entry::new(ferry_value::Value::Hash(std::sync::Arc::new(
            ferry_value::Hash::from_pairs(
                [(&b"f"[..], &b"v"[..]), (&b"g"[..], &b"w"[..])].into_iter(),
                &ferry_value::DEFAULT_ENCODINGS,
            ),
        )));
        let written = store.put("t", b"h", &hash.encode()).unwrap();
        let answer = answer(&store, "t", &Bytes::from_static(b"h"), &words("HGET h g"), &[]);
        let ResponseBody::ReadPart {
            version,
            reply,
            snapshot,
        } = answer.body
        else {
            panic!("{answer:?}")
        };
        assert_eq!(version, written);
        assert_eq!(
            ferry_resp::Reply::decode(&reply).unwrap(),
            ferry_resp::Reply::Bulk(Bytes::from_static(b"w"))
        );
        // At that snapshot after the key changed: refused, never a newer part.
        store.put("t", b"h", &hash.encode()).unwrap();
        let stale = super::answer(&store, "t", &Bytes::from_static(b"h"), &words("HGET h g"), &[snapshot]);
        assert_eq!(stale.status, Status::TxAbort);
    }
}
