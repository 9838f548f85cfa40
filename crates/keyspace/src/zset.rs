//! A sorted set: members ordered by (score, member bytes), as Redis orders them, with a
//! score per member. The order is a sorted vector (a rank is a binary search); the scores
//! are a hash map. Scores are never NaN (the commands refuse it).

use std::cmp::Ordering;
use std::collections::HashMap;

use bytes::Bytes;

use crate::value::Hasher;

/// A sorted set.
#[derive(Clone, Debug, Default)]
pub struct ZSet {
    ordered: Vec<(f64, Bytes)>,
    scores: HashMap<Bytes, f64, Hasher>,
}

impl PartialEq for ZSet {
    fn eq(&self, other: &ZSet) -> bool {
        self.ordered == other.ordered
    }
}

fn order(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

impl ZSet {
    /// Members.
    pub fn len(&self) -> usize {
        self.ordered.len()
    }

    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }

    /// (score, member) in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (f64, &Bytes)> + ExactSizeIterator {
        self.ordered.iter().map(|(score, member)| (*score, member))
    }

    /// The entry at rank `rank` (0: the lowest).
    pub fn at(&self, rank: usize) -> Option<(f64, &Bytes)> {
        self.ordered.get(rank).map(|(score, member)| (*score, member))
    }

    /// A member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    fn position(&self, score: f64, member: &[u8]) -> Result<usize, usize> {
        self.ordered.binary_search_by(|(s, m)| order((*s, m), (score, member)))
    }

    /// A member's rank (0: the lowest score).
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        self.position(score, member).ok()
    }

    /// Sets a member's score; its old score if it had one.
    pub fn insert(&mut self, member: Bytes, score: f64) -> Option<f64> {
        let old = self.remove(&member);
        let at = self.position(score, &member).unwrap_or_else(|at| at);
        self.ordered.insert(at, (score, member.clone()));
        self.scores.insert(member, score);
        old
    }

    /// Removes a member; its score if it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = self.scores.remove(member)?;
        if let Ok(at) = self.position(score, member) {
            self.ordered.remove(at);
        }
        Some(score)
    }

    /// Removes the members of ranks `start..=end` (in range); how many.
    pub fn remove_ranks(&mut self, start: usize, end: usize) -> usize {
        if start > end || start >= self.ordered.len() {
            return 0;
        }
        let end = end.min(self.ordered.len() - 1);
        for (_, member) in self.ordered.drain(start..=end) {
            self.scores.remove(&member);
        }
        end - start + 1
    }

    /// The first rank whose score is past `min` (`>= min`, or `> min` if `exclusive`).
    pub fn first_rank_from(&self, min: f64, exclusive: bool) -> usize {
        self.ordered
            .partition_point(|(score, _)| if exclusive { *score <= min } else { *score < min })
    }

    /// The first rank whose score is past `max` (`> max`, or `>= max` if `exclusive`).
    pub fn first_rank_after(&self, max: f64, exclusive: bool) -> usize {
        self.ordered
            .partition_point(|(score, _)| if exclusive { *score < max } else { *score <= max })
    }

    /// The first rank whose member is at or past `bound` in byte order (only meaningful when
    /// all scores are equal, as BYLEX requires).
    pub fn first_rank_lex(&self, bound: &[u8], exclusive: bool) -> usize {
        self.ordered.partition_point(|(_, member)| {
            if exclusive {
                &member[..] <= bound
            } else {
                &member[..] < bound
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    #[test]
    fn members_order_by_score_then_bytes_and_move_on_update() {
        let mut zset = ZSet::default();
        assert_eq!(zset.insert(b("b"), 2.0), None);
        zset.insert(b("a"), 2.0);
        zset.insert(b("c"), 1.0);
        let order: Vec<&Bytes> = zset.iter().map(|(_, m)| m).collect();
        assert_eq!(order, [&b("c"), &b("a"), &b("b")]);
        assert_eq!(zset.insert(b("c"), 3.0), Some(1.0));
        assert_eq!(zset.rank(b"c"), Some(2));
        assert_eq!(zset.rank(b"a"), Some(0));
        assert_eq!(zset.len(), 3);
        assert_eq!(zset.remove(b"a"), Some(2.0));
        assert_eq!(zset.remove(b"a"), None);
        assert_eq!(zset.at(0), Some((2.0, &b("b"))));
    }

    #[test]
    fn score_bounds_find_their_ranks() {
        let mut zset = ZSet::default();
        for (i, member) in ["a", "b", "c", "d"].iter().enumerate() {
            zset.insert(b(member), i as f64);
        }
        assert_eq!(zset.first_rank_from(1.0, false), 1);
        assert_eq!(zset.first_rank_from(1.0, true), 2);
        assert_eq!(zset.first_rank_after(2.0, false), 3);
        assert_eq!(zset.first_rank_after(2.0, true), 2);
        assert_eq!(zset.first_rank_from(f64::NEG_INFINITY, false), 0);
        assert_eq!(zset.remove_ranks(1, 10), 3);
        assert_eq!(zset.len(), 1);
        assert_eq!(zset.score(b"d"), None);
    }
}
