//! What each chaos client saw, and the history the checker judges built from it.
//!
//! Versions come from the invocations' traces. Tags (the value every write stores) are
//! checked beside them: a read of a version must see the tag of the invocation that
//! installed it, which catches a version reported for the wrong value. A tag read that no
//! committed invocation installed names its writer anyway: an invocation of unknown
//! outcome (which therefore committed, at that version) or one that failed (whose write
//! must never be seen: it enters the history as an aborted write, for the checker to
//! report).

use std::collections::HashMap;

use ferry_check::{History, Invocation, Outcome};
use ferry_client::InvokeTrace;

use crate::program::{Program, TABLE, TAG_ABSENT};

/// How one invocation ended, as its client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Committed: what it read and installed, and the tag each read returned.
    Committed {
        /// From the client runtime.
        trace: InvokeTrace,
        /// From the function's result, in the order of its reads.
        tags: Vec<u64>,
        /// Where it finished.
        finished: Finished,
        /// Attempts beyond the first (OCC conflicts retried).
        retries: u32,
    },
    /// Failed with an answer that says nothing was applied (an abort, a refusal, a
    /// broken connection before anything that could commit was sent).
    Failed,
    /// The client could not tell whether it was applied.
    Unknown,
}

/// Where a committed invocation finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// On the storage node.
    Remote,
    /// On the client, from the start.
    Local,
    /// On the client, after the node handed it back.
    PushedBack,
}

/// One invocation of a chaos run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The client that ran it.
    pub client: u64,
    /// What it ran.
    pub program: Program,
    /// When it was sent, ns since the run began.
    pub invoke_ns: u64,
    /// When its answer arrived, ns since the run began.
    pub complete_ns: u64,
    /// How it ended.
    pub seen: Seen,
}

/// The records contradict themselves before any ordering is considered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// A committed invocation's trace does not list the keys its program reads and writes.
    #[error("client {client}, tag {tag}: trace {trace:?} does not match program {program:?}")]
    TraceMismatch {
        /// The client.
        client: u64,
        /// The invocation's tag.
        tag: u64,
        /// Its trace.
        trace: InvokeTrace,
        /// Its program.
        program: Program,
    },
    /// A read saw a version with a value other than the one its installer wrote.
    #[error("{key} at version {version} was read with tag {read} but installed with tag {installed}")]
    WrongValue {
        /// The key.
        key: String,
        /// The version.
        version: u64,
        /// The tag the read returned.
        read: u64,
        /// The tag its installer wrote.
        installed: u64,
    },
}

/// How the checker names a hot key.
pub fn key_name(index: u8) -> String {
    format!("{TABLE}/k{index}")
}

fn trace_key(table: &str, k: &[u8]) -> Option<u8> {
    let hot = crate::program::key(0);
    let prefix = &hot[..hot.len() - 1];
    (table == TABLE && k.len() == hot.len() && k.starts_with(prefix)).then(|| k[prefix.len()])
}

/// Acknowledged writes the final read (the last record) does not see: a committed write
/// of a key at a version above the version the final read found. Versions of a key only
/// grow and the final read starts after every acknowledgement, so each one is a write
/// lost (by a crash, say). The checker reports the same as a violation; this counts them.
pub fn lost_writes(records: &[Record]) -> usize {
    let Some((last, rest)) = records.split_last() else {
        return 0;
    };
    let Seen::Committed { trace: final_read, .. } = &last.seen else {
        return 0;
    };
    let seen: HashMap<u8, u64> = final_read
        .reads
        .iter()
        .filter_map(|rv| Some((trace_key(&rv.table, &rv.key)?, rv.version)))
        .collect();
    rest.iter()
        .filter_map(|r| match &r.seen {
            Seen::Committed { trace, .. } => Some(trace),
            _ => None,
        })
        .flat_map(|trace| &trace.writes)
        .filter(|w| trace_key(&w.table, &w.key).is_some_and(|k| seen.get(&k).is_none_or(|v| w.version > *v)))
        .count()
}

/// Builds the history of `records`, checking traces and values on the way.
pub fn history(records: &[Record]) -> Result<History, RecordError> {
    let by_tag: HashMap<u64, usize> = records.iter().enumerate().map(|(i, r)| (r.program.tag, i)).collect();
    // Who installed each (key, version), by the traces of committed invocations.
    let mut installed: HashMap<(u8, u64), u64> = HashMap::new();
    let mut reads_of: Vec<Vec<(u8, u64, u64)>> = vec![Vec::new(); records.len()];
    for (i, r) in records.iter().enumerate() {
        let Seen::Committed { trace, tags, .. } = &r.seen else {
            continue;
        };
        let mismatch = || RecordError::TraceMismatch {
            client: r.client,
            tag: r.program.tag,
            trace: trace.clone(),
            program: r.program.clone(),
        };
        let read_keys: Vec<u8> = trace
            .reads
            .iter()
            .filter_map(|rv| trace_key(&rv.table, &rv.key))
            .collect();
        let write_keys: Vec<u8> = trace
            .writes
            .iter()
            .filter_map(|w| trace_key(&w.table, &w.key))
            .collect();
        if read_keys != r.program.reads().collect::<Vec<_>>()
            || write_keys != r.program.writes().collect::<Vec<_>>()
            || tags.len() != read_keys.len()
        {
            return Err(mismatch());
        }
        for w in &trace.writes {
            installed.insert(
                (trace_key(&w.table, &w.key).expect("checked"), w.version),
                r.program.tag,
            );
        }
        reads_of[i] = read_keys
            .iter()
            .zip(&trace.reads)
            .zip(tags)
            .map(|((&k, rv), &tag)| (k, rv.version, tag))
            .collect();
    }
    // Versions of writers that were not acknowledged, learned from the tags others read.
    let mut learned: HashMap<(usize, u8), u64> = HashMap::new();
    for reads in &reads_of {
        for &(k, version, tag) in reads {
            let wrong = |installed: u64| RecordError::WrongValue {
                key: key_name(k),
                version,
                read: tag,
                installed,
            };
            if version == 0 {
                if tag != TAG_ABSENT {
                    return Err(wrong(TAG_ABSENT));
                }
                continue;
            }
            match installed.get(&(k, version)) {
                Some(&writer_tag) if writer_tag != tag => return Err(wrong(writer_tag)),
                Some(_) => {}
                None => {
                    if let Some(&w) = by_tag.get(&tag) {
                        if records[w].program.writes().any(|wk| wk == k) {
                            learned.insert((w, k), version);
                        }
                    }
                }
            }
        }
    }
    let invocations = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (outcome, reads, writes) = match &r.seen {
                Seen::Committed { trace, .. } => (
                    Outcome::Committed,
                    reads_of[i].iter().map(|&(k, v, _)| (key_name(k), v)).collect(),
                    trace
                        .writes
                        .iter()
                        .map(|w| (key_name(trace_key(&w.table, &w.key).expect("checked")), Some(w.version)))
                        .collect(),
                ),
                Seen::Failed | Seen::Unknown => (
                    if r.seen == Seen::Failed {
                        Outcome::Aborted
                    } else {
                        Outcome::Unknown
                    },
                    Vec::new(),
                    r.program
                        .writes()
                        .map(|k| (key_name(k), learned.get(&(i, k)).copied()))
                        .collect(),
                ),
            };
            Invocation {
                client: r.client,
                invoke_ns: r.invoke_ns,
                complete_ns: r.complete_ns,
                outcome,
                reads,
                writes,
            }
        })
        .collect();
    Ok(History { invocations })
}

#[cfg(test)]
mod tests {
    use ferry_client::InvokeTrace;
    use ferry_proto::message::ReadVersion;

    use super::*;
    use crate::program::{key, Step};

    fn at(k: u8, version: u64) -> ReadVersion {
        ReadVersion {
            table: TABLE.into(),
            key: bytes::Bytes::copy_from_slice(&key(k)),
            version,
        }
    }

    fn committed(tag: u64, reads: Vec<ReadVersion>, writes: Vec<ReadVersion>) -> Record {
        Record {
            client: 0,
            program: Program {
                tag,
                steps: vec![Step::Read(0)],
            },
            invoke_ns: 0,
            complete_ns: 0,
            seen: Seen::Committed {
                tags: vec![0; reads.len()],
                trace: InvokeTrace { reads, writes },
                finished: Finished::Remote,
                retries: 0,
            },
        }
    }

    #[test]
    fn a_write_above_what_the_final_read_saw_is_lost() {
        let final_read = |v0, v1| committed(u64::MAX, vec![at(0, v0), at(1, v1)], vec![]);
        let writes = || {
            vec![
                committed(1, vec![], vec![at(0, 3)]),
                committed(2, vec![], vec![at(0, 5), at(1, 4)]),
            ]
        };
        let mut records = writes();
        records.push(final_read(5, 4));
        assert_eq!(lost_writes(&records), 0);
        let mut records = writes();
        records.push(final_read(3, 0));
        assert_eq!(lost_writes(&records), 2);
    }
}
