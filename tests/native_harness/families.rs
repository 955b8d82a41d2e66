//! Strategies for the states and arguments of the reentrant-lock unlocks
//! and the read-write lock family, shared by every test file whose bodies
//! take them (the current Redisson releases' and older ones').

use super::*;

/// The unlock latch's PX: mostly what Redisson sends.
pub fn latch_px() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![8 => Just(s("8600")), 1 => pick(&["0", "-1", "abc", "1", ""])]
}

/// The unlock message published on release.
pub fn message() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![8 => Just(s("0")), 1 => pick(&["1", "", "hello world"])]
}

/// A read-lock owner (`<uuid>:<tid>`), sometimes a name that clashes
/// with the `mode` field.
pub fn reader() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        6 => Just(s(OWN)),
        3 => Just(s(FOREIGN)),
        1 => Just(s(OWN_OTHER_THREAD)),
        1 => pick(&["mode", ""]),
    ]
}

/// A write-lock owner (`<uuid>:<tid>:write`), sometimes a reader's name.
pub fn writer() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        6 => Just(format!("{OWN}:write").into_bytes()),
        3 => Just(format!("{FOREIGN}:write").into_bytes()),
        1 => Just(s(OWN)),
    ]
}

/// Hold counts a walk over the hash may count down from: Lua's `tonumber`
/// spellings, but never so large that the Lua run would not end.
pub fn walked_count() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        12 => (1i64..5).prop_map(|n| n.to_string().into_bytes()),
        2 => pick(&["0", "-2", "abc", "2.5", " 3", "0x3", "1e1", "", "nan", "-inf", "3 "]),
    ]
}

/// Counts only incremented (acquire): large ones too, where `%.14g` shows.
pub fn acquired_count() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        8 => walked_count(),
        1 => pick(&["99999999999999", "999999999999999", "9223372036854775806", "9223372036854775807"]),
    ]
}

/// A read-write lock hash: read mode, write mode with readers inside, no
/// mode, or an unknown one.
pub fn rw_hash(count: impl Strategy<Value = Vec<u8>> + Clone + 'static) -> impl Strategy<Value = Val> + Clone {
    let holders = proptest::collection::vec((reader(), count.clone()), 1..3);
    let mode = |m: &str| (s("mode"), s(m));
    prop_oneof![
        4 => holders.clone().prop_map(move |h| Val::Hash([vec![mode("read")], h].concat())),
        4 => (writer(), count, proptest::collection::vec((reader(), walked_count()), 0..2))
            .prop_map(move |(w, c, readers)| Val::Hash([vec![mode("write"), (w, c)], readers].concat())),
        1 => holders.clone().prop_map(Val::Hash),
        1 => holders.prop_map(move |h| Val::Hash([vec![mode("bogus")], h].concat())),
    ]
}

/// The read-write lock at `key`: absent, a lock hash, or a wrong type.
pub fn rw_state(key: &'static str, count: impl Strategy<Value = Vec<u8>> + Clone + 'static) -> impl Strategy<Value = KeySpec> + Clone {
    let val = prop_oneof![
        3 => Just(None),
        8 => rw_hash(count).prop_map(Some),
        1 => wrong_type().prop_map(Some),
    ];
    (val, ttl()).prop_map(move |(val, ttl_ms)| KeySpec {
        key: key.into(),
        val,
        ttl_ms,
    })
}

/// `<prefix>:<owner>:rwlock_timeout:<n>` keys, some with a TTL.
pub fn timeout_keys(prefix: &'static str) -> impl Strategy<Value = Vec<KeySpec>> + Clone {
    let one = (
        proptest::sample::select(&[OWN, FOREIGN, OWN_OTHER_THREAD][..]),
        1u32..4,
        prop_oneof![1 => Just(None), 4 => (1u64..120_000).prop_map(Some)],
    );
    proptest::collection::vec(one, 0..5).prop_map(move |keys| {
        let mut specs: Vec<KeySpec> = Vec::new();
        for (owner, n, ttl_ms) in keys {
            let key = format!("{prefix}:{owner}:rwlock_timeout:{n}");
            if !specs.iter().any(|k| k.key == key) {
                specs.push(KeySpec {
                    key,
                    val: Some(Val::Str(s("1"))),
                    ttl_ms,
                });
            }
        }
        specs
    })
}

/// `{rw}:<owner>:rwlock_timeout`, the timeout-key prefix of one owner.
pub fn owner_prefix(owner: &[u8]) -> Vec<u8> {
    [RW_PREFIX.as_bytes(), b":", owner, b":rwlock_timeout"].concat()
}
