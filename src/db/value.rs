//! The six value types and the WRONGTYPE check that guards them.
//!
//! Hashes are packed while small (see [`super::hash`]). Sets are
//! `IndexSet`s so SPOP / SRANDMEMBER can pick by index in O(1). Streams
//! live in [`super::stream`]. The large
//! aggregates are boxed so a `Value` stays 40 bytes: every key pays for
//! the largest variant.

use std::collections::VecDeque;

use bytes::Bytes;
use indexmap::IndexSet;

use super::stream::Stream;
use super::zset::ZSet;
use crate::error::{CmdError, CmdResult};

pub type Hasher = ahash::RandomState;
pub use super::hash::Hash;
pub type List = VecDeque<Bytes>;

/// A set: its members, and the encoding Redis 7.0 would give it. Redis
/// keeps a set of integers (`string2ll` forms) as an intset while it has
/// at most `set-max-intset-entries` members, and turns it into a hash
/// table for good at the first member that is not an integer or past
/// that size; OBJECT ENCODING and the order of replies (an intset is
/// sorted) show which. Writers call [`Set::note_added`] (or
/// [`Set::settle`] for a set built at once) with the limit in force.
#[derive(Debug, Clone, Default)]
pub struct Set {
    members: IndexSet<Bytes, Hasher>,
    hashtable: bool,
}

impl std::ops::Deref for Set {
    type Target = IndexSet<Bytes, Hasher>;
    fn deref(&self) -> &Self::Target {
        &self.members
    }
}

impl std::ops::DerefMut for Set {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.members
    }
}

impl FromIterator<Bytes> for Set {
    fn from_iter<I: IntoIterator<Item = Bytes>>(iter: I) -> Self {
        Set {
            members: iter.into_iter().collect(),
            hashtable: false,
        }
    }
}

impl IntoIterator for Set {
    type Item = Bytes;
    type IntoIter = indexmap::set::IntoIter<Bytes>;
    fn into_iter(self) -> Self::IntoIter {
        self.members.into_iter()
    }
}

impl<'a> IntoIterator for &'a Set {
    type Item = &'a Bytes;
    type IntoIter = indexmap::set::Iter<'a, Bytes>;
    fn into_iter(self) -> Self::IntoIter {
        self.members.iter()
    }
}

impl Set {
    pub fn with_capacity(n: usize) -> Set {
        Set {
            members: IndexSet::with_capacity_and_hasher(n, Hasher::default()),
            hashtable: false,
        }
    }

    /// Whether Redis would hold this set as an intset.
    pub fn is_intset(&self) -> bool {
        !self.hashtable && self.members.iter().all(|m| crate::numfmt::parse_i64(m).is_some())
    }

    /// `member` was just added (Redis's `setTypeAdd`): a member that is
    /// not an integer, or one past `max_intset` members, makes the set a
    /// hash table.
    pub fn note_added(&mut self, member: &[u8], max_intset: usize) {
        if !self.hashtable && (self.members.len() > max_intset || crate::numfmt::parse_i64(member).is_none()) {
            self.hashtable = true;
        }
    }

    /// The encoding of a set built at once (the STORE forms, RESTORE):
    /// an intset if every member is an integer and they are at most
    /// `max_intset`.
    pub fn settle(&mut self, max_intset: usize) {
        self.hashtable = self.members.len() > max_intset || self.members.iter().any(|m| crate::numfmt::parse_i64(m).is_none());
    }
}

#[derive(Debug, Clone)]
pub enum Value {
    Str(Bytes),
    Hash(Hash),
    List(Box<List>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

/// A client's argument as something to keep (a value, a channel name, a
/// watched key): its own allocation. The arguments of a small request are
/// slices of one copy of the whole request (`server::parser`), which a
/// kept slice would keep alive; an argument as long as a small request
/// already has its own.
pub fn owned(arg: &Bytes) -> Bytes {
    if arg.len() < crate::request::SMALL_REQUEST {
        Bytes::copy_from_slice(arg)
    } else {
        arg.clone()
    }
}

impl Value {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::Stream(_) => "stream",
        }
    }

    pub fn new_hash() -> Value {
        Value::Hash(Hash::default())
    }

    pub fn new_set() -> Value {
        Value::Set(Box::default())
    }

    /// True for an aggregate that has become empty and must be deleted.
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
            // A stream stays when emptied (XDEL, XTRIM), as in Redis.
            Value::Stream(_) => false,
        }
    }
}

macro_rules! typed_access {
    ($as_ref:ident, $as_mut:ident, $variant:ident, $ty:ty) => {
        impl Value {
            pub fn $as_ref(&self) -> CmdResult<&$ty> {
                match self {
                    Value::$variant(v) => Ok(&*v),
                    _ => Err(CmdError::wrong_type()),
                }
            }

            pub fn $as_mut(&mut self) -> CmdResult<&mut $ty> {
                match self {
                    Value::$variant(v) => Ok(&mut *v),
                    _ => Err(CmdError::wrong_type()),
                }
            }
        }
    };
}

typed_access!(as_str, as_str_mut, Str, Bytes);
typed_access!(as_hash, as_hash_mut, Hash, Hash);
typed_access!(as_list, as_list_mut, List, List);
typed_access!(as_set, as_set_mut, Set, Set);
typed_access!(as_zset, as_zset_mut, ZSet, ZSet);
typed_access!(as_stream, as_stream_mut, Stream, Stream);

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_is_40_bytes() {
        assert_eq!(std::mem::size_of::<super::Value>(), 40);
    }
}
