//! What each chaos client saw, and the history the checker judges built from it.
//!
//! Versions come from the invocations' traces. Tags (the value every write stores) are
//! checked beside them: a read of a version must see the tag of the invocation that
//! installed it, which catches a version reported for the wrong value. A tag read that no
//! committed invocation installed names its writer anyway: an invocation of unknown
//! outcome (which therefore committed, at that version) or one that failed (whose write
//! must never be seen: it enters the history as an aborted write, for the checker to
//! report).
//!
//! RESP transactions report tags and no versions; [`crate::resolve`] places them among
//! the versions the traces report.

use std::collections::HashMap;

use ferry_check::{History, Invocation, Outcome};
use ferry_client::InvokeTrace;

use crate::program::{Program, TABLE, TAG_ABSENT};
use crate::resolve::{self, Placed};

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
    /// A RESP transaction whose EXEC answered with its replies: committed, at a version
    /// RESP does not say.
    Executed {
        /// The tag each read returned, in the order of its program's reads.
        tags: Vec<u64>,
    },
    /// Failed with an answer that says nothing was applied (an abort, a refusal, a
    /// broken connection before anything that could commit was sent).
    Failed,
    /// The client could not tell whether it was applied.
    Unknown,
}

/// How an invocation reached the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A storage function invoked over ferry's protocol ([`crate::program::NAME`]).
    Function,
    /// A MULTI/EXEC of data commands over RESP ([`crate::resp`]).
    Resp,
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
    /// How it reached the node.
    pub via: Via,
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
    /// A RESP transaction reported a number of tags other than its program's reads.
    #[error("client {client}, tag {tag}: {tags} tags for program {program:?}")]
    TagCount {
        /// The client.
        client: u64,
        /// The transaction's tag.
        tag: u64,
        /// How many tags it reported.
        tags: usize,
        /// Its program.
        program: Program,
    },
    /// A RESP transaction's writes were read at two versions, though the node installs
    /// a transaction's changes at one.
    #[error("the writes of RESP transaction {tag} were read at versions {first} and {second}")]
    SplitVersion {
        /// The transaction's tag.
        tag: u64,
        /// One version a read saw.
        first: u64,
        /// Another.
        second: u64,
    },
    /// A RESP read returned a tag nobody wrote to that key.
    #[error("{key} was read with tag {tag}, which no invocation wrote to it")]
    UnwrittenTag {
        /// The key.
        key: String,
        /// The tag.
        tag: u64,
    },
    /// RESP reads say each of these transactions read a key after the next one wrote it.
    #[error("{key}: RESP transactions read each other's writes in a cycle: tags {tags:?}")]
    TagCycle {
        /// The key.
        key: String,
        /// The tags of the cycle.
        tags: Vec<u64>,
    },
}

/// How the checker names a hot key.
pub fn key_name(index: u8) -> String {
    format!("{TABLE}/k{index}")
}

/// The hot key a trace's (table, key) names, if any.
pub(crate) fn trace_key(table: &str, k: &[u8]) -> Option<u8> {
    let hot = crate::program::key(0);
    let prefix = &hot[..hot.len() - 1];
    (table == TABLE && k.len() == hot.len() && k.starts_with(prefix)).then(|| k[prefix.len()])
}

/// Acknowledged writes the final read (the last invocation of `history`) does not see: a
/// committed write of a key at a version above the version the final read found.
/// Versions of a key only grow and the final read starts after every acknowledgement, so
/// each one is a write lost (by a crash, say). A RESP write's version is a lower bound of
/// its real one ([`crate::resolve`]), so it is counted only if surely lost. The checker
/// reports the same as a violation; this counts them.
pub fn lost_writes(history: &History) -> usize {
    let Some((last, rest)) = history.invocations.split_last() else {
        return 0;
    };
    if last.outcome != Outcome::Committed {
        return 0;
    }
    let seen: HashMap<&str, u64> = last.reads.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    rest.iter()
        .filter(|inv| inv.outcome == Outcome::Committed)
        .flat_map(|inv| &inv.writes)
        .filter(|(k, v)| v.is_some_and(|v| seen.get(k.as_str()).is_none_or(|seen| v > *seen)))
        .count()
}

/// What the history made of a run's RESP transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RespJudged {
    /// Placed in the checker's graph: committed, or of unknown outcome but seen to have
    /// written (as the checker counts its own).
    pub judged: usize,
    /// Reads and writes of judged transactions with no place among the versions (a tag
    /// of a writer whose version nobody learned): left out of the graph.
    pub unplaced: usize,
}

/// Counts [`RespJudged`] of `records` in the `history` built from them.
pub fn resp_judged(records: &[Record], history: &History) -> RespJudged {
    let mut out = RespJudged::default();
    for (record, inv) in records.iter().zip(&history.invocations) {
        if record.via != Via::Resp {
            continue;
        }
        let wrote = inv.writes.iter().any(|(_, v)| v.is_some());
        if inv.outcome == Outcome::Committed || (inv.outcome == Outcome::Unknown && wrote) {
            out.judged += 1;
            out.unplaced += record.program.reads().count() - inv.reads.len();
            out.unplaced += inv.writes.iter().filter(|(_, v)| v.is_none()).count();
        }
    }
    out
}

/// Builds the history of `records`, checking traces and values on the way.
pub fn history(records: &[Record]) -> Result<History, RecordError> {
    let by_tag: HashMap<u64, usize> = records.iter().enumerate().map(|(i, r)| (r.program.tag, i)).collect();
    // Who installed each (key, version), by the traces of committed invocations.
    let mut installed: HashMap<(u8, u64), u64> = HashMap::new();
    let mut reads_of: Vec<Vec<(u8, u64, u64)>> = vec![Vec::new(); records.len()];
    for (i, r) in records.iter().enumerate() {
        let (trace, tags) = match &r.seen {
            Seen::Committed { trace, tags, .. } => (trace, tags),
            Seen::Executed { tags } if tags.len() != r.program.reads().count() => {
                return Err(RecordError::TagCount {
                    client: r.client,
                    tag: r.program.tag,
                    tags: tags.len(),
                    program: r.program.clone(),
                })
            }
            _ => continue,
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
    let learned = learn(records, &by_tag, &installed, &reads_of)?;
    let placed = resolve::place(records, &by_tag, &learned)?;
    let invocations = records
        .iter()
        .zip(placed)
        .enumerate()
        .map(|(i, (r, placed))| {
            let name = |(k, v): (u8, Option<u64>)| (key_name(k), v);
            let (outcome, reads, writes) = match (&r.seen, placed) {
                (Seen::Committed { trace, .. }, _) => (
                    Outcome::Committed,
                    reads_of[i].iter().map(|&(k, v, _)| (key_name(k), v)).collect(),
                    trace
                        .writes
                        .iter()
                        .map(|w| (key_name(trace_key(&w.table, &w.key).expect("checked")), Some(w.version)))
                        .collect(),
                ),
                (seen, Some(Placed { reads, writes })) => (
                    match seen {
                        Seen::Failed => Outcome::Aborted,
                        Seen::Unknown => Outcome::Unknown,
                        _ => Outcome::Committed,
                    },
                    // A read with no place among the versions stays out of the graph.
                    reads.into_iter().filter_map(|(k, v)| Some((key_name(k), v?))).collect(),
                    writes.into_iter().map(name).collect(),
                ),
                // Invariant: `resolve::place` places every record without a trace.
                (seen, None) => unreachable!("{seen:?} left unplaced"),
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

/// Versions of writers that did not report them (not acknowledged, or RESP transactions),
/// learned from the tags functions read at versions, checking each read's tag against its
/// version's installer on the way.
fn learn(
    records: &[Record],
    by_tag: &HashMap<u64, usize>,
    installed: &HashMap<(u8, u64), u64>,
    reads_of: &[Vec<(u8, u64, u64)>],
) -> Result<resolve::Learned, RecordError> {
    let mut learned = resolve::Learned::default();
    for reads in reads_of {
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
                            learned.learn(records, w, k, version)?;
                        }
                    }
                }
            }
        }
    }
    Ok(learned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(reads: &[(u8, u64)], writes: &[(u8, Option<u64>)]) -> Invocation {
        Invocation {
            client: 0,
            invoke_ns: 0,
            complete_ns: 0,
            outcome: Outcome::Committed,
            reads: reads.iter().map(|&(k, v)| (key_name(k), v)).collect(),
            writes: writes.iter().map(|&(k, v)| (key_name(k), v)).collect(),
        }
    }

    #[test]
    fn a_write_above_what_the_final_read_saw_is_lost() {
        let history = |v0, v1| History {
            invocations: vec![
                committed(&[], &[(0, Some(3))]),
                committed(&[], &[(0, Some(5)), (1, Some(4))]),
                // A write with no place among the versions is not counted either way.
                committed(&[], &[(1, None)]),
                committed(&[(0, v0), (1, v1)], &[]),
            ],
        };
        assert_eq!(lost_writes(&history(5, 4)), 0);
        assert_eq!(lost_writes(&history(3, 0)), 2);
    }
}
