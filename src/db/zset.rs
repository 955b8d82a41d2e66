//! Sorted sets: a member -> score map plus an ordered index of
//! (score, member), ordered as Redis orders them (by score, ties by member
//! bytes, -0 equal to 0), and the score and lex ranges that select from it.
//!
//! Rank queries walk the ordered index, so ZRANK and rank ranges cost
//! O(rank); Redisson's fair-lock queues and timeouts are small, and
//! score-range and pop operations, the ones locks use, are O(log n + k).
//!
//! The member map is an `IndexMap` for the same reasons the keyspace is one
//! (see `db/mod.rs`): random members by index in O(1) for ZRANDMEMBER, and
//! a ZSCAN cursor that walks indexes downwards with Redis's guarantee.
//!
//! Redis keeps small sorted sets as a listpack and converts them to a
//! skiplist for good once they outgrow `zset-max-listpack-entries` members
//! or a member outgrows `zset-max-listpack-value` bytes. Clients can see
//! which: ZSCAN answers a listpack in one call, in order, and a listpack
//! stores scores as text, which turns -0 into 0 (a skiplist keeps -0). So
//! the set remembers which encoding Redis would have chosen.
//!
//! Lex ranges follow Redis's listpack walk (the first member at or after
//! `min` in set order, then onwards while at most `max`), which is what the
//! documented case — every member with the same score — needs; for that
//! case the walk starts with a seek, so it costs O(log n + k).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::ops::Bound;

use bytes::Bytes;
use indexmap::IndexMap;

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

/// The two `zset-max-listpack-*` parameters that decide the encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListpackLimits {
    pub max_entries: usize,
    pub max_value: usize,
}

impl Default for ListpackLimits {
    /// Redis's defaults: 128 entries, 64 bytes.
    fn default() -> Self {
        ListpackLimits {
            max_entries: 128,
            max_value: 64,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ZSet {
    scores: IndexMap<Bytes, f64, Hasher>,
    order: BTreeSet<(Score, Bytes)>,
    /// True once Redis would have converted this set to a skiplist.
    skiplist: bool,
}

impl ZSet {
    /// An empty set encoded as Redis 7.0's ZADD creates one for a first
    /// member of `member_len` bytes.
    pub fn for_first_member(member_len: usize, limits: ListpackLimits) -> ZSet {
        ZSet {
            skiplist: limits.max_entries == 0 || member_len > limits.max_value,
            ..ZSet::default()
        }
    }

    /// An empty set built as a skiplist, as the store commands build their
    /// results before [`ZSet::compact_if_fits`].
    pub fn new_skiplist() -> ZSet {
        ZSet {
            skiplist: true,
            ..ZSet::default()
        }
    }

    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// True while Redis would hold this set as a listpack.
    pub fn is_listpack(&self) -> bool {
        !self.skiplist
    }

    /// Converts a freshly built result to a listpack if it fits, as
    /// Redis's `zsetConvertToListpackIfNeeded` does for stored results.
    pub fn compact_if_fits(&mut self, limits: ListpackLimits) {
        let fits = self.len() <= limits.max_entries && self.scores.keys().all(|m| m.len() <= limits.max_value);
        if fits && self.skiplist {
            self.skiplist = false;
            let negative_zeros: Vec<Bytes> = self
                .scores
                .iter()
                .filter(|(_, s)| **s == 0.0 && s.is_sign_negative())
                .map(|(m, _)| m.clone())
                .collect();
            for m in negative_zeros {
                self.order.remove(&(Score(-0.0), m.clone()));
                self.order.insert((Score(0.0), m.clone()));
                self.scores.insert(m, 0.0);
            }
        }
    }

    /// Converts the set to a skiplist for good, as SORT's `zsetConvert`
    /// does to the set it sorts.
    pub fn convert_to_skiplist(&mut self) {
        self.skiplist = true;
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.scores.contains_key(member)
    }

    /// Sets a member's score with Redis's default listpack limits;
    /// returns true if the member is new.
    pub fn insert(&mut self, member: Bytes, score: f64) -> bool {
        self.insert_with(member, score, ListpackLimits::default())
    }

    /// Sets a member's score; returns true if the member is new. A score
    /// equal to the current one (`-0` and `0` are equal) leaves the stored
    /// score as it is, as Redis does.
    pub fn insert_with(&mut self, member: Bytes, score: f64, limits: ListpackLimits) -> bool {
        if let Some(&old) = self.scores.get(&member) {
            if old == score {
                return false;
            }
            let score = self.stored(score);
            self.order.remove(&(Score(old), member.clone()));
            self.order.insert((Score(score), member.clone()));
            self.scores.insert(member, score);
            return false;
        }
        if self.len() + 1 > limits.max_entries || member.len() > limits.max_value {
            self.skiplist = true;
        }
        let score = self.stored(score);
        self.order.insert((Score(score), member.clone()));
        self.scores.insert(member, score);
        true
    }

    /// The score as the current encoding stores it: a listpack writes
    /// scores as text and reads `-0` back as 0.
    fn stored(&self, score: f64) -> f64 {
        if !self.skiplist && score == 0.0 { 0.0 } else { score }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.swap_remove_entry(member) {
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

    /// The member at `index` in the member map (not in score order): for
    /// random picks.
    pub fn get_index(&self, index: usize) -> Option<(&Bytes, f64)> {
        self.scores.get_index(index).map(|(m, s)| (m, *s))
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

    /// How many members have a score in the range.
    pub fn count_by_score(&self, range: &ScoreRange) -> usize {
        if range.is_empty() {
            return 0;
        }
        self.range_by_score(range.min, range.max).count()
    }

    /// Redis's `zslIsInLexRange`: false when no member can be in range.
    fn may_hold_lex(&self, range: &LexRange) -> bool {
        if range.is_empty() {
            return false;
        }
        match (self.order.first(), self.order.last()) {
            (Some((_, first)), Some((_, last))) => range.min.admits_low(last) && range.max.admits_high(first),
            _ => false,
        }
    }

    /// Members in the lex range, in set order.
    pub fn range_by_lex<'a>(&'a self, range: &'a LexRange) -> Box<dyn Iterator<Item = (&'a Bytes, f64)> + 'a> {
        if !self.may_hold_lex(range) {
            return Box::new(std::iter::empty());
        }
        // Members of the lowest score sort by bytes, so seeking to `min`
        // among them skips only members below it.
        let first_score = self.order.first().map_or(Score(0.0), |(s, _)| *s);
        let start = match &range.min {
            LexBound::Inclusive(m) | LexBound::Exclusive(m) => Bound::Included((first_score, m.clone())),
            LexBound::NegInf | LexBound::PosInf => Bound::Unbounded,
        };
        Box::new(
            self.order
                .range((start, Bound::Unbounded))
                .skip_while(|(_, m)| !range.min.admits_low(m))
                .take_while(|(_, m)| range.max.admits_high(m))
                .map(|(s, m)| (m, s.0)),
        )
    }

    /// Members in the lex range, in reverse set order.
    pub fn range_by_lex_rev<'a>(&'a self, range: &'a LexRange) -> Box<dyn Iterator<Item = (&'a Bytes, f64)> + 'a> {
        if !self.may_hold_lex(range) {
            return Box::new(std::iter::empty());
        }
        let last_score = self.order.last().map_or(Score(0.0), |(s, _)| *s);
        let end = match &range.max {
            LexBound::Inclusive(m) | LexBound::Exclusive(m) => Bound::Included((last_score, m.clone())),
            LexBound::NegInf | LexBound::PosInf => Bound::Unbounded,
        };
        Box::new(
            self.order
                .range((Bound::Unbounded, end))
                .rev()
                .skip_while(|(_, m)| !range.max.admits_high(m))
                .take_while(|(_, m)| range.min.admits_low(m))
                .map(|(s, m)| (m, s.0)),
        )
    }

    /// The 0-based rank of a member in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let s = self.score(member)?;
        let key = (Score(s), Bytes::copy_from_slice(member));
        Some(self.order.range(..key).count())
    }

    pub fn pop_first(&mut self) -> Option<(Bytes, f64)> {
        let (s, m) = self.order.pop_first()?;
        self.scores.swap_remove(&m);
        Some((m, s.0))
    }

    pub fn pop_last(&mut self) -> Option<(Bytes, f64)> {
        let (s, m) = self.order.pop_last()?;
        self.scores.swap_remove(&m);
        Some((m, s.0))
    }

    /// One ZSCAN step over a skiplist-encoded set: up to `count` members
    /// from the cursor downwards by map index, and the next cursor (0 when
    /// done). A member present for the whole scan is returned at least once.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(&Bytes, f64)>) {
        let len = self.scores.len() as u64;
        let start = if cursor == 0 || cursor > len { len } else { cursor };
        let end = start.saturating_sub(count as u64);
        let found = (end..start).rev().filter_map(|i| self.get_index(i as usize)).collect();
        (end, found)
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

    /// Parses `1.5`, `(1.5`, `-inf`, `+inf` as Redis's `zslParseRange`
    /// does: C's `strtod` over the whole text.
    pub fn parse(raw: &[u8]) -> Option<ScoreBound> {
        match raw.first() {
            Some(b'(') => Some(ScoreBound {
                value: strtod_whole(&raw[1..])?,
                exclusive: true,
            }),
            _ => Some(ScoreBound {
                value: strtod_whole(raw)?,
                exclusive: false,
            }),
        }
    }
}

/// A score interval, `min` to `max`.
#[derive(Debug, Clone, Copy)]
pub struct ScoreRange {
    pub min: ScoreBound,
    pub max: ScoreBound,
}

impl ScoreRange {
    /// Parses a `min max` pair; None for Redis's "min or max is not a float".
    pub fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        Some(ScoreRange {
            min: ScoreBound::parse(min)?,
            max: ScoreBound::parse(max)?,
        })
    }

    /// True for a range nothing can fall in (`5 3`, `(2 2`).
    pub fn is_empty(&self) -> bool {
        self.min.value > self.max.value || (self.min.value == self.max.value && (self.min.exclusive || self.max.exclusive))
    }

    pub fn contains(&self, s: f64) -> bool {
        self.min.admits_low(s) && self.max.admits_high(s)
    }
}

/// What `strtod(s, &end)` accepts with `*end == '\0'`: leading white
/// space, decimal, hex, `inf` and overflow to infinity; NaN refused. As in
/// C, the text ends at the first NUL byte, and an empty text reads as 0.
fn strtod_whole(raw: &[u8]) -> Option<f64> {
    let text = match raw.iter().position(|&c| c == 0) {
        Some(nul) => &raw[..nul],
        None => raw,
    };
    if text.is_empty() {
        return Some(0.0);
    }
    let body = &text[text.iter().take_while(|c| is_c_space(c)).count()..];
    if body.is_empty() {
        return None;
    }
    if let Some(v) = crate::numfmt::parse_f64(body) {
        return Some(v);
    }
    // Out-of-range decimals: strtod saturates to ±inf or flushes to 0 where
    // Redis's strict float parser refuses them.
    let v: f64 = std::str::from_utf8(body).ok()?.parse().ok()?;
    if v.is_nan() { None } else { Some(v) }
}

fn is_c_space(c: &u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// One end of a lex range: `-`, `+`, `[member` or `(member`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    NegInf,
    PosInf,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

impl LexBound {
    /// Redis's `zslParseLexRangeItem`.
    pub fn parse(raw: &Bytes) -> Option<LexBound> {
        // `+` and `-` are read as C strings: a NUL may follow.
        let alone = raw.get(1).is_none_or(|&c| c == 0);
        match raw.first()? {
            b'+' if alone => Some(LexBound::PosInf),
            b'-' if alone => Some(LexBound::NegInf),
            b'(' => Some(LexBound::Exclusive(raw.slice(1..))),
            b'[' => Some(LexBound::Inclusive(raw.slice(1..))),
            _ => None,
        }
    }

    /// True if `member` is at or above this lower bound.
    pub fn admits_low(&self, member: &[u8]) -> bool {
        match self {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Inclusive(m) => member >= &m[..],
            LexBound::Exclusive(m) => member > &m[..],
        }
    }

    /// True if `member` is at or below this upper bound.
    pub fn admits_high(&self, member: &[u8]) -> bool {
        match self {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Inclusive(m) => member <= &m[..],
            LexBound::Exclusive(m) => member < &m[..],
        }
    }

    fn is_exclusive(&self) -> bool {
        !matches!(self, LexBound::Inclusive(_))
    }

    /// Orders bound values, `-` below and `+` above every member.
    fn cmp_value(&self, other: &LexBound) -> Ordering {
        fn rank(b: &LexBound) -> (u8, &[u8]) {
            match b {
                LexBound::NegInf => (0, &[]),
                LexBound::Inclusive(m) | LexBound::Exclusive(m) => (1, m),
                LexBound::PosInf => (2, &[]),
            }
        }
        rank(self).cmp(&rank(other))
    }
}

/// A lex interval, `min` to `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexRange {
    /// Parses a `min max` pair; None for Redis's "min or max not valid
    /// string range item".
    pub fn parse(min: &Bytes, max: &Bytes) -> Option<LexRange> {
        Some(LexRange {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }

    /// True for a range nothing can fall in (`[b [a`, `(a [a`, `- -`).
    pub fn is_empty(&self) -> bool {
        match self.min.cmp_value(&self.max) {
            Ordering::Greater => true,
            Ordering::Equal => self.min.is_exclusive() || self.max.is_exclusive(),
            Ordering::Less => false,
        }
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.min.admits_low(member) && self.max.admits_high(member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&'static str, f64)]) -> ZSet {
        let mut z = ZSet::default();
        for (m, s) in pairs {
            z.insert(Bytes::from_static(m.as_bytes()), *s);
        }
        z
    }

    fn members<'a>(it: impl Iterator<Item = (&'a Bytes, f64)>) -> Vec<&'a [u8]> {
        it.map(|(m, _)| &m[..]).collect()
    }

    #[test]
    fn ties_order_by_member_bytes() {
        let z = set(&[("b", 1.0), ("a", 1.0), ("c", 0.5)]);
        assert_eq!(members(z.iter()), [&b"c"[..], b"a", b"b"]);
    }

    #[test]
    fn negative_zero_is_stored_as_zero_in_a_listpack_only() {
        let mut small = ZSet::default();
        small.insert(Bytes::from_static(b"m"), -0.0);
        assert!(small.score(b"m").unwrap().is_sign_positive());
        let mut big = ZSet::new_skiplist();
        big.insert(Bytes::from_static(b"m"), -0.0);
        assert!(big.score(b"m").unwrap().is_sign_negative());
        big.insert(Bytes::from_static(b"m"), 0.0);
        assert!(big.score(b"m").unwrap().is_sign_negative(), "an equal score is not an update");
    }

    #[test]
    fn outgrowing_the_limits_converts_for_good() {
        let limits = ListpackLimits {
            max_entries: 2,
            max_value: 64,
        };
        let mut z = ZSet::for_first_member(1, limits);
        z.insert_with(Bytes::from_static(b"a"), 1.0, limits);
        z.insert_with(Bytes::from_static(b"b"), 1.0, limits);
        assert!(z.is_listpack());
        z.insert_with(Bytes::from_static(b"c"), 1.0, limits);
        z.remove(b"c");
        assert!(!z.is_listpack());
    }

    #[test]
    fn score_ranges_parse_like_strtod() {
        let p = |s: &[u8]| ScoreBound::parse(s).map(|b| (b.value, b.exclusive));
        assert_eq!(p(b"(1.5"), Some((1.5, true)));
        assert_eq!(p(b""), Some((0.0, false)));
        assert_eq!(p(b"("), Some((0.0, true)));
        assert_eq!(p(b" 1"), Some((1.0, false)));
        assert_eq!(p(b"1e999"), Some((f64::INFINITY, false)));
        assert_eq!(p(b"-Infinity"), Some((f64::NEG_INFINITY, false)));
        for bad in [&b"  "[..], b"nan", b"1 ", b"abc", b"1e"] {
            assert!(p(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn score_range_respects_exclusive_ends() {
        let z = set(&[("a", 1.0), ("b", 2.0), ("c", 3.0)]);
        let r = ScoreRange::parse(b"(1", b"3").unwrap();
        assert_eq!(members(z.range_by_score(r.min, r.max)), [&b"b"[..], b"c"]);
        assert_eq!(members(z.range_by_score_rev(r.min, r.max)), [&b"c"[..], b"b"]);
        let r = ScoreRange::parse(b"3", b"1").unwrap();
        assert!(r.is_empty());
        assert_eq!(z.count_by_score(&r), 0);
    }

    #[test]
    fn lex_ranges_select_by_member_bytes() {
        let z = set(&[("a", 0.0), ("b", 0.0), ("c", 0.0), ("d", 0.0)]);
        let r = LexRange::parse(&Bytes::from_static(b"(a"), &Bytes::from_static(b"[c")).unwrap();
        assert_eq!(members(z.range_by_lex(&r)), [&b"b"[..], b"c"]);
        assert_eq!(members(z.range_by_lex_rev(&r)), [&b"c"[..], b"b"]);
        let all = LexRange::parse(&Bytes::from_static(b"-"), &Bytes::from_static(b"+")).unwrap();
        assert_eq!(z.range_by_lex(&all).count(), 4);
        assert!(LexRange::parse(&Bytes::from_static(b"a"), &Bytes::from_static(b"+")).is_none());
        assert!(
            LexRange::parse(&Bytes::from_static(b"-"), &Bytes::from_static(b"-"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn scan_visits_every_member_once_without_changes() {
        let mut z = ZSet::new_skiplist();
        for i in 0..25u32 {
            z.insert(Bytes::from(i.to_string()), i as f64);
        }
        let mut seen = 0;
        let mut cursor = 0;
        loop {
            let (next, found) = z.scan(cursor, 10);
            seen += found.len();
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert_eq!(seen, 25);
    }
}
