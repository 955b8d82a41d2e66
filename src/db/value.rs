//! The five value types and the WRONGTYPE check that guards them.
//!
//! Hashes are `IndexMap`s so small hashes iterate in the order fields were
//! first set, as Redis's listpack encoding does; while a hash is small
//! (Redis's `hash-max-listpack-entries`, 128) deletions keep that order.
//! Sets are `IndexSet`s so SPOP / SRANDMEMBER can pick by index in O(1).

use std::collections::VecDeque;

use bytes::Bytes;
use indexmap::{IndexMap, IndexSet};

use super::zset::ZSet;
use crate::error::{CmdError, CmdResult};

pub type Hasher = ahash::RandomState;
pub type Hash = IndexMap<Bytes, Bytes, Hasher>;
pub type Set = IndexSet<Bytes, Hasher>;
pub type List = VecDeque<Bytes>;

/// Hashes up to this many fields keep insertion order across deletions.
pub const SMALL_HASH: usize = 128;

#[derive(Debug, Clone)]
pub enum Value {
    Str(Bytes),
    Hash(Hash),
    List(List),
    Set(Set),
    ZSet(ZSet),
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
        }
    }

    pub fn new_hash() -> Value {
        Value::Hash(Hash::default())
    }

    pub fn new_set() -> Value {
        Value::Set(Set::default())
    }

    /// True for an aggregate that has become empty and must be deleted.
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Value::Str(_) => false,
            Value::Hash(h) => h.is_empty(),
            Value::List(l) => l.is_empty(),
            Value::Set(s) => s.is_empty(),
            Value::ZSet(z) => z.is_empty(),
        }
    }
}

macro_rules! typed_access {
    ($as_ref:ident, $as_mut:ident, $variant:ident, $ty:ty) => {
        impl Value {
            pub fn $as_ref(&self) -> CmdResult<&$ty> {
                match self {
                    Value::$variant(v) => Ok(v),
                    _ => Err(CmdError::wrong_type()),
                }
            }

            pub fn $as_mut(&mut self) -> CmdResult<&mut $ty> {
                match self {
                    Value::$variant(v) => Ok(v),
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

/// Removes a field from a hash, keeping insertion order while it is small.
pub fn hash_remove(h: &mut Hash, field: &[u8]) -> Option<Bytes> {
    if h.len() <= SMALL_HASH {
        h.shift_remove(field)
    } else {
        h.swap_remove(field)
    }
}
