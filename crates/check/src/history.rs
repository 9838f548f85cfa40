//! A recorded history: every invocation with its times, outcome, the versions its reads saw
//! and the versions its writes installed.

use std::collections::{HashMap, HashSet};

use crate::Violation;

/// A key, as the history names it (`table/key`).
pub type Key = String;

/// How an invocation ended, as its client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It committed.
    Committed,
    /// It aborted: none of its writes may be visible.
    Aborted,
    /// The client never learned (a connection cut mid-commit): it may or may not have
    /// committed, and it never completed. Writes with a version were seen by the recorder
    /// to have been installed (so it committed); writes without one may or may not have.
    Unknown,
}

/// One invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// The client that ran it (for explanations).
    pub client: u64,
    /// When the client sent it, ns.
    pub invoke_ns: u64,
    /// When the client saw its answer, ns (ignored for an unknown outcome).
    pub complete_ns: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// Every read: the key and the version it saw (0: absent).
    pub reads: Vec<(Key, u64)>,
    /// Every write: the key and the version it installed (None where the client never
    /// learned it: an unknown outcome).
    pub writes: Vec<(Key, Option<u64>)>,
}

/// A whole history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The invocations, in any order.
    pub invocations: Vec<Invocation>,
}

impl History {
    /// How an invocation is named in explanations.
    pub fn name(&self, i: usize) -> String {
        let inv = &self.invocations[i];
        let outcome = match inv.outcome {
            Outcome::Committed => String::new(),
            Outcome::Aborted => ", aborted".into(),
            Outcome::Unknown => ", outcome unknown".into(),
        };
        if inv.outcome == Outcome::Unknown {
            format!("T{i} (client {}, from {} ns{outcome})", inv.client, inv.invoke_ns)
        } else {
            format!(
                "T{i} (client {}, {}–{} ns{outcome})",
                inv.client, inv.invoke_ns, inv.complete_ns
            )
        }
    }

    /// Indexes the history: who wrote each version, each key's versions in order, and
    /// which invocations are judged.
    pub(crate) fn index(&self) -> Result<Index, Violation> {
        let mut writer: HashMap<(Key, u64), usize> = HashMap::new();
        let mut aborted: HashMap<(Key, u64), usize> = HashMap::new();
        let mut member = vec![false; self.invocations.len()];
        for (i, inv) in self.invocations.iter().enumerate() {
            match inv.outcome {
                Outcome::Committed => member[i] = true,
                Outcome::Aborted => {
                    for (k, v) in &inv.writes {
                        if let Some(v) = v {
                            aborted.insert((k.clone(), *v), i);
                        }
                    }
                    continue;
                }
                // Its client never learned the outcome, but if the recorder saw its writes
                // (and gave their versions) it committed: judge it, without a completion.
                Outcome::Unknown if inv.writes.iter().any(|(_, v)| v.is_some()) => member[i] = true,
                Outcome::Unknown => continue,
            }
            for (k, v) in &inv.writes {
                let Some(v) = v else { continue };
                if let Some(&first) = writer.get(&(k.clone(), *v)) {
                    return Err(Violation::DuplicateVersion {
                        first: self.name(first),
                        second: self.name(i),
                        key: k.clone(),
                        version: *v,
                    });
                }
                writer.insert((k.clone(), *v), i);
            }
        }
        // A committed read of a version no committed invocation wrote: if exactly one
        // invocation of unknown outcome wrote that key, it committed and wrote it.
        let mut unknown_writers: HashMap<&Key, Vec<usize>> = HashMap::new();
        for (i, inv) in self.invocations.iter().enumerate() {
            if inv.outcome == Outcome::Unknown {
                for (k, _) in &inv.writes {
                    unknown_writers.entry(k).or_default().push(i);
                }
            }
        }
        let mut unresolved = HashSet::new();
        let mut inferred = HashMap::new();
        for inv in &self.invocations {
            if inv.outcome != Outcome::Committed {
                continue;
            }
            for (k, v) in &inv.reads {
                let slot = (k.clone(), *v);
                if *v == 0 || writer.contains_key(&slot) || aborted.contains_key(&slot) {
                    continue;
                }
                match unknown_writers.get(k).map(Vec::as_slice) {
                    Some([only]) => {
                        inferred.insert((*only, k.clone()), *v);
                        writer.insert(slot, *only);
                        member[*only] = true;
                    }
                    Some(_) => {
                        unresolved.insert(slot);
                    }
                    None => {}
                }
            }
        }
        let mut versions: HashMap<Key, Vec<u64>> = HashMap::new();
        for (k, v) in writer.keys() {
            versions.entry(k.clone()).or_default().push(*v);
        }
        for vs in versions.values_mut() {
            vs.sort_unstable();
        }
        Ok(Index {
            writer,
            aborted,
            versions,
            unresolved,
            inferred,
            members: (0..self.invocations.len()).filter(|&i| member[i]).collect(),
        })
    }
}

/// What the checker knows about a history's versions.
pub(crate) struct Index {
    /// The judged writer of each (key, version).
    pub(crate) writer: HashMap<(Key, u64), usize>,
    /// Versions written by aborted invocations.
    pub(crate) aborted: HashMap<(Key, u64), usize>,
    /// Each key's judged versions, ascending.
    pub(crate) versions: HashMap<Key, Vec<u64>>,
    /// Versions read that several invocations of unknown outcome might have written.
    pub(crate) unresolved: HashSet<(Key, u64)>,
    /// (invocation of unknown outcome, key) → the version it was seen to have written.
    pub(crate) inferred: HashMap<(usize, Key), u64>,
    /// The judged invocations: committed, or of unknown outcome and seen to have committed.
    pub(crate) members: Vec<usize>,
}

impl Index {
    /// The first read by a judged invocation of an aborted or unwritten version.
    pub(crate) fn read_violation(&self, h: &History) -> Option<Violation> {
        for &i in &self.members {
            for (k, v) in &h.invocations[i].reads {
                let slot = (k.clone(), *v);
                if *v == 0 || self.writer.contains_key(&slot) || self.unresolved.contains(&slot) {
                    continue;
                }
                return Some(match self.aborted.get(&slot) {
                    Some(&w) => Violation::AbortedRead {
                        reader: h.name(i),
                        key: k.clone(),
                        version: *v,
                        writer: h.name(w),
                    },
                    None => Violation::PhantomVersion {
                        reader: h.name(i),
                        key: k.clone(),
                        version: *v,
                    },
                });
            }
        }
        None
    }

    /// The version of `key` after `v` among the judged ones.
    pub(crate) fn next_version(&self, key: &Key, v: u64) -> Option<u64> {
        let vs = self.versions.get(key)?;
        let at = vs.partition_point(|&x| x <= v);
        vs.get(at).copied()
    }
}
