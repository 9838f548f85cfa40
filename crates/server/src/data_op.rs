//! The ferry protocol's data operations (get, put, multiget, commit, …), answered by the
//! store at once.

use bytes::Bytes;

use ferry_proto::{MultiGetEntry, Request, Response, ResponseBody, Snapshot, Status, MAX_BODY_BYTES};
use ferry_store::WriteRef;

use crate::exec::store_error;
use crate::node::TenantState;
use crate::store_ctx::object_refs;

/// Largest total of values one multiget may return (what fits in one response frame).
const MAX_MULTIGET_RESPONSE_BYTES: usize = MAX_BODY_BYTES as usize - 64 * 1024;

/// Answers a data operation of `tenant`'s; `cluster`: the node is one of a cluster's.
pub(crate) fn data_operation(tenant: &TenantState, cluster: bool, request: Request) -> Response {
    let store = &tenant.store;
    match request {
        Request::Get { table, key, validate } => {
            let read = if validate.is_empty() {
                store.get(&table, &key)
            } else {
                store
                    .read_validated(&table, &[&key], &object_refs(&validate))
                    .map(|mut values| values.pop().flatten())
            };
            match read {
                Ok(Some((version, value))) => {
                    let bytes_returned = value.len() as u32;
                    let mut response = Response::ok(ResponseBody::Get { version, value });
                    response.bytes_returned = bytes_returned;
                    response
                }
                Ok(None) => Response::error(Status::NotFound, format!("no object {table}/{}", printable(&key))),
                Err(err) => store_error(err),
            }
        }
        Request::Put { table, key, value } => match store.put(&table, &key, &value) {
            Ok(version) => Response::ok(ResponseBody::Put { version }),
            Err(err) => store_error(err),
        },
        Request::Delete { table, key } => match store.delete(&table, &key) {
            Ok(Some(version)) => Response::ok(ResponseBody::Delete { version }),
            Ok(None) => Response::error(Status::NotFound, format!("no object {table}/{}", printable(&key))),
            Err(err) => store_error(err),
        },
        Request::MultiGet {
            table,
            keys,
            validate,
            snapshots,
        } => {
            let keys: Vec<&[u8]> = keys.iter().map(|key| &key[..]).collect();
            // A read set to validate: the reads are current now, validated with it. Else
            // TL2: at the reader's snapshot of this node, or at one that starts now.
            let read = if validate.is_empty() {
                match snapshots.iter().find(|snapshot| snapshot.clock == store.clock_id()) {
                    Some(snapshot) => store
                        .read_at(&table, &keys, snapshot.version)
                        .map(|values| (values, Some(*snapshot))),
                    None => store.read_now(&table, &keys).map(|(values, version)| {
                        let snapshot = Snapshot {
                            clock: store.clock_id(),
                            version,
                        };
                        (values, Some(snapshot))
                    }),
                }
            } else {
                store
                    .read_validated(&table, &keys, &object_refs(&validate))
                    .map(|values| (values, None))
            };
            match read {
                Ok((values, snapshot)) => {
                    let total: usize = values.iter().flatten().map(|(_, value)| value.len()).sum();
                    if total > MAX_MULTIGET_RESPONSE_BYTES {
                        return Response::error(
                            Status::TooLarge,
                            format!("multiget would return {total} bytes, more than {MAX_MULTIGET_RESPONSE_BYTES}"),
                        );
                    }
                    let entries = values
                        .into_iter()
                        .map(|value| match value {
                            Some((version, value)) => MultiGetEntry {
                                version,
                                value: Some(value),
                            },
                            None => MultiGetEntry {
                                version: ferry_store::VERSION_ABSENT,
                                value: None,
                            },
                        })
                        .collect();
                    let mut response = Response::ok(ResponseBody::MultiGet { entries, snapshot });
                    response.bytes_returned = total as u32;
                    response
                }
                Err(err) => store_error(err),
            }
        }
        Request::Commit { reads, writes } => {
            let write_refs: Vec<WriteRef<'_>> = writes
                .iter()
                .map(|write| WriteRef::put_or_delete(&write.table, &write.key, write.value.as_deref()))
                .collect();
            match store.commit(&object_refs(&reads), &write_refs) {
                Ok(version) => Response::ok(ResponseBody::Commit { version }),
                Err(err) => store_error(err),
            }
        }
        Request::List { tables, snapshots } => crate::listing::answer(store, &tables, &snapshots),
        Request::ReadPart {
            table,
            key,
            command,
            snapshots,
        } => crate::read_part::answer(store, &table, &key, &command, &snapshots),
        Request::Info => Response::ok(ResponseBody::Info {
            text: Bytes::from(crate::memory::script_info(tenant, cluster)),
        }),
        Request::Hello { .. } | Request::Stats | Request::Invoke { .. } => {
            // Invariant: the connection reader answers these itself.
            Response::error(Status::BadRequest, "request type is not executed by workers")
        }
    }
}

/// A key for an error message: text if it is printable, else hex.
fn printable(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) if text.chars().all(|c| !c.is_control()) => text.to_string(),
        _ => key.iter().map(|b| format!("{b:02x}")).collect(),
    }
}
