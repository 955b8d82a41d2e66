//! Sorted sets: a member -> score map plus an ordered index of
//! (score, member), ordered as Redis orders them (by score, ties by member
//! bytes).
//!
//! Rank queries walk the ordered index, so ZRANK and rank ranges cost
//! O(rank); Redisson's fair-lock queues and timeouts are small, and
//! score-range and pop operations, the ones locks use, are O(log n).

use std::cmp::Ordering;
use std::collections::BTreeSet;

use bytes::Bytes;

use super::value::Hasher;

/// A score with the total order Redis uses: NaN never gets in, and -0 equals 0.
#[derive(Debug, Clone, Copy)]
pub struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

#[derive(Debug, Clone, Default)]
pub struct ZSet {
    scores: std::collections::HashMap<Bytes, f64, Hasher>,
    order: BTreeSet<(Score, Bytes)>,
}

impl ZSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets a member's score; returns true if the member is new.
    pub fn insert(&mut self, member: Bytes, score: f64) -> bool {
        match self.scores.insert(member.clone(), score) {
            Some(old) => {
                if old.to_bits() != score.to_bits() {
                    self.order.remove(&(Score(old), member.clone()));
                    self.order.insert((Score(score), member));
                }
                false
            }
            None => {
                self.order.insert((Score(score), member));
                true
            }
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove_entry(member) {
            Some((m, s)) => {
                self.order.remove(&(Score(s), m));
                true
            }
            None => false,
        }
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Bytes, f64)> {
        self.order.iter().map(|(s, m)| (m, s.0))
    }

    /// Members with a score in the range, ascending.
    pub fn range_by_score(&self, min: ScoreBound, max: ScoreBound) -> impl Iterator<Item = (&Bytes, f64)> {
        let start = (Score(min.value), Bytes::new());
        self.order
            .range(start..)
            .skip_while(move |(s, _)| !min.admits_low(s.0))
            .take_while(move |(s, _)| max.admits_high(s.0))
            .map(|(s, m)| (m, s.0))
    }

    /// Members with a score in the range, descending.
    pub fn range_by_score_rev(&self, min: ScoreBound, max: ScoreBound) -> impl Iterator<Item = (&Bytes, f64)> {
        use std::ops::Bound;
        let upper = if max.value == f64::INFINITY {
            Bound::Unbounded
        } else {
            Bound::Excluded((Score(max.value.next_up()), Bytes::new()))
        };
        self.order
            .range((Bound::Unbounded, upper))
            .rev()
            .skip_while(move |(s, _)| !max.admits_high(s.0))
            .take_while(move |(s, _)| min.admits_low(s.0))
            .map(|(s, m)| (m, s.0))
    }

    /// The 0-based rank of a member in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let s = self.score(member)?;
        let key = (Score(s), Bytes::copy_from_slice(member));
        Some(self.order.range(..key).count())
    }

    pub fn pop_first(&mut self) -> Option<(Bytes, f64)> {
        let (s, m) = self.order.pop_first()?;
        self.scores.remove(&m);
        Some((m, s.0))
    }

    pub fn pop_last(&mut self) -> Option<(Bytes, f64)> {
        let (s, m) = self.order.pop_last()?;
        self.scores.remove(&m);
        Some((m, s.0))
    }
}

/// One end of a score range: a value and whether it is exclusive (`(1.5`).
#[derive(Debug, Clone, Copy)]
pub struct ScoreBound {
    pub value: f64,
    pub exclusive: bool,
}

impl ScoreBound {
    pub fn admits_low(&self, s: f64) -> bool {
        if self.exclusive { s > self.value } else { s >= self.value }
    }

    pub fn admits_high(&self, s: f64) -> bool {
        if self.exclusive { s < self.value } else { s <= self.value }
    }
}
