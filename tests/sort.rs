//! SORT and SORT_RO over TCP: a few behaviours spelled out with the
//! `redis` crate, and a differential property test that builds random
//! lists, sets and sorted sets with weight keys and hashes, runs random
//! SORT / SORT_RO lines (BY patterns, hash fields and constants, GET,
//! LIMIT windows, ASC/DESC, ALPHA, STORE read back with LRANGE) against
//! keylock and a real redis-server, and requires the same raw replies.
//!
//! Only orders Redis fixes are compared: a set's or sorted set's elements
//! that tie under ALPHA with a BY pattern keep Redis's hash-table order,
//! which no client can rely on, so those combinations run on lists only,
//! and a set is not read unsorted (`BY nosort`).
//! Weights stay in a double's range (see the README on SORT and errno).
//! `KEYLOCK_SORT_CASES` sets the number of random cases (default
//! [`CASES`]). Without redis-server on PATH the differential test skips
//! with a message, unless KEYLOCK_REQUIRE_REDIS=1 makes that a failure.

mod common;
use common::*;

use proptest::prelude::*;

const CASES: u32 = 200;

#[test]
fn sort_orders_numbers_numerically_and_alpha_by_bytes() {
    let s = start();
    let mut c = conn(&s);
    let _: i64 = q(&mut c, &["RPUSH", "l", "10", "9", "100"]);
    let numeric: Vec<String> = q(&mut c, &["SORT", "l"]);
    assert_eq!(numeric, ["9", "10", "100"]);
    let alpha: Vec<String> = q(&mut c, &["SORT", "l", "ALPHA"]);
    assert_eq!(alpha, ["10", "100", "9"]);
}

#[test]
fn sort_by_hash_field_and_get_patterns() {
    let s = start();
    let mut c = conn(&s);
    let _: i64 = q(&mut c, &["RPUSH", "ids", "1", "2", "3"]);
    for (id, w, name) in [("1", "30", "a"), ("2", "10", "b"), ("3", "20", "c")] {
        let _: i64 = q(&mut c, &["HSET", &format!("h_{id}"), "w", w, "name", name]);
    }
    let got: Vec<String> = q(&mut c, &["SORT", "ids", "BY", "h_*->w", "GET", "#", "GET", "h_*->name"]);
    assert_eq!(got, ["2", "b", "3", "c", "1", "a"]);
}

#[test]
fn sort_store_replaces_the_destination_with_a_list() {
    let s = start();
    let mut c = conn(&s);
    let _: i64 = q(&mut c, &["RPUSH", "l", "3", "1", "2"]);
    let _: () = q(&mut c, &["SET", "dst", "v"]);
    let n: i64 = q(&mut c, &["SORT", "l", "STORE", "dst"]);
    assert_eq!(n, 3);
    let stored: Vec<String> = q(&mut c, &["LRANGE", "dst", "0", "-1"]);
    assert_eq!(stored, ["1", "2", "3"]);
}

#[test]
fn sort_refuses_weights_that_are_not_numbers() {
    let s = start();
    let mut c = conn(&s);
    let _: i64 = q(&mut c, &["RPUSH", "l", "1", "x"]);
    assert_eq!(
        q_err(&mut c, &["SORT", "l"]),
        "ERR One or more scores can't be converted into double"
    );
}

#[test]
fn sort_ro_does_not_know_store() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["SORT_RO", "l", "STORE", "dst"]), "ERR syntax error");
}

#[test]
fn sort_by_nosort_of_a_sorted_set_keeps_its_order() {
    let s = start();
    let mut c = conn(&s);
    let _: i64 = q(&mut c, &["ZADD", "z", "3", "a", "1", "b", "2", "c"]);
    let got: Vec<String> = q(&mut c, &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"]);
    assert_eq!(got, ["c", "b"]);
}

fn element() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (-50i32..50).prop_map(|n| n.to_string()),
        2 => (-100.0f64..100.0).prop_map(|f| format!("{f:.2}")),
        2 => "[a-c]{0,3}",
        1 => prop::sample::select(vec!["01", "1.0", "+1", "1e2", "0x1f", "-0", " 3", "inf", "-inf", "x1", "é", "B"])
            .prop_map(str::to_string),
    ]
}

/// A weight value for `w_<element>` or a hash field (numbers mostly).
fn weight() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (-20i32..20).prop_map(|n| n.to_string()),
        2 => (-10.0f64..10.0).prop_map(|f| format!("{f:.1}")),
        1 => "[a-d]{1,2}",
    ]
}

fn sort_line(kind: u8) -> impl Strategy<Value = Vec<String>> {
    let list_only_options = kind == 0;
    let by = prop_oneof![
        3 => Just(None),
        2 => Just(Some("w_*")),
        2 => Just(Some("h_*->f")),
        1 => Just(Some("nosort")),
        1 => Just(Some("missing_*")),
    ];
    let get = prop::collection::vec(
        prop::sample::select(vec!["#", "w_*", "h_*->f", "h_*->g", "missing_*", "nostar"]),
        0..3,
    );
    (
        any::<bool>(),
        by,
        get,
        prop::option::of((-2i64..8, -2i64..8)),
        0u8..3,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(ro, by, get, limit, order, alpha, store)| {
            let mut cmd = vec![if ro { "SORT_RO" } else { "SORT" }.to_string(), "k".into()];
            // Ties under ALPHA BY keep the source's own order: only a
            // list's is one Redis fixes.
            let alpha = alpha && (list_only_options || by.is_none() || by == Some("nosort"));
            // A set not sorted comes in its hash-table order.
            let by = if kind == 1 && by == Some("nosort") { None } else { by };
            if let Some(by) = by {
                cmd.extend(["BY".to_string(), by.to_string()]);
            }
            for g in get {
                cmd.extend(["GET".to_string(), g.to_string()]);
            }
            if let Some((o, c)) = limit {
                cmd.extend(["LIMIT".to_string(), o.to_string(), c.to_string()]);
            }
            match order {
                1 => cmd.push("ASC".into()),
                2 => cmd.push("DESC".into()),
                _ => {}
            }
            if alpha {
                cmd.push("ALPHA".into());
            }
            if store && !ro {
                cmd.extend(["STORE".to_string(), "dst".into()]);
            }
            cmd
        })
}

/// A case: the source's type (0 list, 1 set, 2 sorted set), its elements,
/// weights for them, and SORT lines.
/// An element, its `w_` weight, its `h_` hash field and its score.
type Element = (String, String, String, f64);

fn case() -> impl Strategy<Value = (bool, u8, Vec<Element>, Vec<Vec<String>>)> {
    (
        any::<bool>(),
        0u8..3,
        prop::collection::vec((element(), weight(), weight(), -5.0f64..5.0), 0..25),
    )
        .prop_flat_map(|(resp3, kind, elements)| {
            let lines = prop::collection::vec(sort_line(kind), 1..12);
            (Just(resp3), Just(kind), Just(elements), lines)
        })
}

#[test]
fn random_sorts_answer_as_redis() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let mut ours = Raw::connect(keylock.addr());
    let mut theirs = Raw::connect(redis.addr);
    let mut runner = case_runner("KEYLOCK_SORT_CASES", CASES);
    let servers = std::cell::RefCell::new((&mut ours, &mut theirs));
    let result = runner.run(&case(), |(resp3, kind, elements, lines)| {
        let mut servers = servers.borrow_mut();
        let (ours, theirs) = &mut *servers;
        let mut setup = vec![words(&["HELLO", if resp3 { "3" } else { "2" }]), words(&["FLUSHALL"])];
        for (e, w, f, score) in &elements {
            setup.push(match kind {
                0 => words(&["RPUSH", "k", e]),
                1 => words(&["SADD", "k", e]),
                _ => words(&["ZADD", "k", &format!("{score:.1}"), e]),
            });
            setup.push(words(&["SET", &format!("w_{e}"), w]));
            setup.push(words(&["HSET", &format!("h_{e}"), "f", f]));
        }
        for c in [&mut **ours, &mut **theirs] {
            for w in &setup {
                c.call_words(w);
            }
        }
        let read_back = words(&["LRANGE", "dst", "0", "-1"]);
        for line in &lines {
            for words in [line, &read_back] {
                let want = theirs.call_words(words);
                let got = ours.call_words(words);
                prop_assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want),
                    "{:?} (RESP{}, elements {:?})",
                    words,
                    if resp3 { 3 } else { 2 },
                    elements
                );
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
