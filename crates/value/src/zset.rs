//! A sorted set: members ordered by (score, member bytes), as Redis orders them. Small
//! ones are one [`Pack`] of member, score, member, score… in that order (Redis's
//! `listpack`, up to `zset-max-listpack-entries` members of at most
//! `zset-max-listpack-value` bytes); larger ones a [`SkipList`] (`skiplist`). Scores are
//! never NaN (the commands refuse it).

use std::cmp::Ordering;

use crate::encodings::Encodings;
use crate::pack::Pack;
use crate::skiplist::{self, SkipList};

/// A sorted set's members.
#[derive(Clone, Debug)]
pub enum ZSet {
    /// Member, score (eight bytes, little-endian IEEE-754)… in order.
    Pack(Pack),
    /// A skip list with a member index.
    Skip(SkipList),
}

fn score_of(bytes: &[u8]) -> f64 {
    bytes.try_into().map(f64::from_le_bytes).unwrap_or(0.0)
}

fn order(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

impl Default for ZSet {
    fn default() -> ZSet {
        ZSet::Pack(Pack::new())
    }
}

impl PartialEq for ZSet {
    /// The same members with the same scores.
    fn eq(&self, other: &ZSet) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl ZSet {
    /// An empty sorted set in the encoding its first member `first` calls for.
    pub fn for_member(first: &[u8], encodings: &Encodings) -> ZSet {
        if encodings.zset_max_listpack_entries == 0 || first.len() > encodings.zset_max_listpack_value {
            ZSet::Skip(SkipList::default())
        } else {
            ZSet::default()
        }
    }

    /// A sorted set of `pairs` (members distinct), in the encoding they call for.
    pub fn from_pairs<'a>(pairs: impl Iterator<Item = (f64, &'a [u8])> + Clone, encodings: &Encodings) -> ZSet {
        let count = pairs.clone().count();
        let packs = count <= encodings.zset_max_listpack_entries
            && pairs.clone().all(|(_, m)| m.len() <= encodings.zset_max_listpack_value);
        let mut zset = if packs {
            ZSet::default()
        } else {
            ZSet::Skip(SkipList::default())
        };
        for (score, member) in pairs {
            zset.insert(member, score, encodings);
        }
        zset
    }

    /// Members.
    pub fn len(&self) -> usize {
        match self {
            ZSet::Pack(pack) => pack.len() / 2,
            ZSet::Skip(list) => list.len(),
        }
    }

    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's name for how it is held.
    pub fn encoding(&self) -> &'static str {
        match self {
            ZSet::Pack(_) => "listpack",
            ZSet::Skip(_) => "skiplist",
        }
    }

    /// Bytes it holds in memory, estimated.
    pub fn memory_bytes(&self) -> usize {
        match self {
            ZSet::Pack(pack) => pack.byte_len(),
            ZSet::Skip(list) => list.memory_bytes(),
        }
    }

    /// The rank of `member` in a packed set, and its score.
    fn packed_find(pack: &Pack, member: &[u8]) -> Option<(usize, f64)> {
        let mut entries = pack.iter();
        let mut rank = 0;
        while let (Some(m), Some(score)) = (entries.next(), entries.next()) {
            if m == member {
                return Some((rank, score_of(score)));
            }
            rank += 1;
        }
        None
    }

    /// A member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Pack(pack) => ZSet::packed_find(pack, member).map(|(_, score)| score),
            ZSet::Skip(list) => list.score(member),
        }
    }

    /// A member's rank (0: the lowest score).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        match self {
            ZSet::Pack(pack) => ZSet::packed_find(pack, member).map(|(rank, _)| rank),
            ZSet::Skip(list) => list.rank(member),
        }
    }

    /// Sets a member's score; its old score if it had one. Moves to the skip list once
    /// packed no longer fits `encodings`.
    pub fn insert(&mut self, member: &[u8], score: f64, encodings: &Encodings) -> Option<f64> {
        if let ZSet::Pack(pack) = self {
            let old = ZSet::packed_find(pack, member).map(|(rank, old)| {
                pack.remove(2 * rank);
                pack.remove(2 * rank);
                old
            });
            if pack.len() / 2 < encodings.zset_max_listpack_entries && member.len() <= encodings.zset_max_listpack_value
            {
                let mut entries = pack.iter();
                let mut at = 0;
                while let (Some(m), Some(s)) = (entries.next(), entries.next()) {
                    if order((score_of(s), m), (score, member)) == Ordering::Greater {
                        break;
                    }
                    at += 1;
                }
                pack.insert(2 * at, member);
                pack.insert(2 * at + 1, &score.to_le_bytes());
                return old;
            }
            let mut list = SkipList::default();
            let mut entries = pack.iter();
            while let (Some(m), Some(s)) = (entries.next(), entries.next()) {
                list.insert(m, score_of(s));
            }
            list.insert(member, score);
            *self = ZSet::Skip(list);
            return old;
        }
        let ZSet::Skip(list) = self else {
            unreachable!("handled above")
        };
        list.insert(member, score)
    }

    /// Removes a member; its score if it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Pack(pack) => {
                let (rank, score) = ZSet::packed_find(pack, member)?;
                pack.remove(2 * rank);
                pack.remove(2 * rank);
                Some(score)
            }
            ZSet::Skip(list) => list.remove(member),
        }
    }

    /// (score, member) at `rank`.
    pub fn at(&self, rank: usize) -> Option<(f64, &[u8])> {
        match self {
            ZSet::Pack(pack) => {
                let mut entries = pack.iter_from(2 * rank);
                let member = entries.next()?;
                Some((score_of(entries.next()?), member))
            }
            ZSet::Skip(list) => list.at(rank),
        }
    }

    /// How many members come before the first one for which `before` is false, where
    /// `before` holds for a prefix of the order (a score or lex bound): a rank, found in
    /// O(log n) in a skip list.
    pub fn count_before(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        match self {
            ZSet::Pack(pack) => {
                let mut entries = pack.iter();
                let mut count = 0;
                while let (Some(m), Some(s)) = (entries.next(), entries.next()) {
                    if !before(score_of(s), m) {
                        break;
                    }
                    count += 1;
                }
                count
            }
            ZSet::Skip(list) => list.count_before(before),
        }
    }

    /// One step of ZSCAN from `cursor` (0: the start), visiting about `count` members:
    /// (score, member) visited and the next cursor (0: done). A packed set is visited
    /// whole, as Redis does; a skip list by its nodes' arena slots, which a member keeps
    /// for as long as it is in the set, so one present for the whole scan is returned.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(f64, &[u8])>) {
        match self {
            ZSet::Pack(_) => (0, self.iter().collect()),
            ZSet::Skip(list) => list.scan(cursor, count),
        }
    }

    /// (score, member) from the lowest.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, false)
    }

    /// (score, member) from `rank` on, towards the highest (or the lowest, `rev`).
    pub fn iter_from(&self, rank: usize, rev: bool) -> Iter<'_> {
        match self {
            ZSet::Pack(pack) if rev => Iter::PackRev(pack.iter_until(2 * (rank + 1))),
            ZSet::Pack(pack) => Iter::Pack(pack.iter_from(2 * rank)),
            ZSet::Skip(list) => Iter::Skip(list.iter_from(rank, rev)),
        }
    }
}

/// A run of a sorted set's members.
pub enum Iter<'a> {
    /// Of a packed set, upwards.
    Pack(crate::pack::Iter<'a>),
    /// Of a packed set, downwards.
    PackRev(crate::pack::Iter<'a>),
    /// Of a skip list.
    Skip(skiplist::Iter<'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (f64, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Pack(entries) => {
                let member = entries.next()?;
                Some((score_of(entries.next()?), member))
            }
            Iter::PackRev(entries) => {
                let score = entries.next_back()?;
                Some((score_of(score), entries.next_back()?))
            }
            Iter::Skip(nodes) => nodes.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::encodings::DEFAULT_ENCODINGS;

    proptest! {
        /// Packed or not, a sorted set answers the same, and moves to the skip list past
        /// its thresholds.
        #[test]
        fn both_encodings_agree(ops in proptest::collection::vec((any::<bool>(), 0u8..30, -5i32..5), 0..200)) {
            let small = Encodings { zset_max_listpack_entries: 8, ..DEFAULT_ENCODINGS };
            let mut zset = ZSet::default();
            let mut skip = ZSet::Skip(SkipList::default());
            for (insert, member, score) in ops {
                let member = [member];
                if insert {
                    prop_assert_eq!(zset.insert(&member, score.into(), &small), skip.insert(&member, score.into(), &small));
                } else {
                    prop_assert_eq!(zset.remove(&member), skip.remove(&member));
                }
                if zset.len() > 8 {
                    prop_assert_eq!(zset.encoding(), "skiplist");
                }
                prop_assert!(zset.iter().eq(skip.iter()));
                for rank in 0..zset.len() {
                    prop_assert_eq!(zset.at(rank), skip.at(rank));
                    prop_assert!(zset.iter_from(rank, true).eq(skip.iter_from(rank, true)));
                    prop_assert!(zset.iter_from(rank, false).eq(skip.iter_from(rank, false)));
                    let (_, m) = zset.at(rank).unwrap();
                    prop_assert_eq!(zset.rank(m), Some(rank));
                }
                prop_assert_eq!(zset.count_before(|s, _| s < 0.0), skip.count_before(|s, _| s < 0.0));
            }
        }
    }

    #[test]
    fn a_long_member_starts_a_skip_list() {
        let small = Encodings {
            zset_max_listpack_value: 3,
            ..DEFAULT_ENCODINGS
        };
        assert_eq!(ZSet::for_member(b"long", &small).encoding(), "skiplist");
        let mut zset = ZSet::for_member(b"a", &small);
        zset.insert(b"a", 1.0, &small);
        assert_eq!(zset.encoding(), "listpack");
        zset.insert(b"long", 2.0, &small);
        assert_eq!(zset.encoding(), "skiplist");
        assert_eq!(zset.rank(b"long"), Some(1));
    }
}
