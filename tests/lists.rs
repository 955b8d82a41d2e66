//! List commands over TCP: replies, options, errors and the deletion of
//! emptied lists, as Redis 7.0 gives them.

mod common;
use common::*;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn range(c: &mut redis::Connection, key: &str) -> Vec<String> {
    q(c, &["LRANGE", key, "0", "-1"])
}

fn exists(c: &mut redis::Connection, key: &str) -> bool {
    q::<i64>(c, &["EXISTS", key]) == 1
}

#[test]
fn lpush_prepends_each_element_in_turn_and_returns_the_length() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["LPUSH", "l", "a", "b", "c"]), 3);
    assert_eq!(range(&mut c, "l"), ["c", "b", "a"]);
}

#[test]
fn rpush_appends_and_returns_the_length() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "l", "a", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "l", "c"]), 3);
    assert_eq!(range(&mut c, "l"), ["a", "b", "c"]);
}

#[test]
fn pushx_on_missing_key_does_nothing() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "l", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["RPUSHX", "l", "a"]), 0);
    assert!(!exists(&mut c, "l"));
}

#[test]
fn pushx_on_existing_list_pushes_every_element() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "m"]);
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "l", "a", "b"]), 3);
    assert_eq!(q::<i64>(&mut c, &["RPUSHX", "l", "z"]), 4);
    assert_eq!(range(&mut c, "l"), ["b", "a", "m", "z"]);
}

#[test]
fn list_commands_on_a_string_key_are_wrongtype() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    for cmd in [
        &["LPUSH", "str", "a"][..],
        &["RPUSHX", "str", "a"],
        &["LPOP", "str"],
        &["RPOP", "str", "2"],
        &["LLEN", "str"],
        &["LINDEX", "str", "0"],
        &["LRANGE", "str", "0", "-1"],
        &["LREM", "str", "0", "a"],
        &["LSET", "str", "0", "a"],
        &["LTRIM", "str", "0", "1"],
        &["LINSERT", "str", "BEFORE", "a", "b"],
        &["LPOS", "str", "a"],
        &["LMOVE", "str", "l", "LEFT", "LEFT"],
        &["LMOVE", "l", "str", "LEFT", "LEFT"],
        &["RPOPLPUSH", "l", "str"],
        &["LMPOP", "2", "str", "l", "LEFT"],
    ] {
        assert_eq!(q_err(&mut c, cmd), WRONGTYPE, "{cmd:?}");
    }
    assert_eq!(range(&mut c, "l"), ["a"]);
}

#[test]
fn lpop_and_rpop_take_one_element_from_each_end() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    assert_eq!(q::<String>(&mut c, &["LPOP", "l"]), "a");
    assert_eq!(q::<String>(&mut c, &["RPOP", "l"]), "c");
    assert_eq!(range(&mut c, "l"), ["b"]);
}

#[test]
fn popping_the_last_element_deletes_the_key() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    q::<String>(&mut c, &["LPOP", "l"]);
    assert!(!exists(&mut c, "l"));
}

#[test]
fn pop_with_count_returns_an_array_in_pop_order() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "d"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["LPOP", "l", "2"]), ["a", "b"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["RPOP", "l", "10"]), ["d", "c"]);
    assert!(!exists(&mut c, "l"));
}

#[test]
fn lpop_with_count_on_missing_key_is_nil_array() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["LPOP", "nokey", "2"]), b"*-1\r\n");
    assert_eq!(raw.call(&["LPOP", "nokey", "0"]), b"*-1\r\n");
    assert_eq!(raw.call(&["RPOP", "nokey"]), b"$-1\r\n");
}

#[test]
fn pop_with_count_zero_on_existing_list_is_empty_array() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["RPUSH", "l", "a"]);
    assert_eq!(raw.call(&["LPOP", "l", "0"]), b"*0\r\n");
    assert_eq!(raw.call(&["LLEN", "l"]), b":1\r\n");
}

#[test]
fn pop_with_negative_or_non_numeric_count_is_out_of_range() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(q_err(&mut c, &["LPOP", "l", "-1"]), "ERR value is out of range, must be positive");
    assert_eq!(q_err(&mut c, &["RPOP", "l", "abc"]), "ERR value is out of range, must be positive");
}

#[test]
fn pop_with_two_counts_is_an_arity_error() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(
        q_err(&mut c, &["LPOP", "l", "1", "2"]),
        "ERR wrong number of arguments for 'lpop' command"
    );
    assert_eq!(
        q_err(&mut c, &["RPOP", "l", "1", "2"]),
        "ERR wrong number of arguments for 'rpop' command"
    );
}

#[test]
fn pops_in_resp3_answer_null() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HELLO", "3"]);
    assert_eq!(raw.call(&["LPOP", "nokey"]), b"_\r\n");
    assert_eq!(raw.call(&["LPOP", "nokey", "2"]), b"_\r\n");
    assert_eq!(raw.call(&["LMPOP", "1", "nokey", "LEFT"]), b"_\r\n");
}

#[test]
fn llen_of_missing_key_is_zero() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "nokey"]), 0);
}

#[test]
fn lindex_counts_negative_indexes_from_the_tail() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    assert_eq!(q::<String>(&mut c, &["LINDEX", "l", "0"]), "a");
    assert_eq!(q::<String>(&mut c, &["LINDEX", "l", "-1"]), "c");
    assert_eq!(q::<Option<String>>(&mut c, &["LINDEX", "l", "3"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["LINDEX", "l", "-4"]), None);
}

#[test]
fn lindex_on_missing_key_is_nil_even_with_a_bad_index() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<Option<String>>(&mut c, &["LINDEX", "nokey", "abc"]), None);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(
        q_err(&mut c, &["LINDEX", "l", "abc"]),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn lrange_clamps_and_converts_indexes() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "d", "e"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "-2", "-1"]), ["d", "e"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "-100", "1"]), ["a", "b"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "3", "100"]), ["d", "e"]);
    assert!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "3", "1"]).is_empty());
    assert!(q::<Vec<String>>(&mut c, &["LRANGE", "l", "5", "10"]).is_empty());
}

#[test]
fn lrange_parses_indexes_before_looking_up_the_key() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(
        q_err(&mut c, &["LRANGE", "nokey", "a", "1"]),
        "ERR value is not an integer or out of range"
    );
    assert!(q::<Vec<String>>(&mut c, &["LRANGE", "nokey", "0", "-1"]).is_empty());
}

#[test]
fn lset_replaces_by_index() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    assert_eq!(q::<String>(&mut c, &["LSET", "l", "-1", "C"]), "OK");
    assert_eq!(range(&mut c, "l"), ["a", "b", "C"]);
}

#[test]
fn lset_errors_name_the_missing_key_then_the_index() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["LSET", "nokey", "abc", "x"]), "ERR no such key");
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(
        q_err(&mut c, &["LSET", "l", "abc", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q_err(&mut c, &["LSET", "l", "1", "x"]), "ERR index out of range");
}

#[test]
fn lrem_with_positive_count_removes_from_the_head() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "a", "c", "a"]);
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "2", "a"]), 2);
    assert_eq!(range(&mut c, "l"), ["b", "c", "a"]);
}

#[test]
fn lrem_with_negative_count_removes_from_the_tail() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "a", "c", "a"]);
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "-2", "a"]), 2);
    assert_eq!(range(&mut c, "l"), ["a", "b", "c"]);
}

#[test]
fn lrem_with_zero_count_removes_all_and_deletes_an_emptied_list() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "a"]);
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "0", "a"]), 2);
    assert!(!exists(&mut c, "l"));
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "0", "a"]), 0);
}

#[test]
fn ltrim_keeps_the_range_and_deletes_an_emptied_list() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "d"]);
    assert_eq!(q::<String>(&mut c, &["LTRIM", "l", "1", "-2"]), "OK");
    assert_eq!(range(&mut c, "l"), ["b", "c"]);
    assert_eq!(q::<String>(&mut c, &["LTRIM", "l", "5", "10"]), "OK");
    assert!(!exists(&mut c, "l"));
    assert_eq!(q::<String>(&mut c, &["LTRIM", "l", "0", "1"]), "OK");
}

#[test]
fn linsert_places_before_or_after_the_first_pivot() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "b"]);
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "BEFORE", "b", "x"]), 4);
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "after", "b", "y"]), 5);
    assert_eq!(range(&mut c, "l"), ["a", "x", "b", "y", "b"]);
}

#[test]
fn linsert_without_pivot_or_key_reports_minus_one_or_zero() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "nokey", "BEFORE", "a", "x"]), 0);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(q::<i64>(&mut c, &["LINSERT", "l", "BEFORE", "zz", "x"]), -1);
    assert_eq!(q_err(&mut c, &["LINSERT", "l", "MIDDLE", "a", "x"]), "ERR syntax error");
}

#[test]
fn lpos_finds_the_first_match() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "a", "b", "c", "a"]);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "l", "c"]), 2);
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "l", "zz"]), None);
}

#[test]
fn lpos_rank_skips_matches_and_negative_rank_searches_from_the_tail() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "a", "b", "c", "a"]);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "l", "a", "RANK", "2"]), 3);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "l", "a", "RANK", "-1"]), 6);
    assert_eq!(q::<i64>(&mut c, &["LPOS", "l", "a", "RANK", "-3"]), 0);
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "l", "a", "RANK", "4"]), None);
}

#[test]
fn lpos_count_returns_positions_and_zero_means_all() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "a", "b", "c", "a"]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["LPOS", "l", "a", "COUNT", "2"]), [0, 3]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["LPOS", "l", "a", "COUNT", "0"]), [0, 3, 6]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["LPOS", "l", "a", "RANK", "-1", "COUNT", "2"]), [6, 3]);
    assert!(q::<Vec<i64>>(&mut c, &["LPOS", "l", "zz", "COUNT", "0"]).is_empty());
}

#[test]
fn lpos_maxlen_limits_the_elements_compared() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "a"]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["LPOS", "l", "a", "COUNT", "0", "MAXLEN", "3"]), [0]);
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "l", "c", "RANK", "-1", "MAXLEN", "1"]), None);
}

#[test]
fn lpos_on_missing_key_is_nil_or_empty_with_count() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["LPOS", "nokey", "a"]), b"$-1\r\n");
    assert_eq!(raw.call(&["LPOS", "nokey", "a", "COUNT", "1"]), b"*0\r\n");
}

#[test]
fn lpos_option_errors_match_redis() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(
        q_err(&mut c, &["LPOS", "l", "a", "RANK", "0"]),
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
    );
    assert_eq!(
        q_err(&mut c, &["LPOS", "l", "a", "RANK", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q_err(&mut c, &["LPOS", "l", "a", "COUNT", "-1"]), "ERR COUNT can't be negative");
    assert_eq!(q_err(&mut c, &["LPOS", "l", "a", "COUNT", "x"]), "ERR COUNT can't be negative");
    assert_eq!(q_err(&mut c, &["LPOS", "l", "a", "MAXLEN", "-1"]), "ERR MAXLEN can't be negative");
    assert_eq!(q_err(&mut c, &["LPOS", "l", "a", "RANK"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["LPOS", "nokey", "a", "FOO", "1"]), "ERR syntax error");
}

#[test]
fn lmove_moves_between_the_chosen_ends() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "src", "a", "b", "c"]);
    q::<i64>(&mut c, &["RPUSH", "dst", "x"]);
    assert_eq!(q::<String>(&mut c, &["LMOVE", "src", "dst", "RIGHT", "LEFT"]), "c");
    assert_eq!(q::<String>(&mut c, &["LMOVE", "src", "dst", "left", "right"]), "a");
    assert_eq!(range(&mut c, "src"), ["b"]);
    assert_eq!(range(&mut c, "dst"), ["c", "x", "a"]);
}

#[test]
fn lmove_of_the_last_element_deletes_the_source() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "src", "a"]);
    assert_eq!(q::<String>(&mut c, &["LMOVE", "src", "dst", "LEFT", "LEFT"]), "a");
    assert!(!exists(&mut c, "src"));
    assert_eq!(range(&mut c, "dst"), ["a"]);
}

#[test]
fn lmove_onto_the_same_list_rotates_it() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    assert_eq!(q::<String>(&mut c, &["LMOVE", "l", "l", "LEFT", "RIGHT"]), "a");
    assert_eq!(range(&mut c, "l"), ["b", "c", "a"]);
    q::<i64>(&mut c, &["RPUSH", "one", "x"]);
    assert_eq!(q::<String>(&mut c, &["RPOPLPUSH", "one", "one"]), "x");
    assert_eq!(range(&mut c, "one"), ["x"]);
}

#[test]
fn lmove_from_missing_source_is_nil_and_bad_direction_is_syntax_error() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<Option<String>>(&mut c, &["LMOVE", "nokey", "dst", "LEFT", "LEFT"]), None);
    assert!(!exists(&mut c, "dst"));
    assert_eq!(q_err(&mut c, &["LMOVE", "nokey", "dst", "UP", "LEFT"]), "ERR syntax error");
}

#[test]
fn rpoplpush_moves_tail_to_head() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "src", "a", "b"]);
    q::<i64>(&mut c, &["RPUSH", "dst", "x"]);
    assert_eq!(q::<String>(&mut c, &["RPOPLPUSH", "src", "dst"]), "b");
    assert_eq!(range(&mut c, "dst"), ["b", "x"]);
    assert_eq!(q::<Option<String>>(&mut c, &["RPOPLPUSH", "nokey", "dst"]), None);
}

#[test]
fn lmpop_pops_from_the_first_non_empty_list() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["RPUSH", "l2", "a", "b", "c"]);
    assert_eq!(
        raw.call(&["LMPOP", "2", "l1", "l2", "RIGHT", "COUNT", "2"]),
        b"*2\r\n$2\r\nl2\r\n*2\r\n$1\r\nc\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        raw.call(&["LMPOP", "2", "l1", "l2", "LEFT", "COUNT", "5"]),
        b"*2\r\n$2\r\nl2\r\n*1\r\n$1\r\na\r\n"
    );
    assert_eq!(raw.call(&["EXISTS", "l2"]), b":0\r\n");
    assert_eq!(raw.call(&["LMPOP", "2", "l1", "l2", "LEFT"]), b"*-1\r\n");
}

#[test]
fn lmpop_argument_errors_match_redis() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["LMPOP", "0", "l", "LEFT"]), "ERR numkeys should be greater than 0");
    assert_eq!(
        q_err(&mut c, &["LMPOP", "abc", "l", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(q_err(&mut c, &["LMPOP", "5", "l", "LEFT"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["LMPOP", "1", "l", "UP"]), "ERR syntax error");
    assert_eq!(
        q_err(&mut c, &["LMPOP", "1", "l", "LEFT", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(
        q_err(&mut c, &["LMPOP", "1", "l", "LEFT", "COUNT", "1", "COUNT", "1"]),
        "ERR syntax error"
    );
    assert_eq!(q_err(&mut c, &["LMPOP", "9223372036854775807", "l", "LEFT"]), "ERR syntax error");
}

#[test]
fn lmpop_stops_at_a_key_of_another_type_before_any_list() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    assert_eq!(q_err(&mut c, &["LMPOP", "2", "str", "l", "LEFT"]), WRONGTYPE);
    let popped: (String, Vec<String>) = q(&mut c, &["LMPOP", "2", "l", "str", "LEFT"]);
    assert_eq!(popped, ("l".to_string(), vec!["a".to_string()]));
}

#[test]
fn failed_lrem_does_not_break_a_watch() {
    let s = start();
    let mut c = conn(&s);
    let mut other = conn(&s);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]);
    q::<()>(&mut c, &["WATCH", "l"]);
    assert_eq!(q::<i64>(&mut other, &["LREM", "l", "0", "zz"]), 0);
    assert_eq!(q::<i64>(&mut other, &["LINSERT", "l", "BEFORE", "zz", "x"]), -1);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["LLEN", "l"]);
    assert_eq!(q::<Option<Vec<i64>>>(&mut c, &["EXEC"]), Some(vec![1]));
}
