//! A large sorted set: Redis's skip list with spans (`t_zset.c`), so a rank is found in
//! O(log n) as well as a score, plus an index from member to node. Nodes live in one
//! arena and link by slot number (no pointers, no unsafe); a removed node's slot is
//! reused. Order is (score, member bytes); scores are never NaN (the commands refuse it).

use std::cmp::Ordering;

use hashbrown::HashTable;
use smallvec::SmallVec;

use crate::{spilled_bytes, Blob, Hasher, BLOB_BYTES};

/// Most levels a node has (Redis's `ZSKIPLIST_MAXLEVEL`).
const MAX_LEVEL: usize = 32;

/// One level up is taken with this chance in 2^16 (Redis's `ZSKIPLIST_P` of 1/4).
const LEVEL_UP_IN_65536: u64 = 65536 / 4;

/// Slots a scan looks at per member asked for (Redis visits up to ten empty buckets per
/// element asked for).
pub const SCAN_SLOTS_PER_COUNT: usize = 10;

/// The arena slot that means "none": the head's, which no link points to.
const NIL: u32 = 0;

/// Bytes a node costs besides a spilled member: the node, its share of the arena's
/// growth and of the member index.
const NODE_BYTES: usize = BLOB_BYTES + 8 + 4 + 24 + 12;

#[derive(Clone, Copy, Debug, Default)]
struct Link {
    forward: u32,
    /// Nodes between this one and `forward` along this level, `forward` counted.
    span: u32,
}

#[derive(Clone, Debug)]
struct Node {
    member: Blob,
    score: f64,
    backward: u32,
    levels: SmallVec<[Link; 2]>,
}

/// A skip list of (score, member) with a member index.
#[derive(Clone, Debug)]
pub struct SkipList {
    nodes: Vec<Node>,
    free: Vec<u32>,
    level: usize,
    len: usize,
    tail: u32,
    index: HashTable<u32>,
    hasher: Hasher,
    rng: u64,
    spilled: usize,
}

fn order(score: f64, member: &[u8], other_score: f64, other: &[u8]) -> Ordering {
    score
        .partial_cmp(&other_score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| member.cmp(other))
}

impl Default for SkipList {
    fn default() -> SkipList {
        let head = Node {
            member: Blob::new(),
            score: 0.0,
            backward: NIL,
            levels: SmallVec::from_elem(Link::default(), MAX_LEVEL),
        };
        SkipList {
            nodes: vec![head],
            free: Vec::new(),
            level: 1,
            len: 0,
            tail: NIL,
            index: HashTable::new(),
            hasher: Hasher::default(),
            rng: 0x2545_F491_4F6C_DD1D,
            spilled: 0,
        }
    }
}

impl SkipList {
    /// Members.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes it holds in memory, estimated.
    pub fn memory_bytes(&self) -> usize {
        self.len * NODE_BYTES + self.spilled
    }

    fn random_level(&mut self) -> usize {
        let mut level = 1;
        loop {
            // xorshift64*: levels need spread, not secrecy.
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            let draw = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 48;
            if draw >= LEVEL_UP_IN_65536 || level == MAX_LEVEL {
                return level;
            }
            level += 1;
        }
    }

    fn find(&self, member: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(member);
        self.index
            .find(hash, |&slot| &self.nodes[slot as usize].member[..] == member)
            .copied()
    }

    /// A member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|slot| self.nodes[slot as usize].score)
    }

    /// Adds `member` with `score`, or moves it there; its old score if it had one.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        let old = self.remove(member);
        let mut update = [NIL; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut x = NIL;
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let link = self.nodes[x as usize].levels[i];
                let next = &self.nodes[link.forward as usize];
                if link.forward != NIL && order(next.score, &next.member, score, member) == Ordering::Less {
                    rank[i] += link.span;
                    x = link.forward;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let level = self.random_level();
        if level > self.level {
            for i in self.level..level {
                rank[i] = 0;
                update[i] = NIL;
                self.nodes[NIL as usize].levels[i].span = self.len as u32;
            }
            self.level = level;
        }
        let node = Node {
            member: Blob::from_slice(member),
            score,
            backward: update[0],
            levels: SmallVec::from_elem(Link::default(), level),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        for i in 0..level {
            let before = self.nodes[update[i] as usize].levels[i];
            self.nodes[slot as usize].levels[i] = Link {
                forward: before.forward,
                span: before.span - (rank[0] - rank[i]),
            };
            self.nodes[update[i] as usize].levels[i] = Link {
                forward: slot,
                span: rank[0] - rank[i] + 1,
            };
        }
        for (i, &before) in update.iter().enumerate().take(self.level).skip(level) {
            self.nodes[before as usize].levels[i].span += 1;
        }
        let next = self.nodes[slot as usize].levels[0].forward;
        if next == NIL {
            self.tail = slot;
        } else {
            self.nodes[next as usize].backward = slot;
        }
        self.len += 1;
        self.spilled += spilled_bytes(member);
        let hash = self.hasher.hash_one(member);
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index
            .insert_unique(hash, slot, |&s| hasher.hash_one(&nodes[s as usize].member[..]));
        old
    }

    /// Removes `member`; its score if it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let hash = self.hasher.hash_one(member);
        let entry = self
            .index
            .find_entry(hash, |&slot| &self.nodes[slot as usize].member[..] == member)
            .ok()?;
        let (slot, _) = entry.remove();
        let score = self.nodes[slot as usize].score;
        let mut update = [NIL; MAX_LEVEL];
        let mut x = NIL;
        for i in (0..self.level).rev() {
            loop {
                let link = self.nodes[x as usize].levels[i];
                let next = &self.nodes[link.forward as usize];
                if link.forward != NIL && order(next.score, &next.member, score, member) == Ordering::Less {
                    x = link.forward;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        for (i, &before) in update.iter().enumerate().take(self.level) {
            let gone = self.nodes[slot as usize].levels.get(i).copied();
            let link = &mut self.nodes[before as usize].levels[i];
            match gone {
                Some(gone) if link.forward == slot => {
                    link.span += gone.span;
                    link.span -= 1;
                    link.forward = gone.forward;
                }
                _ => link.span -= 1,
            }
        }
        let (next, back) = (
            self.nodes[slot as usize].levels[0].forward,
            self.nodes[slot as usize].backward,
        );
        if next == NIL {
            self.tail = back;
        } else {
            self.nodes[next as usize].backward = back;
        }
        while self.level > 1 && self.nodes[NIL as usize].levels[self.level - 1].forward == NIL {
            self.level -= 1;
        }
        self.len -= 1;
        self.spilled -= spilled_bytes(member);
        let node = &mut self.nodes[slot as usize];
        node.member = Blob::new();
        node.levels = SmallVec::new();
        self.free.push(slot);
        Some(score)
    }

    /// How many members come before the first one for which `before` is false, where
    /// `before` holds for a prefix of the order (a score or lex bound).
    pub fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut rank = 0usize;
        let mut x = NIL;
        for i in (0..self.level).rev() {
            loop {
                let link = self.nodes[x as usize].levels[i];
                let next = &self.nodes[link.forward as usize];
                if link.forward != NIL && before(next.score, &next.member) {
                    rank += link.span as usize;
                    x = link.forward;
                } else {
                    break;
                }
            }
        }
        rank
    }

    /// A member's rank (0: the lowest).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        Some(self.count_before(|s, m| order(s, m, score, member) == Ordering::Less))
    }

    /// The node at `rank` (0-based, below `len`).
    fn node_at(&self, rank: usize) -> u32 {
        let target = rank + 1;
        let mut traversed = 0usize;
        let mut x = NIL;
        for i in (0..self.level).rev() {
            loop {
                let link = self.nodes[x as usize].levels[i];
                if link.forward != NIL && traversed + link.span as usize <= target {
                    traversed += link.span as usize;
                    x = link.forward;
                } else {
                    break;
                }
            }
            if traversed == target {
                return x;
            }
        }
        unreachable!("rank {rank} below the length {}", self.len)
    }

    /// (score, member) at `rank`.
    pub fn at(&self, rank: usize) -> Option<(f64, &[u8])> {
        if rank >= self.len {
            return None;
        }
        let node = &self.nodes[self.node_at(rank) as usize];
        Some((node.score, &node.member))
    }

    /// One step of a scan by arena slot from `cursor` (0: the start): about `count`
    /// members and the next cursor (0: done). A member keeps its slot while it is in the
    /// list, so one present for the whole scan is returned exactly once; a slot freed and
    /// taken again may show a new member or not. At most [`SCAN_SLOTS_PER_COUNT`] slots
    /// are looked at per member asked for, so a list emptied by removals is scanned in
    /// bounded steps.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(f64, &[u8])>) {
        let start = usize::try_from(cursor).unwrap_or(usize::MAX).max(1);
        let budget = count.max(1).saturating_mul(SCAN_SLOTS_PER_COUNT);
        let mut out = Vec::with_capacity(count);
        let mut slot = start;
        while slot < self.nodes.len() && out.len() < count && slot - start < budget {
            let node = &self.nodes[slot];
            if !node.levels.is_empty() {
                out.push((node.score, &node.member[..]));
            }
            slot += 1;
        }
        let next = if slot >= self.nodes.len() { 0 } else { slot as u64 };
        (next, out)
    }

    /// (score, member) from `rank` on, towards the highest (or the lowest, `rev`).
    pub fn iter_from(&self, rank: usize, rev: bool) -> Iter<'_> {
        let at = if rank < self.len { self.node_at(rank) } else { NIL };
        Iter { list: self, at, rev }
    }
}

/// A run of a skip list's members.
pub struct Iter<'a> {
    list: &'a SkipList,
    at: u32,
    rev: bool,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (f64, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at == NIL {
            return None;
        }
        let node = &self.list.nodes[self.at as usize];
        self.at = if self.rev {
            node.backward
        } else {
            node.levels[0].forward
        };
        Some((node.score, &node.member))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// (score bits made orderable, member): the model's order is (score, member).
    fn model_order(model: &BTreeSet<(i64, Vec<u8>)>) -> Vec<(f64, Vec<u8>)> {
        model.iter().map(|(s, m)| (*s as f64, m.clone())).collect()
    }

    proptest! {
        /// Ranks, scores and order agree with a sorted model after any inserts, moves and
        /// removals.
        #[test]
        fn a_skip_list_keeps_order_and_ranks(ops in proptest::collection::vec((any::<bool>(), 0u8..60, -20i64..20), 0..400)) {
            let mut list = SkipList::default();
            let mut model: BTreeSet<(i64, Vec<u8>)> = BTreeSet::new();
            let mut scores: std::collections::HashMap<Vec<u8>, i64> = Default::default();
            for (insert, member, score) in ops {
                let member = vec![member];
                if insert {
                    let old = scores.insert(member.clone(), score);
                    if let Some(old) = old { model.remove(&(old, member.clone())); }
                    model.insert((score, member.clone()));
                    prop_assert_eq!(list.insert(&member, score as f64), old.map(|s| s as f64));
                } else {
                    let old = scores.remove(&member);
                    if let Some(old) = old { model.remove(&(old, member.clone())); }
                    prop_assert_eq!(list.remove(&member), old.map(|s| s as f64));
                }
                prop_assert_eq!(list.len(), model.len());
            }
            let ordered = model_order(&model);
            let walked: Vec<(f64, Vec<u8>)> = list.iter_from(0, false).map(|(s, m)| (s, m.to_vec())).collect();
            prop_assert_eq!(&walked, &ordered);
            if !ordered.is_empty() {
                let back: Vec<(f64, Vec<u8>)> = list.iter_from(ordered.len() - 1, true).map(|(s, m)| (s, m.to_vec())).collect();
                let mut reversed = ordered.clone();
                reversed.reverse();
                prop_assert_eq!(back, reversed);
            }
            for (rank, (score, member)) in ordered.iter().enumerate() {
                prop_assert_eq!(list.rank(member), Some(rank));
                prop_assert_eq!(list.at(rank), Some((*score, &member[..])));
                prop_assert_eq!(list.score(member), Some(*score));
                prop_assert_eq!(list.count_before(|s, _| s < *score), ordered.iter().filter(|(s, _)| s < score).count());
            }
        }
    }
}
