//! Places RESP transactions among the versions the checker orders. RESP reports the tag
//! each read saw and no version; a tag names its writer, so a read's version is the
//! version its writer installed, and a RESP write's version is, in order of preference:
//!
//! - **exact**: a function read its tag at a version. The node installs all of a
//!   transaction's changes at one version (`ferry_store::TenantStore::update`), so one
//!   such read places every write of the transaction.
//! - **a lower bound**: one above the version of what the same transaction read of that
//!   key. Every RESP write reads its key first inside the same MULTI, under the key's
//!   lock, so on a correct node it installed the version right after the one it read:
//!   no other write of the key lies between, and the real version is at least one above.
//!   Placed there, a key's versions keep their real order (a later write is above the
//!   real version, an earlier one at or below the one read), so the checker draws no edge
//!   that is not real. Two RESP writes that read the same version get the same number:
//!   the lost update the checker must report. What the bound cannot show is a *blind*
//!   write (a function's string put, the only writes that read nothing) that a wrong
//!   node let in between; a later function read of the RESP write's tag makes it exact
//!   and shows that too.
//! - **none**: nobody learned its writer's version and RESP reads alone saw it (an
//!   invocation of unknown outcome wrote it): the write, and reads of it, stay out of the
//!   graph and are counted (`crate::record::RespJudged::unplaced`).
//!
//! A write that failed gets a version of its own that nobody installs
//! ([`ABORTED_FLOOR`] plus its record's index), so a read of its tag is the checker's
//! read of an aborted write.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use crate::program::TAG_ABSENT;
use crate::record::{key_name, trace_key, Record, RecordError, Seen, Via};

/// Versions at and above it name the write of a failed invocation (real versions count
/// commits from 1, and never get near it).
pub const ABORTED_FLOOR: u64 = 1 << 63;

/// Versions of writes their writer did not report, learned from the reads of functions.
#[derive(Debug, Default)]
pub(crate) struct Learned {
    /// An unacknowledged function's write of a key → its version.
    functions: HashMap<(usize, u8), u64>,
    /// A RESP transaction → the one version of all its writes.
    resp: HashMap<usize, u64>,
}

impl Learned {
    /// Record `w` wrote key `k` at `version`, as a function's read found.
    pub(crate) fn learn(&mut self, records: &[Record], w: usize, k: u8, version: u64) -> Result<(), RecordError> {
        if records[w].via == Via::Function {
            self.functions.insert((w, k), version);
            return Ok(());
        }
        match self.resp.entry(w) {
            Entry::Occupied(first) if *first.get() != version => Err(RecordError::SplitVersion {
                tag: records[w].program.tag,
                first: *first.get(),
                second: version,
            }),
            Entry::Occupied(_) => Ok(()),
            Entry::Vacant(slot) => {
                slot.insert(version);
                Ok(())
            }
        }
    }

    /// What was learned of `w`'s write of `k`.
    fn get(&self, records: &[Record], w: usize, k: u8) -> Option<u64> {
        match records[w].via {
            Via::Function => self.functions.get(&(w, k)).copied(),
            Via::Resp => self.resp.get(&w).copied(),
        }
    }
}

/// The keys and versions of an invocation without a trace (`None`: no place found).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Its reads, in its program's order.
    pub(crate) reads: Vec<(u8, Option<u64>)>,
    /// Its writes, in its program's order.
    pub(crate) writes: Vec<(u8, Option<u64>)>,
}

/// Places every record without a trace: RESP transactions, and invocations that failed
/// or whose outcome is unknown (`None` for committed functions, whose traces say it all).
pub(crate) fn place(
    records: &[Record],
    by_tag: &HashMap<u64, usize>,
    learned: &Learned,
) -> Result<Vec<Option<Placed>>, RecordError> {
    let mut placer = Placer {
        records,
        by_tag,
        learned,
        found: HashMap::new(),
    };
    records
        .iter()
        .enumerate()
        .map(|(i, record)| {
            let reads = match &record.seen {
                Seen::Committed { .. } => return Ok(None),
                Seen::Executed { tags } => record
                    .program
                    .reads()
                    .zip(tags)
                    .map(|(k, &tag)| Ok((k, placer.version_of(k, tag)?)))
                    .collect::<Result<_, RecordError>>()?,
                Seen::Failed | Seen::Unknown => Vec::new(),
            };
            let writes = record
                .program
                .writes()
                .map(|k| Ok((k, placer.written(i, k)?)))
                .collect::<Result<_, RecordError>>()?;
            Ok(Some(Placed { reads, writes }))
        })
        .collect()
}

struct Placer<'a> {
    records: &'a [Record],
    by_tag: &'a HashMap<u64, usize>,
    learned: &'a Learned,
    /// The versions placed so far of (writer, key).
    found: HashMap<(usize, u8), Option<u64>>,
}

impl Placer<'_> {
    /// The version of `k` a read of `tag` saw.
    fn version_of(&mut self, k: u8, tag: u64) -> Result<Option<u64>, RecordError> {
        match self.writer_of(k, tag)? {
            None => Ok(Some(0)),
            Some(w) => self.written(w, k),
        }
    }

    /// The record that wrote `tag` to `k` (`None`: the tag of an absent key).
    fn writer_of(&self, k: u8, tag: u64) -> Result<Option<usize>, RecordError> {
        if tag == TAG_ABSENT {
            return Ok(None);
        }
        match self.by_tag.get(&tag) {
            Some(&w) if self.records[w].program.writes().any(|wk| wk == k) => Ok(Some(w)),
            _ => Err(RecordError::UnwrittenTag { key: key_name(k), tag }),
        }
    }

    /// The version of record `w`'s write of `k`. A RESP write without a learned version
    /// follows the write it read, which may be one too: the chain is walked back to a
    /// version known (or to none), then placed forward, one above the other.
    fn written(&mut self, w: usize, k: u8) -> Result<Option<u64>, RecordError> {
        let mut chain: Vec<usize> = Vec::new();
        let mut on_chain = HashSet::new();
        let mut at = w;
        let base = loop {
            if let Some(&found) = self.found.get(&(at, k)) {
                break found;
            }
            let record = &self.records[at];
            if let Some(version) = self.learned.get(self.records, at, k) {
                break Some(version);
            }
            match &record.seen {
                Seen::Committed { trace, .. } => {
                    break trace
                        .writes
                        .iter()
                        .find(|write| trace_key(&write.table, &write.key) == Some(k))
                        .map(|write| write.version)
                }
                Seen::Failed => break Some(ABORTED_FLOOR + at as u64),
                Seen::Unknown => break None,
                Seen::Executed { tags } => {
                    if !on_chain.insert(at) {
                        return Err(RecordError::TagCycle {
                            key: key_name(k),
                            tags: chain.iter().map(|&c| self.records[c].program.tag).collect(),
                        });
                    }
                    chain.push(at);
                    // Invariant: a RESP transaction reads every key it writes, first.
                    let Some(read) = record.program.reads().position(|rk| rk == k).map(|n| tags[n]) else {
                        break None;
                    };
                    match self.writer_of(k, read)? {
                        None => break Some(0),
                        Some(previous) => at = previous,
                    }
                }
            }
        };
        let mut version = base;
        for &c in chain.iter().rev() {
            // Nothing follows an aborted write in a place of its own.
            version = version.filter(|&v| v < ABORTED_FLOOR).map(|v| v + 1);
            self.found.insert((c, k), version);
        }
        Ok(version)
    }
}

#[cfg(test)]
mod tests;
