//! Set commands over TCP: replies, options, errors, intset order and RESP3
//! shapes as Redis 7.0 gives them.

mod common;
use common::*;

use std::collections::HashSet;

/// The RESP bytes of an aggregate of bulk strings (`kind` is `*` or `~`).
fn bulks(kind: char, items: &[&str]) -> Vec<u8> {
    let mut out = format!("{kind}{}\r\n", items.len()).into_bytes();
    for i in items {
        out.extend(format!("${}\r\n{i}\r\n", i.len()).as_bytes());
    }
    out
}

fn resp3(s: &ServerHandle) -> Raw {
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HELLO", "3"]);
    raw
}

fn members(c: &mut redis::Connection, key: &str) -> HashSet<String> {
    q(c, &["SMEMBERS", key])
}

fn set_of(items: &[&str]) -> HashSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn sadd_returns_number_of_new_members() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "a", "b", "a"]), 2);
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "b", "c"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 3);
}

#[test]
fn sadd_on_string_key_is_wrongtype() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(q_err(&mut c, &["SADD", "str", "a"]), WRONGTYPE);
    assert_eq!(q::<String>(&mut c, &["GET", "str"]), "x");
}

#[test]
fn set_commands_on_a_string_key_are_wrongtype() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    q::<i64>(&mut c, &["SADD", "s", "1"]);
    for cmd in [
        &["SREM", "str", "a"][..],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SPOP", "str", "0"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "0"],
        &["SMOVE", "str", "s", "1"],
        &["SMOVE", "s", "str", "1"],
        &["SINTER", "nokey", "str"],
        &["SINTERCARD", "2", "nokey", "str"],
        &["SUNION", "s", "str"],
        &["SDIFF", "nokey", "str"],
        &["SINTERSTORE", "d", "s", "str"],
        &["SUNIONSTORE", "d", "s", "str"],
        &["SDIFFSTORE", "d", "s", "str"],
        &["SSCAN", "str", "0"],
    ] {
        assert_eq!(q_err(&mut c, cmd), WRONGTYPE, "{cmd:?}");
    }
}

#[test]
fn srem_counts_removed_members() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "a", "b", "c"]);
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "a", "nope", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SREM", "nokey", "a"]), 0);
    assert_eq!(members(&mut c, "s"), set_of(&["b", "c"]));
}

#[test]
fn srem_of_last_member_deletes_the_key() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "a", "b"]);
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "a", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]), 0);
}

#[test]
fn smembers_of_integer_set_is_sorted_numerically() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["SADD", "s", "10", "3", "-5", "1", "2"]);
    assert_eq!(raw.call(&["SMEMBERS", "s"]), bulks('*', &["-5", "1", "2", "3", "10"]));
}

#[test]
fn smembers_is_a_set_in_resp3() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["SADD", "s", "2", "1"]);
    assert_eq!(raw.call(&["SMEMBERS", "s"]), bulks('~', &["1", "2"]));
    assert_eq!(raw.call(&["SMEMBERS", "nokey"]), b"~0\r\n");
}

#[test]
fn smembers_of_integer_set_at_512_members_is_still_sorted() {
    let s = start();
    let mut c = conn(&s);
    let mut args = vec!["SADD".to_string(), "s".to_string()];
    args.extend((0..512).rev().map(|i| i.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    q::<i64>(&mut c, &args);
    let got: Vec<String> = q(&mut c, &["SMEMBERS", "s"]);
    let want: Vec<String> = (0..512).map(|i| i.to_string()).collect();
    assert_eq!(got, want);
}

#[test]
fn non_canonical_integers_are_not_intset_members() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "1", "01", "+1"]), 3);
    assert_eq!(members(&mut c, "s"), set_of(&["1", "01", "+1"]));
}

#[test]
fn sismember_and_smismember_report_membership() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["SADD", "s", "a", "b"]);
    assert_eq!(raw.call(&["SISMEMBER", "s", "a"]), b":1\r\n");
    assert_eq!(raw.call(&["SISMEMBER", "s", "z"]), b":0\r\n");
    assert_eq!(raw.call(&["SISMEMBER", "nokey", "a"]), b":0\r\n");
    assert_eq!(raw.call(&["SMISMEMBER", "s", "a", "z", "b"]), b"*3\r\n:1\r\n:0\r\n:1\r\n");
    assert_eq!(raw.call(&["SMISMEMBER", "nokey", "a"]), b"*1\r\n:0\r\n");
}

#[test]
fn scard_of_missing_key_is_zero() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "nokey"]), 0);
}

#[test]
fn spop_without_count_removes_one_member() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["SPOP", "nokey"]), b"$-1\r\n");
    raw.call(&["SADD", "s", "only"]);
    assert_eq!(raw.call(&["SPOP", "s"]), b"$4\r\nonly\r\n");
    assert_eq!(raw.call(&["EXISTS", "s"]), b":0\r\n");
}

#[test]
fn spop_with_count_removes_distinct_members() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "a", "b", "c", "d", "e"]);
    let popped: Vec<String> = q(&mut c, &["SPOP", "s", "2"]);
    let popped: HashSet<String> = popped.into_iter().collect();
    assert_eq!(popped.len(), 2);
    let rest = members(&mut c, "s");
    assert_eq!(rest.len(), 3);
    assert!(popped.is_disjoint(&rest));
}

#[test]
fn spop_count_of_whole_set_returns_it_sorted_and_deletes_the_key() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["SADD", "s", "3", "1", "2"]);
    assert_eq!(raw.call(&["SPOP", "s", "10"]), bulks('~', &["1", "2", "3"]));
    assert_eq!(raw.call(&["EXISTS", "s"]), b":0\r\n");
}

#[test]
fn spop_zero_count_or_missing_key_is_an_empty_set() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["SADD", "s", "a"]);
    assert_eq!(raw.call(&["SPOP", "s", "0"]), b"~0\r\n");
    assert_eq!(raw.call(&["SPOP", "nokey", "3"]), b"~0\r\n");
    assert_eq!(raw.call(&["SCARD", "s"]), b":1\r\n");
}

#[test]
fn spop_rejects_negative_or_non_integer_count() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "a"]);
    assert_eq!(q_err(&mut c, &["SPOP", "s", "-1"]), "ERR value is out of range, must be positive");
    assert_eq!(q_err(&mut c, &["SPOP", "s", "x"]), "ERR value is out of range, must be positive");
    assert_eq!(q_err(&mut c, &["SPOP", "s", "1", "2"]), "ERR syntax error");
}

#[test]
fn srandmember_without_count_returns_a_member_or_nil() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["SRANDMEMBER", "nokey"]), b"$-1\r\n");
    raw.call(&["SADD", "s", "only"]);
    assert_eq!(raw.call(&["SRANDMEMBER", "s"]), b"$4\r\nonly\r\n");
    assert_eq!(raw.call(&["SCARD", "s"]), b":1\r\n");
}

#[test]
fn srandmember_count_of_whole_set_is_a_sorted_array_even_in_resp3() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["SADD", "s", "9", "8", "7"]);
    assert_eq!(raw.call(&["SRANDMEMBER", "s", "3"]), bulks('*', &["7", "8", "9"]));
    assert_eq!(raw.call(&["SRANDMEMBER", "s", "100"]), bulks('*', &["7", "8", "9"]));
}

#[test]
fn srandmember_positive_count_returns_distinct_members() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]);
    for count in [2usize, 3, 8] {
        let got: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", &count.to_string()]);
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), count);
    }
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 10);
}

#[test]
fn srandmember_negative_count_may_repeat_members() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "only"]);
    let got: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "-4"]);
    assert_eq!(got, ["only", "only", "only", "only"]);
}

#[test]
fn srandmember_zero_count_or_missing_key_is_an_empty_array() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["SADD", "s", "a"]);
    assert_eq!(raw.call(&["SRANDMEMBER", "s", "0"]), b"*0\r\n");
    assert_eq!(raw.call(&["SRANDMEMBER", "nokey", "-3"]), b"*0\r\n");
}

#[test]
fn srandmember_rejects_bad_count() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "a"]);
    assert_eq!(
        q_err(&mut c, &["SRANDMEMBER", "s", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        q_err(&mut c, &["SRANDMEMBER", "s", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(q_err(&mut c, &["SRANDMEMBER", "s", "1", "2"]), "ERR syntax error");
}

#[test]
fn smove_moves_a_member_and_deletes_an_emptied_source() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "src", "a"]);
    q::<i64>(&mut c, &["SADD", "dst", "b"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "src", "dst", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "src"]), 0);
    assert_eq!(members(&mut c, "dst"), set_of(&["a", "b"]));
}

#[test]
fn smove_creates_the_destination() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "src", "a", "b"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "src", "new", "a"]), 1);
    assert_eq!(members(&mut c, "new"), set_of(&["a"]));
    assert_eq!(members(&mut c, "src"), set_of(&["b"]));
}

#[test]
fn smove_of_absent_member_or_missing_source_returns_zero() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    q::<i64>(&mut c, &["SADD", "src", "a"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "src", "dst", "nope"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "nokey", "str", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
}

#[test]
fn smove_to_the_same_key_reports_membership() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "a"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "s", "s", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "s", "s", "b"]), 0);
    assert_eq!(members(&mut c, "s"), set_of(&["a"]));
}

#[test]
fn sinter_sunion_sdiff_of_integer_sets_are_sorted() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["SADD", "a", "6", "5", "4", "3", "2", "1"]);
    raw.call(&["SADD", "b", "8", "7", "6", "5", "4"]);
    assert_eq!(raw.call(&["SINTER", "a", "b"]), bulks('*', &["4", "5", "6"]));
    assert_eq!(
        raw.call(&["SUNION", "a", "b"]),
        bulks('*', &["1", "2", "3", "4", "5", "6", "7", "8"])
    );
    assert_eq!(raw.call(&["SDIFF", "a", "b"]), bulks('*', &["1", "2", "3"]));
}

#[test]
fn set_algebra_replies_are_sets_in_resp3() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["SADD", "a", "1", "2"]);
    assert_eq!(raw.call(&["SINTER", "a", "a"]), bulks('~', &["1", "2"]));
    assert_eq!(raw.call(&["SUNION", "a", "nokey"]), bulks('~', &["1", "2"]));
    assert_eq!(raw.call(&["SDIFF", "a", "nokey"]), bulks('~', &["1", "2"]));
    assert_eq!(raw.call(&["SINTER", "a", "nokey"]), b"~0\r\n");
}

#[test]
fn sinter_with_missing_key_is_empty_but_still_type_checks() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "x"]);
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(members(&mut c, "nokey"), HashSet::new());
    assert_eq!(q::<Vec<String>>(&mut c, &["SINTER", "a", "nokey"]), Vec::<String>::new());
    assert_eq!(q_err(&mut c, &["SINTER", "nokey", "str"]), WRONGTYPE);
}

#[test]
fn sdiff_with_missing_first_key_is_empty() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "x"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["SDIFF", "nokey", "a"]), Vec::<String>::new());
    assert_eq!(q::<Vec<String>>(&mut c, &["SDIFF", "a", "a"]), Vec::<String>::new());
}

#[test]
fn store_variants_store_the_result_and_reply_its_size() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "1", "2", "3"]);
    q::<i64>(&mut c, &["SADD", "b", "3", "4"]);
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "i", "a", "b"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "u", "a", "b"]), 4);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "d", "a", "b"]), 2);
    assert_eq!(members(&mut c, "i"), set_of(&["3"]));
    assert_eq!(members(&mut c, "u"), set_of(&["1", "2", "3", "4"]));
    assert_eq!(members(&mut c, "d"), set_of(&["1", "2"]));
}

#[test]
fn store_variants_replace_any_value_and_drop_its_ttl() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "1"]);
    q::<()>(&mut c, &["SET", "dst", "x", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "dst", "a"]), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "dst"]), "set");
    assert_eq!(q::<i64>(&mut c, &["TTL", "dst"]), -1);
}

#[test]
fn store_variants_with_empty_result_delete_the_destination() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "1"]);
    for cmd in [
        &["SINTERSTORE", "dst", "a", "nokey"][..],
        &["SUNIONSTORE", "dst", "nokey"],
        &["SDIFFSTORE", "dst", "a", "a"],
    ] {
        q::<()>(&mut c, &["SET", "dst", "x"]);
        assert_eq!(q::<i64>(&mut c, cmd), 0, "{cmd:?}");
        assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0, "{cmd:?}");
    }
}

#[test]
fn store_variants_may_use_the_destination_as_a_source() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "1", "2", "3"]);
    q::<i64>(&mut c, &["SADD", "b", "2"]);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "a", "a", "b"]), 2);
    assert_eq!(members(&mut c, "a"), set_of(&["1", "3"]));
}

#[test]
fn sintercard_counts_the_intersection() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "1", "2", "3", "4"]);
    q::<i64>(&mut c, &["SADD", "b", "2", "3", "4", "5"]);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "a", "b"]), 3);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "a", "nokey"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "1", "a"]), 4);
}

#[test]
fn sintercard_limit_caps_the_count_and_zero_means_no_limit() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "1", "2", "3", "4"]);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "2"]), 2);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "1", "a", "limit", "0"]), 4);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "100"]), 4);
}

#[test]
fn sintercard_rejects_bad_numkeys_and_options() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "1"]);
    assert_eq!(q_err(&mut c, &["SINTERCARD", "0", "a"]), "ERR numkeys should be greater than 0");
    assert_eq!(q_err(&mut c, &["SINTERCARD", "x", "a"]), "ERR numkeys should be greater than 0");
    assert_eq!(
        q_err(&mut c, &["SINTERCARD", "3", "a", "b"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        q_err(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
    assert_eq!(
        q_err(&mut c, &["SINTERCARD", "1", "a", "LIMIT", "x"]),
        "ERR LIMIT can't be negative"
    );
    assert_eq!(q_err(&mut c, &["SINTERCARD", "1", "a", "LIMIT"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["SINTERCARD", "1", "a", "FOO", "1"]), "ERR syntax error");
}

#[test]
fn sscan_of_integer_set_returns_everything_sorted_with_cursor_zero() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["SADD", "s", "10", "3", "1", "2"]);
    let mut want = b"*2\r\n$1\r\n0\r\n".to_vec();
    want.extend(bulks('*', &["1", "2", "3", "10"]));
    assert_eq!(raw.call(&["SSCAN", "s", "0", "COUNT", "1"]), want);
    let mut want = b"*2\r\n$1\r\n0\r\n".to_vec();
    want.extend(bulks('*', &["1", "10"]));
    assert_eq!(raw.call(&["SSCAN", "s", "0", "MATCH", "1*"]), want);
}

#[test]
fn sscan_of_large_set_visits_every_member_across_calls() {
    let s = start();
    let mut c = conn(&s);
    let mut args = vec!["SADD".to_string(), "s".to_string()];
    args.extend((0..300).map(|i| format!("m{i}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    q::<i64>(&mut c, &args);
    let mut cursor = "0".to_string();
    let mut seen = HashSet::new();
    loop {
        let (next, items): (String, Vec<String>) = q(&mut c, &["SSCAN", "s", &cursor, "COUNT", "40"]);
        seen.extend(items);
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 300);
}

#[test]
fn sscan_of_missing_key_is_empty_and_bad_cursor_is_refused() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["SSCAN", "nokey", "0", "BAD"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(raw.call(&["SSCAN", "nokey", "x"]), b"-ERR invalid cursor\r\n");
}

#[test]
fn sadd_of_present_members_does_not_abort_a_watching_transaction() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["SADD", "s", "a"]);
    raw.call(&["WATCH", "s"]);
    assert_eq!(raw.call(&["SADD", "s", "a"]), b":0\r\n");
    assert_eq!(raw.call(&["SREM", "s", "nope"]), b":0\r\n");
    raw.call(&["MULTI"]);
    raw.call(&["SCARD", "s"]);
    assert_eq!(raw.call(&["EXEC"]), b"*1\r\n:1\r\n");
}

#[test]
fn set_algebra_counts_each_source_key_as_a_read() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "a", "1"]);
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    q::<i64>(&mut c, &["SINTERSTORE", "d", "a", "nokey"]);
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(info.contains("keyspace_hits:1\r\n"), "{info}");
    assert!(info.contains("keyspace_misses:1\r\n"), "{info}");
}

#[test]
fn srandmember_refuses_a_negative_count_too_large_to_reply() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["SADD", "s", "a"]);
    assert_eq!(
        q_err(&mut c, &["SRANDMEMBER", "s", "-9223372036854775807"]),
        "ERR value is out of range"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SRANDMEMBER", "nokey", "-9223372036854775807"]),
        Vec::<String>::new()
    );
}

#[test]
fn a_set_that_became_a_hash_table_stays_one() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SADD", "s", "3", "1", "2"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "s"]), "intset");
    assert_eq!(q::<Vec<String>>(&mut c, &["SMEMBERS", "s"]), ["1", "2", "3"]);
    q::<()>(&mut c, &["SADD", "s", "a"]);
    q::<()>(&mut c, &["SREM", "s", "a"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "s"]), "hashtable");
    q::<()>(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "2"]);
    q::<()>(&mut c, &["SADD", "t", "1", "2"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "t"]), "intset");
    q::<()>(&mut c, &["SADD", "t", "3"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "t"]), "hashtable");
}
