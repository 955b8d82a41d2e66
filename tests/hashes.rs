//! Hash commands over TCP: replies, options, errors and RESP3 shapes as
//! Redis 7.0 gives them.

mod common;
use common::*;

/// The RESP bytes of an aggregate of bulk strings: `kind` is `*`, `~` or `%`
/// (for `%`, `items` are the flattened key/value pairs).
fn bulks(kind: char, items: &[&str]) -> Vec<u8> {
    let n = if kind == '%' { items.len() / 2 } else { items.len() };
    let mut out = format!("{kind}{n}\r\n").into_bytes();
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

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn hset_returns_number_of_new_fields() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]), 2);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "a", "10", "c", "3"]), 1);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]), "10");
}

#[test]
fn hset_with_repeated_field_counts_it_once_and_keeps_the_last_value() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f", "1", "f", "2"]), 1);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "f"]), "2");
}

#[test]
fn hset_with_odd_field_value_arguments_is_an_arity_error() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(
        q_err(&mut c, &["HSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
}

#[test]
fn hset_arity_error_comes_before_wrongtype() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(
        q_err(&mut c, &["HSET", "str", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(q_err(&mut c, &["HSET", "str", "a", "1"]), WRONGTYPE);
}

#[test]
fn hmset_replies_ok_and_names_itself_in_arity_errors() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["HMSET", "h", "a", "1", "b", "2"]), "OK");
    assert_eq!(
        q_err(&mut c, &["HMSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hmset' command"
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 2);
}

#[test]
fn hsetnx_sets_only_a_missing_field() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "f", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "f", "2"]), 0);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "f"]), "1");
}

#[test]
fn hget_of_missing_key_or_field_is_nil() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HSET", "h", "a", "1"]);
    assert_eq!(raw.call(&["HGET", "h", "nope"]), b"$-1\r\n");
    assert_eq!(raw.call(&["HGET", "nokey", "a"]), b"$-1\r\n");
}

#[test]
fn hmget_returns_nil_for_each_missing_field() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HSET", "h", "a", "1", "c", "3"]);
    assert_eq!(raw.call(&["HMGET", "h", "a", "b", "c"]), b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n");
    assert_eq!(raw.call(&["HMGET", "nokey", "a", "b"]), b"*2\r\n$-1\r\n$-1\r\n");
}

#[test]
fn hdel_counts_removed_fields() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a", "b", "nope", "a"]), 2);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 1);
}

#[test]
fn hdel_of_last_field_deletes_the_key() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]);
    q::<i64>(&mut c, &["EXPIRE", "h", "100"]);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "h"]), -2);
}

#[test]
fn hexists_hlen_and_hstrlen_report_zero_for_missing() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "a", "hello"]);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "b"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "nokey", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "nokey"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "a"]), 5);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "b"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "nokey", "a"]), 0);
}

#[test]
fn hgetall_returns_fields_in_insertion_order() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HSET", "h", "z", "1", "a", "2", "m", "3"]);
    raw.call(&["HSET", "h", "z", "9"]);
    assert_eq!(raw.call(&["HGETALL", "h"]), bulks('*', &["z", "9", "a", "2", "m", "3"]));
    assert_eq!(raw.call(&["HKEYS", "h"]), bulks('*', &["z", "a", "m"]));
    assert_eq!(raw.call(&["HVALS", "h"]), bulks('*', &["9", "2", "3"]));
}

#[test]
fn hdel_keeps_the_order_of_the_remaining_fields() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"]);
    raw.call(&["HDEL", "h", "b"]);
    raw.call(&["HSET", "h", "b", "5"]);
    assert_eq!(raw.call(&["HKEYS", "h"]), bulks('*', &["a", "c", "d", "b"]));
}

#[test]
fn hgetall_is_a_map_in_resp3() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(raw.call(&["HGETALL", "h"]), bulks('%', &["a", "1", "b", "2"]));
    assert_eq!(raw.call(&["HGETALL", "nokey"]), b"%0\r\n");
}

#[test]
fn hkeys_hvals_hgetall_of_missing_key_are_empty() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["HKEYS", "nokey"]), b"*0\r\n");
    assert_eq!(raw.call(&["HVALS", "nokey"]), b"*0\r\n");
    assert_eq!(raw.call(&["HGETALL", "nokey"]), b"*0\r\n");
}

#[test]
fn hash_commands_on_a_string_key_are_wrongtype() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    for cmd in [
        &["HSET", "str", "a", "1"][..],
        &["HSETNX", "str", "a", "1"],
        &["HGET", "str", "a"],
        &["HMGET", "str", "a"],
        &["HDEL", "str", "a"],
        &["HEXISTS", "str", "a"],
        &["HLEN", "str"],
        &["HKEYS", "str"],
        &["HVALS", "str"],
        &["HGETALL", "str"],
        &["HSTRLEN", "str", "a"],
        &["HINCRBY", "str", "a", "1"],
        &["HINCRBYFLOAT", "str", "a", "1"],
        &["HSCAN", "str", "0"],
        &["HRANDFIELD", "str"],
        &["HRANDFIELD", "str", "0"],
    ] {
        assert_eq!(q_err(&mut c, cmd), WRONGTYPE, "{cmd:?}");
    }
    assert_eq!(q::<String>(&mut c, &["GET", "str"]), "x");
}

#[test]
fn hincrby_creates_and_increments_integer_fields() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "5"]), 5);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "-7"]), -2);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "n"]), "-2");
}

#[test]
fn hincrby_with_non_integer_increment_is_refused_before_the_type_check() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(
        q_err(&mut c, &["HINCRBY", "str", "f", "1.5"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        q_err(&mut c, &["HINCRBY", "h", "f", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
}

#[test]
fn hincrby_on_non_integer_value_is_an_error() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "s", "abc", "z", "01", "sp", " 1"]);
    for field in ["s", "z", "sp"] {
        assert_eq!(
            q_err(&mut c, &["HINCRBY", "h", field, "1"]),
            "ERR hash value is not an integer",
            "{field}"
        );
    }
}

#[test]
fn hincrby_overflow_is_refused_and_value_kept() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(
        &mut c,
        &["HSET", "h", "big", "9223372036854775807", "small", "-9223372036854775808"],
    );
    assert_eq!(
        q_err(&mut c, &["HINCRBY", "h", "big", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        q_err(&mut c, &["HINCRBY", "h", "small", "-1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "big"]), "9223372036854775807");
}

#[test]
fn hincrbyfloat_prints_like_redis() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["HINCRBYFLOAT", "h", "x", "10.5"]), "10.5");
    assert_eq!(q::<String>(&mut c, &["HINCRBYFLOAT", "h", "x", "0.1"]), "10.6");
    assert_eq!(q::<String>(&mut c, &["HINCRBYFLOAT", "h", "y", "5.0e3"]), "5000");
    assert_eq!(q::<String>(&mut c, &["HINCRBYFLOAT", "h", "y", "2.0e2"]), "5200");
    q::<i64>(&mut c, &["HSET", "h", "i", "17"]);
    assert_eq!(q::<String>(&mut c, &["HINCRBYFLOAT", "h", "i", "0.25"]), "17.25");
}

#[test]
fn hincrbyfloat_errors_match_redis() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "s", "hello", "e", "1.1e4932"]);
    assert_eq!(q_err(&mut c, &["HINCRBYFLOAT", "h", "x", "abc"]), "ERR value is not a valid float");
    assert_eq!(q_err(&mut c, &["HINCRBYFLOAT", "h", "x", "inf"]), "ERR value is NaN or Infinity");
    assert_eq!(q_err(&mut c, &["HINCRBYFLOAT", "h", "s", "1"]), "ERR hash value is not a float");
    assert_eq!(
        q_err(&mut c, &["HINCRBYFLOAT", "h", "e", "1.1e4932"]),
        "ERR increment would produce NaN or Infinity"
    );
}

#[test]
fn hscan_of_small_hash_returns_everything_with_cursor_zero() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    let mut want = b"*2\r\n$1\r\n0\r\n".to_vec();
    want.extend(bulks('*', &["a", "1", "b", "2", "c", "3"]));
    assert_eq!(raw.call(&["HSCAN", "h", "0", "COUNT", "1"]), want);
    assert_eq!(raw.call(&["HSCAN", "h", "12345"]), want);
}

#[test]
fn hscan_match_filters_on_field_names() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HSET", "h", "apple", "1", "banana", "2", "avocado", "3"]);
    let mut want = b"*2\r\n$1\r\n0\r\n".to_vec();
    want.extend(bulks('*', &["apple", "1", "avocado", "3"]));
    assert_eq!(raw.call(&["HSCAN", "h", "0", "MATCH", "a*"]), want);
}

#[test]
fn hscan_of_large_hash_visits_every_field_across_calls() {
    let s = start();
    let mut c = conn(&s);
    let mut args = vec!["HSET".to_string(), "h".to_string()];
    for i in 0..300 {
        args.push(format!("f{i}"));
        args.push(i.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    q::<i64>(&mut c, &args);
    let mut cursor = "0".to_string();
    let mut seen = std::collections::HashSet::new();
    let mut calls = 0;
    loop {
        let (next, items): (String, Vec<String>) = q(&mut c, &["HSCAN", "h", &cursor, "COUNT", "50"]);
        for pair in items.chunks(2) {
            assert_eq!(pair[0][1..], pair[1]);
            seen.insert(pair[0].clone());
        }
        calls += 1;
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 300);
    assert!(calls > 1);
}

#[test]
fn hscan_of_missing_key_is_empty_even_with_bad_options() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["HSCAN", "nokey", "0", "BAD"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
}

#[test]
fn hscan_rejects_bad_cursor_and_options() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]);
    assert_eq!(q_err(&mut c, &["HSCAN", "nokey", "abc"]), "ERR invalid cursor");
    assert_eq!(q_err(&mut c, &["HSCAN", "h", "0", "COUNT", "0"]), "ERR syntax error");
    assert_eq!(
        q_err(&mut c, &["HSCAN", "h", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q_err(&mut c, &["HSCAN", "h", "0", "TYPE", "string"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["HSCAN", "h", "0", "MATCH"]), "ERR syntax error");
}

#[test]
fn hrandfield_without_count_returns_a_field_or_nil() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["HRANDFIELD", "nokey"]), b"$-1\r\n");
    raw.call(&["HSET", "h", "only", "v"]);
    assert_eq!(raw.call(&["HRANDFIELD", "h"]), b"$4\r\nonly\r\n");
}

#[test]
fn hrandfield_count_at_least_size_returns_whole_hash_in_order() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(raw.call(&["HRANDFIELD", "h", "10"]), bulks('*', &["a", "b", "c"]));
    assert_eq!(
        raw.call(&["HRANDFIELD", "h", "3", "WITHVALUES"]),
        bulks('*', &["a", "1", "b", "2", "c", "3"])
    );
}

#[test]
fn hrandfield_positive_count_returns_distinct_fields() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]);
    for count in ["2", "4"] {
        let fields: Vec<String> = q(&mut c, &["HRANDFIELD", "h", count]);
        let distinct: std::collections::HashSet<_> = fields.iter().collect();
        assert_eq!(distinct.len(), count.parse::<usize>().unwrap());
    }
}

#[test]
fn hrandfield_negative_count_may_repeat_fields() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "only", "v"]);
    let fields: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "-3"]);
    assert_eq!(fields, ["only", "only", "only"]);
    let pairs: Vec<String> = q(&mut c, &["HRANDFIELD", "h", "-2", "WITHVALUES"]);
    assert_eq!(pairs, ["only", "v", "only", "v"]);
}

#[test]
fn hrandfield_withvalues_is_an_array_of_pairs_in_resp3() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["HSET", "h", "a", "1", "b", "2"]);
    assert_eq!(
        raw.call(&["HRANDFIELD", "h", "5", "WITHVALUES"]),
        b"*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(raw.call(&["HRANDFIELD", "h", "5"]), bulks('*', &["a", "b"]));
}

#[test]
fn hrandfield_zero_count_or_missing_key_is_an_empty_array() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["HSET", "h", "a", "1"]);
    assert_eq!(raw.call(&["HRANDFIELD", "h", "0"]), b"*0\r\n");
    assert_eq!(raw.call(&["HRANDFIELD", "nokey", "5"]), b"*0\r\n");
    assert_eq!(raw.call(&["HRANDFIELD", "nokey", "-5", "WITHVALUES"]), b"*0\r\n");
}

#[test]
fn hrandfield_rejects_bad_count_and_options() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]);
    assert_eq!(
        q_err(&mut c, &["HRANDFIELD", "h", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        q_err(&mut c, &["HRANDFIELD", "h", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(q_err(&mut c, &["HRANDFIELD", "h", "1", "WITHVALUE"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["HRANDFIELD", "h", "1", "WITHVALUES", "x"]), "ERR syntax error");
    assert_eq!(
        q_err(&mut c, &["HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"]),
        "ERR value is out of range"
    );
}

#[test]
fn hset_keeps_the_key_ttl() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]);
    q::<i64>(&mut c, &["EXPIRE", "h", "100"]);
    q::<i64>(&mut c, &["HSET", "h", "b", "2"]);
    q::<i64>(&mut c, &["HINCRBY", "h", "c", "1"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "h"]), 100);
}

#[test]
fn hdel_of_absent_field_does_not_abort_a_watching_transaction() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HSET", "h", "a", "1"]);
    raw.call(&["WATCH", "h"]);
    assert_eq!(raw.call(&["HDEL", "h", "nope"]), b":0\r\n");
    assert_eq!(raw.call(&["HSETNX", "h", "a", "2"]), b":0\r\n");
    raw.call(&["MULTI"]);
    raw.call(&["HGET", "h", "a"]);
    assert_eq!(raw.call(&["EXEC"]), b"*1\r\n$1\r\n1\r\n");
}

#[test]
fn hash_reads_count_keyspace_hits_and_misses() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]);
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    q::<Option<String>>(&mut c, &["HGET", "h", "a"]);
    q::<Option<String>>(&mut c, &["HGET", "nokey", "a"]);
    q::<i64>(&mut c, &["HSET", "h", "b", "2"]);
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(info.contains("keyspace_hits:1\r\n"), "{info}");
    assert!(info.contains("keyspace_misses:1\r\n"), "{info}");
}
