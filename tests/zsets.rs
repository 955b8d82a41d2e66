//! Sorted-set commands over TCP: replies, options, errors, deletion of
//! emptied sets and RESP3 shapes, as Redis 7.0 gives them.

mod common;
use common::*;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn resp3(s: &ServerHandle) -> Raw {
    let mut raw = Raw::connect(s.addr());
    raw.call(&["HELLO", "3"]);
    raw
}

fn with_scores(c: &mut redis::Connection, key: &str) -> Vec<String> {
    q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])
}

fn members(c: &mut redis::Connection, key: &str) -> Vec<String> {
    q(c, &["ZRANGE", key, "0", "-1"])
}

fn exists(c: &mut redis::Connection, key: &str) -> bool {
    q::<i64>(c, &["EXISTS", key]) == 1
}

// --- ZADD -----------------------------------------------------------------

#[test]
fn zadd_returns_the_number_of_new_members() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "3", "a", "4", "c"]), 1);
    assert_eq!(with_scores(&mut c, "z"), ["b", "2", "a", "3", "c", "4"]);
}

#[test]
fn zadd_orders_equal_scores_by_member_bytes() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "b", "1", "a", "0", "c", "1", "B"]);
    assert_eq!(members(&mut c, "z"), ["c", "B", "a", "b"]);
}

#[test]
fn zadd_ch_counts_updated_members_too() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "CH", "1", "a", "5", "b", "3", "c"]), 2);
}

#[test]
fn zadd_nx_only_adds_new_members() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "NX", "9", "a", "2", "b"]), 1);
    assert_eq!(with_scores(&mut c, "z"), ["a", "1", "b", "2"]);
}

#[test]
fn zadd_xx_only_updates_and_never_creates_the_key() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "XX", "1", "a"]), 0);
    assert!(!exists(&mut c, "z"));
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "XX", "CH", "5", "a", "2", "b"]), 1);
    assert_eq!(with_scores(&mut c, "z"), ["a", "5"]);
}

#[test]
fn zadd_gt_never_lowers_a_score() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "5", "a"]);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "GT", "CH", "3", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "GT", "CH", "7", "a"]), 1);
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "7");
}

#[test]
fn zadd_lt_never_raises_a_score_but_adds_new_members() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "5", "a"]);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "LT", "CH", "7", "a", "9", "b"]), 1);
    assert_eq!(with_scores(&mut c, "z"), ["a", "5", "b", "9"]);
}

#[test]
fn zadd_incr_replies_the_new_score() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["ZADD", "z", "INCR", "1.5", "a"]), "1.5");
    assert_eq!(q::<String>(&mut c, &["ZADD", "z", "INCR", "0.1", "a"]), "1.6000000000000001");
}

#[test]
fn zadd_incr_prevented_by_a_condition_replies_nil() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "5", "a"]);
    assert_eq!(q::<Option<String>>(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["ZADD", "z", "XX", "INCR", "1", "b"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["ZADD", "z", "GT", "INCR", "-1", "a"]), None);
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "LT", "INCR", "-1", "a"]),
        Some("4".into())
    );
}

#[test]
fn zadd_option_conflicts_have_redis_texts() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(
        q_err(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    for opts in [["GT", "LT"], ["GT", "NX"], ["NX", "LT"]] {
        assert_eq!(
            q_err(&mut c, &["ZADD", "z", opts[0], opts[1], "1", "a"]),
            "ERR GT, LT, and/or NX options at the same time are not compatible"
        );
    }
    assert_eq!(
        q_err(&mut c, &["ZADD", "z", "INCR", "1", "a", "2", "b"]),
        "ERR INCR option supports a single increment-element pair"
    );
}

#[test]
fn zadd_with_unpaired_arguments_is_a_syntax_error() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["ZADD", "z", "NX", "1"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["ZADD", "z", "1", "a", "2"]), "ERR syntax error");
    assert_eq!(
        q_err(&mut c, &["ZADD", "z", "1"]),
        "ERR wrong number of arguments for 'zadd' command"
    );
}

#[test]
fn zadd_rejects_bad_scores_before_changing_anything() {
    let s = start();
    let mut c = conn(&s);
    for bad in ["abc", "nan", "1e999", " 1", ""] {
        assert_eq!(
            q_err(&mut c, &["ZADD", "z", "1", "a", bad, "b"]),
            "ERR value is not a valid float",
            "{bad:?}"
        );
    }
    assert!(!exists(&mut c, "z"));
}

#[test]
fn zadd_incr_to_nan_is_an_error() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "inf", "a"]);
    assert_eq!(
        q_err(&mut c, &["ZADD", "z", "INCR", "-inf", "a"]),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(
        q_err(&mut c, &["ZINCRBY", "z", "-inf", "a"]),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "inf");
}

#[test]
fn zadd_stores_negative_zero_as_zero_in_a_small_set() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["ZADD", "z", "INCR", "-0", "a"]), b"$2\r\n-0\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "a"]), b"$1\r\n0\r\n");
}

#[test]
fn zadd_keeps_negative_zero_in_a_skiplist_set() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["CONFIG", "SET", "zset-max-listpack-entries", "0"]);
    raw.call(&["ZADD", "z", "-0", "a"]);
    assert_eq!(raw.call(&["ZSCORE", "z", "a"]), b"$2\r\n-0\r\n");
    // An equal score (0 == -0) is not an update.
    assert_eq!(raw.call(&["ZADD", "z", "CH", "0", "a"]), b":0\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "a"]), b"$2\r\n-0\r\n");
}

#[test]
fn zadd_accepts_infinities_and_exponents() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "-inf", "lo", "+inf", "hi", "1.50", "mid", "-2.5e3", "neg"]);
    assert_eq!(with_scores(&mut c, "z"), ["lo", "-inf", "neg", "-2500", "mid", "1.5", "hi", "inf"]);
}

#[test]
fn sorted_set_commands_on_a_string_key_are_wrongtype() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "str", "x"]);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    for cmd in [
        &["ZADD", "str", "1", "a"][..],
        &["ZINCRBY", "str", "1", "a"],
        &["ZREM", "str", "a"],
        &["ZSCORE", "str", "a"],
        &["ZMSCORE", "str", "a"],
        &["ZCARD", "str"],
        &["ZCOUNT", "str", "0", "1"],
        &["ZLEXCOUNT", "str", "-", "+"],
        &["ZRANGE", "str", "0", "-1"],
        &["ZRANGESTORE", "d", "str", "0", "-1"],
        &["ZRANGEBYSCORE", "str", "0", "1"],
        &["ZREVRANGEBYLEX", "str", "+", "-"],
        &["ZRANK", "str", "a"],
        &["ZREVRANK", "str", "a"],
        &["ZREMRANGEBYRANK", "str", "0", "1"],
        &["ZREMRANGEBYSCORE", "str", "0", "1"],
        &["ZREMRANGEBYLEX", "str", "-", "+"],
        &["ZPOPMIN", "str"],
        &["ZPOPMAX", "str", "2"],
        &["ZMPOP", "2", "str", "z", "MIN"],
        &["ZRANDMEMBER", "str"],
        &["ZRANDMEMBER", "str", "2"],
        &["ZSCAN", "str", "0"],
        &["ZUNION", "2", "z", "str"],
        &["ZINTERSTORE", "d", "2", "z", "str"],
        &["ZDIFF", "2", "z", "str"],
        &["ZINTERCARD", "2", "z", "str"],
    ] {
        assert_eq!(q_err(&mut c, cmd), WRONGTYPE, "{cmd:?}");
    }
}

// --- ZINCRBY, ZREM, point reads -------------------------------------------

#[test]
fn zincrby_creates_and_increments() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["ZINCRBY", "z", "2.5", "a"]), "2.5");
    assert_eq!(q::<String>(&mut c, &["ZINCRBY", "z", "-1", "a"]), "1.5");
    assert_eq!(q_err(&mut c, &["ZINCRBY", "z", "abc", "a"]), "ERR value is not a valid float");
}

#[test]
fn zincrby_scans_options_as_zadd_does() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["ZINCRBY", "z", "nx", "a"]), "ERR syntax error");
    assert_eq!(q::<String>(&mut c, &["ZINCRBY", "z", "1", "nx"]), "1");
}

#[test]
fn zrem_counts_removed_members_and_deletes_an_emptied_set() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a", "nothere"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "b"]), 1);
    assert!(!exists(&mut c, "z"));
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "b"]), 0);
}

#[test]
fn zscore_prints_seventeen_significant_digits() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["ZADD", "z", "0.1", "a", "1e20", "b", "3", "c"]);
    assert_eq!(raw.call(&["ZSCORE", "z", "a"]), b"$19\r\n0.10000000000000001\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "b"]), b"$5\r\n1e+20\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "c"]), b"$1\r\n3\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "nothere"]), b"$-1\r\n");
    assert_eq!(raw.call(&["ZSCORE", "nokey", "a"]), b"$-1\r\n");
}

#[test]
fn zscore_in_resp3_is_a_double() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["ZADD", "z", "0.1", "a", "inf", "b"]);
    assert_eq!(raw.call(&["ZSCORE", "z", "a"]), b",0.10000000000000001\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "b"]), b",inf\r\n");
    assert_eq!(raw.call(&["ZSCORE", "z", "nothere"]), b"_\r\n");
    assert_eq!(raw.call(&["ZINCRBY", "z", "1", "c"]), b",1\r\n");
}

#[test]
fn zmscore_answers_nil_for_missing_members_and_keys() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["ZADD", "z", "1", "a"]);
    assert_eq!(raw.call(&["ZMSCORE", "z", "a", "b"]), b"*2\r\n$1\r\n1\r\n$-1\r\n");
    assert_eq!(raw.call(&["ZMSCORE", "nokey", "a"]), b"*1\r\n$-1\r\n");
    let mut raw3 = resp3(&s);
    assert_eq!(raw3.call(&["ZMSCORE", "z", "a", "b"]), b"*2\r\n,1\r\n_\r\n");
}

#[test]
fn zcard_of_missing_key_is_zero() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "nokey"]), 0);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 2);
}

#[test]
fn zrank_and_zrevrank_count_from_each_end() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZREVRANK", "z", "a"]), 2);
    assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", "z", "nothere"]), None);
    assert_eq!(q::<Option<i64>>(&mut c, &["ZREVRANK", "nokey", "a"]), None);
}

#[test]
fn zrank_withscore_is_not_in_redis_7_0() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(
        q_err(&mut c, &["ZRANK", "z", "a", "WITHSCORE"]),
        "ERR wrong number of arguments for 'zrank' command"
    );
}

// --- Score and lex ranges -------------------------------------------------

#[test]
fn zcount_honours_exclusive_bounds_and_infinities() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "-inf", "+inf"]), 3);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(1", "3"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(1", "(3"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "3", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "nokey", "0", "1"]), 0);
}

#[test]
fn score_range_bounds_follow_strtod() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "0", "zero", "1", "one"]);
    // An empty bound reads as 0; leading space and overflow are accepted.
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "", ""]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", " 1", "1e999"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "-Infinity", "+INF"]), 2);
}

#[test]
fn bad_score_range_is_min_or_max_not_a_float() {
    let s = start();
    let mut c = conn(&s);
    for (min, max) in [("abc", "1"), ("0", "nan"), ("  ", "1"), ("[1", "2"), ("1 ", "2")] {
        assert_eq!(
            q_err(&mut c, &["ZCOUNT", "nokey", min, max]),
            "ERR min or max is not a float",
            "{min:?} {max:?}"
        );
    }
    assert_eq!(
        q_err(&mut c, &["ZRANGEBYSCORE", "nokey", "x", "1"]),
        "ERR min or max is not a float"
    );
    assert_eq!(
        q_err(&mut c, &["ZREMRANGEBYSCORE", "nokey", "x", "1"]),
        "ERR min or max is not a float"
    );
}

#[test]
fn bad_lex_range_is_not_a_valid_string_range_item() {
    let s = start();
    let mut c = conn(&s);
    for (min, max) in [("a", "+"), ("", "+"), ("[a", "+x"), ("-a", "+")] {
        assert_eq!(
            q_err(&mut c, &["ZLEXCOUNT", "nokey", min, max]),
            "ERR min or max not valid string range item",
            "{min:?} {max:?}"
        );
    }
    assert_eq!(
        q_err(&mut c, &["ZRANGEBYLEX", "nokey", "a", "b"]),
        "ERR min or max not valid string range item"
    );
}

#[test]
fn lex_ranges_select_same_score_members_by_bytes() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "0", "a", "0", "b", "0", "c", "0", "d", "0", "ab"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGEBYLEX", "z", "[a", "(c"]), ["a", "ab", "b"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGEBYLEX", "z", "(a", "+", "LIMIT", "1", "2"]),
        ["b", "c"]
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["ZREVRANGEBYLEX", "z", "[c", "-"]), ["c", "b", "ab", "a"]);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "z", "-", "+"]), 5);
    assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", "z", "[b", "[a"]), 0);
    assert!(q::<Vec<String>>(&mut c, &["ZRANGEBYLEX", "z", "-", "-"]).is_empty());
}

// --- ZRANGE and friends ---------------------------------------------------

#[test]
fn zrange_by_rank_clamps_indexes() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "-2", "100"]), ["b", "c"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "0", "REV"]), ["c"]);
    assert!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "2", "1"]).is_empty());
    assert_eq!(q::<Vec<String>>(&mut c, &["ZREVRANGE", "z", "0", "1"]), ["c", "b"]);
}

#[test]
fn zrange_withscores_is_flat_in_resp2() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["ZADD", "z", "1", "a", "2.5", "b"]);
    assert_eq!(
        raw.call(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n"
    );
}

#[test]
fn zrange_withscores_is_pairs_of_member_and_double_in_resp3() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["ZADD", "z", "1", "a", "2.5", "b"]);
    assert_eq!(
        raw.call(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        b"*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
    );
    assert_eq!(
        raw.call(&["ZRANGEBYSCORE", "z", "2", "3", "WITHSCORES"]),
        b"*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n"
    );
    assert_eq!(raw.call(&["ZRANGE", "z", "0", "-1"]), b"*2\r\n$1\r\na\r\n$1\r\nb\r\n");
}

#[test]
fn zrange_byscore_with_limit_and_rev_reads_max_first() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "(1", "+inf", "BYSCORE", "LIMIT", "1", "2"]),
        ["c", "d"]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "+inf", "(1", "BYSCORE", "REV", "LIMIT", "0", "2"]),
        ["d", "c"]
    );
    assert!(q::<Vec<String>>(&mut c, &["ZRANGE", "z", "(1", "+inf", "BYSCORE", "REV"]).is_empty());
    assert_eq!(q::<Vec<String>>(&mut c, &["ZREVRANGEBYSCORE", "z", "3", "2"]), ["c", "b"]);
}

#[test]
fn limit_with_negative_offset_is_empty_and_negative_count_is_unlimited() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert!(q::<Vec<String>>(&mut c, &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "2"]).is_empty());
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "-5"]),
        ["b", "c"]
    );
    assert!(q::<Vec<String>>(&mut c, &["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "0"]).is_empty());
}

#[test]
fn zrange_option_errors_match_redis() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    assert_eq!(
        q_err(&mut c, &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"]),
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    );
    assert_eq!(
        q_err(&mut c, &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"]),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    assert_eq!(
        q_err(&mut c, &["ZRANGEBYLEX", "z", "-", "+", "WITHSCORES"]),
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
    );
    for cmd in [
        &["ZRANGE", "z", "0", "-1", "REV", "REV"][..],
        &["ZRANGE", "z", "0", "-1", "BYSCORE", "BYLEX"],
        &["ZRANGEBYSCORE", "z", "0", "1", "REV"],
        &["ZRANGEBYSCORE", "z", "0", "1", "LIMIT", "0"],
        &["ZREVRANGE", "z", "0", "1", "REV"],
        &["ZRANGESTORE", "d", "z", "0", "-1", "WITHSCORES"],
    ] {
        assert_eq!(q_err(&mut c, cmd), "ERR syntax error", "{cmd:?}");
    }
}

#[test]
fn zrange_limit_with_count_minus_one_counts_as_no_limit() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "z", "0", "-1", "LIMIT", "5", "-1"]),
        ["a", "b"]
    );
}

#[test]
fn zrange_on_missing_key_is_empty_but_indexes_are_still_parsed() {
    let s = start();
    let mut c = conn(&s);
    assert!(q::<Vec<String>>(&mut c, &["ZRANGE", "nokey", "0", "-1", "WITHSCORES"]).is_empty());
    assert_eq!(
        q_err(&mut c, &["ZRANGE", "nokey", "a", "b"]),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn zrangestore_stores_the_range_and_replies_its_size() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "d", "z", "(1", "+inf", "BYSCORE"]), 2);
    assert_eq!(with_scores(&mut c, "d"), ["b", "2", "c", "3"]);
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "d", "z", "[b", "-", "BYLEX", "REV"]), 2);
    assert_eq!(members(&mut c, "d"), ["a", "b"]);
}

#[test]
fn zrangestore_overwrites_any_type_and_drops_the_ttl() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    q::<()>(&mut c, &["SET", "d", "x", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "d", "z", "0", "-1"]), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", "d"]), "zset");
    assert_eq!(q::<i64>(&mut c, &["TTL", "d"]), -1);
}

#[test]
fn zrangestore_of_an_empty_range_deletes_the_destination() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    q::<()>(&mut c, &["SET", "d", "x"]);
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "d", "z", "5", "10"]), 0);
    assert!(!exists(&mut c, "d"));
    q::<()>(&mut c, &["SET", "d", "x"]);
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "d", "nokey", "0", "-1"]), 0);
    assert!(!exists(&mut c, "d"));
}

// --- Removal by range -----------------------------------------------------

#[test]
fn zremrangebyrank_removes_by_index_and_deletes_an_emptied_set() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "-2", "-1"]), 2);
    assert_eq!(members(&mut c, "z"), ["a"]);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "5", "10"]), 0);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", "z", "0", "-1"]), 1);
    assert!(!exists(&mut c, "z"));
}

#[test]
fn zremrangebyscore_removes_the_score_range() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "z", "(1", "2"]), 1);
    assert_eq!(members(&mut c, "z"), ["a", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYSCORE", "nokey", "0", "1"]), 0);
}

#[test]
fn zremrangebylex_removes_the_lex_range() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "0", "a", "0", "b", "0", "c"]);
    assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", "z", "-", "[b"]), 2);
    assert_eq!(members(&mut c, "z"), ["c"]);
    assert_eq!(
        q_err(&mut c, &["ZREMRANGEBYLEX", "nokey", "a", "b"]),
        "ERR min or max not valid string range item"
    );
}

// --- Pops -----------------------------------------------------------------

#[test]
fn zpopmin_and_zpopmax_return_member_then_score() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(raw.call(&["ZPOPMIN", "z"]), b"*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    assert_eq!(
        raw.call(&["ZPOPMAX", "z", "5"]),
        b"*4\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(raw.call(&["EXISTS", "z"]), b":0\r\n");
}

#[test]
fn zpopmin_on_missing_key_or_count_zero_is_empty_array() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["ZPOPMIN", "nokey"]), b"*0\r\n");
    assert_eq!(raw.call(&["ZPOPMAX", "nokey", "3"]), b"*0\r\n");
    raw.call(&["ZADD", "z", "1", "a"]);
    assert_eq!(raw.call(&["ZPOPMIN", "z", "0"]), b"*0\r\n");
    assert_eq!(raw.call(&["ZCARD", "z"]), b":1\r\n");
}

#[test]
fn zpop_count_errors_match_redis() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(
        q_err(&mut c, &["ZPOPMIN", "nokey", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        q_err(&mut c, &["ZPOPMIN", "nokey", "abc"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(q_err(&mut c, &["ZPOPMAX", "nokey", "1", "2"]), "ERR syntax error");
}

#[test]
fn zpopmin_in_resp3_nests_pairs_only_with_a_count() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(raw.call(&["ZPOPMIN", "z"]), b"*2\r\n$1\r\na\r\n,1\r\n");
    assert_eq!(raw.call(&["ZPOPMIN", "z", "1"]), b"*1\r\n*2\r\n$1\r\nb\r\n,2\r\n");
}

#[test]
fn zmpop_pops_pairs_from_the_first_non_empty_set() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(
        raw.call(&["ZMPOP", "2", "nokey", "z", "MAX", "COUNT", "2"]),
        b"*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(
        raw.call(&["ZMPOP", "1", "z", "MIN"]),
        b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(raw.call(&["ZMPOP", "1", "z", "MIN"]), b"*-1\r\n");
    let mut raw3 = resp3(&s);
    assert_eq!(raw3.call(&["ZMPOP", "1", "z", "MIN"]), b"_\r\n");
}

#[test]
fn zmpop_argument_errors_match_redis() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["ZMPOP", "0", "z", "MIN"]), "ERR numkeys should be greater than 0");
    assert_eq!(q_err(&mut c, &["ZMPOP", "2", "z", "MIN"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["ZMPOP", "1", "z", "MIDDLE"]), "ERR syntax error");
    assert_eq!(
        q_err(&mut c, &["ZMPOP", "1", "z", "MIN", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(
        q_err(&mut c, &["ZMPOP", "1", "z", "MIN", "COUNT", "1", "COUNT", "1"]),
        "ERR syntax error"
    );
}

// --- ZRANDMEMBER and ZSCAN ------------------------------------------------

#[test]
fn zrandmember_without_count_picks_one_member() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<Option<String>>(&mut c, &["ZRANDMEMBER", "nokey"]), None);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    let m: String = q(&mut c, &["ZRANDMEMBER", "z"]);
    assert!(m == "a" || m == "b");
}

#[test]
fn zrandmember_asking_for_the_whole_set_answers_highest_first() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "z", "10", "WITHSCORES"]),
        ["c", "3", "b", "2", "a", "1"]
    );
}

#[test]
fn zrandmember_positive_count_picks_distinct_members() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"]);
    let mut picked: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "3"]);
    picked.sort();
    picked.dedup();
    assert_eq!(picked.len(), 3);
}

#[test]
fn zrandmember_negative_count_may_repeat() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "7", "only"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "z", "-3", "WITHSCORES"]),
        ["only", "7", "only", "7", "only", "7"]
    );
}

#[test]
fn zrandmember_withscores_in_resp3_is_pairs() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["ZADD", "z", "7", "only"]);
    assert_eq!(
        raw.call(&["ZRANDMEMBER", "z", "1", "WITHSCORES"]),
        b"*1\r\n*2\r\n$4\r\nonly\r\n,7\r\n"
    );
}

#[test]
fn zrandmember_count_errors_match_redis() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    assert_eq!(
        q_err(&mut c, &["ZRANDMEMBER", "z", "abc"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q_err(&mut c, &["ZRANDMEMBER", "z", "1", "WITHSCORE"]), "ERR syntax error");
    assert_eq!(
        q_err(&mut c, &["ZRANDMEMBER", "z", "5000000000000000000", "WITHSCORES"]),
        "ERR value is out of range"
    );
    assert_eq!(
        q_err(&mut c, &["ZRANDMEMBER", "z", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert!(q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "nokey", "3"]).is_empty());
}

#[test]
fn zscan_returns_a_small_set_whole_with_cursor_zero() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.call(&["ZADD", "z", "2", "b", "0.1", "a", "inf", "c"]);
    assert_eq!(
        raw.call(&["ZSCAN", "z", "0", "COUNT", "1"]),
        b"*2\r\n$1\r\n0\r\n*6\r\n$1\r\na\r\n$19\r\n0.10000000000000001\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$3\r\ninf\r\n"
    );
    assert_eq!(
        raw.call(&["ZSCAN", "z", "0", "MATCH", "[bc]"]),
        b"*2\r\n$1\r\n0\r\n*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$3\r\ninf\r\n"
    );
}

#[test]
fn zscan_scores_stay_bulk_strings_in_resp3() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["ZADD", "z", "1.5", "a"]);
    assert_eq!(raw.call(&["ZSCAN", "z", "0"]), b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$3\r\n1.5\r\n");
}

#[test]
fn zscan_walks_a_large_set_by_cursor() {
    let s = start();
    let mut c = conn(&s);
    for i in 0..300 {
        q::<i64>(&mut c, &["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, items): (String, Vec<String>) = q(&mut c, &["ZSCAN", "z", &cursor, "COUNT", "50"]);
        for pair in items.chunks(2) {
            assert_eq!(pair[0], format!("m{}", pair[1]));
            seen.insert(pair[0].clone());
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 300);
}

#[test]
fn zscan_checks_options_only_on_an_existing_key() {
    let s = start();
    let mut c = conn(&s);
    let (cursor, items): (String, Vec<String>) = q(&mut c, &["ZSCAN", "nokey", "0", "foo", "bar"]);
    assert_eq!((cursor.as_str(), items.len()), ("0", 0));
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    assert_eq!(q_err(&mut c, &["ZSCAN", "z", "0", "foo", "bar"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["ZSCAN", "z", "0", "TYPE", "zset"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["ZSCAN", "z", "0", "COUNT", "0"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["ZSCAN", "z", "abc"]), "ERR invalid cursor");
}

// --- Set operations -------------------------------------------------------

#[test]
fn zunionstore_sums_scores_by_default() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "a", "1", "x", "2", "y"]);
    q::<i64>(&mut c, &["ZADD", "b", "10", "y", "20", "z"]);
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "d", "2", "a", "b"]), 3);
    assert_eq!(with_scores(&mut c, "d"), ["x", "1", "y", "12", "z", "20"]);
}

#[test]
fn zinterstore_applies_weights_and_aggregate() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "a", "1", "x", "2", "y"]);
    q::<i64>(&mut c, &["ZADD", "b", "10", "y", "20", "z"]);
    assert_eq!(
        q::<i64>(
            &mut c,
            &["ZINTERSTORE", "d", "2", "a", "b", "WEIGHTS", "3", "0.5", "AGGREGATE", "MAX"]
        ),
        1
    );
    assert_eq!(with_scores(&mut c, "d"), ["y", "6"]);
}

#[test]
fn zunion_of_opposite_infinities_sums_to_zero() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "p", "inf", "x"]);
    q::<i64>(&mut c, &["ZADD", "n", "-inf", "x"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["ZUNION", "2", "p", "n", "WITHSCORES"]), ["x", "0"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZUNION", "2", "p", "n", "AGGREGATE", "MIN", "WITHSCORES"]),
        ["x", "-inf"]
    );
}

#[test]
fn zdiff_keeps_members_of_the_first_set_only() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "a", "1", "x", "2", "y", "3", "z"]);
    q::<i64>(&mut c, &["ZADD", "b", "10", "y"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZDIFF", "3", "a", "nokey", "b", "WITHSCORES"]),
        ["x", "1", "z", "3"]
    );
    assert_eq!(q::<i64>(&mut c, &["ZDIFFSTORE", "d", "2", "a", "a"]), 0);
    assert!(!exists(&mut c, "d"));
}

#[test]
fn store_forms_replace_the_destination_and_its_ttl() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "a", "1", "x"]);
    q::<()>(&mut c, &["SET", "d", "v", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "d", "1", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "d"]), -1);
    assert_eq!(q::<i64>(&mut c, &["ZINTERSTORE", "d", "2", "a", "nokey"]), 0);
    assert!(!exists(&mut c, "d"));
}

#[test]
fn zinter_withscores_in_resp3_is_pairs() {
    let s = start();
    let mut raw = resp3(&s);
    raw.call(&["ZADD", "a", "1", "x"]);
    raw.call(&["ZADD", "b", "2", "x"]);
    assert_eq!(raw.call(&["ZINTER", "2", "a", "b", "WITHSCORES"]), b"*1\r\n*2\r\n$1\r\nx\r\n,3\r\n");
}

#[test]
fn zintercard_counts_up_to_the_limit() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "a", "1", "x", "2", "y", "3", "z"]);
    q::<i64>(&mut c, &["ZADD", "b", "1", "x", "2", "y"]);
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", "a", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "0"]), 2);
    assert_eq!(
        q_err(&mut c, &["ZINTERCARD", "2", "a", "b", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
}

#[test]
fn set_operation_argument_errors_match_redis() {
    let s = start();
    let mut c = conn(&s);
    q::<i64>(&mut c, &["ZADD", "a", "1", "x"]);
    assert_eq!(
        q_err(&mut c, &["ZUNIONSTORE", "d", "0", "a"]),
        "ERR at least 1 input key is needed for 'zunionstore' command"
    );
    assert_eq!(
        q_err(&mut c, &["ZINTER", "-1", "a"]),
        "ERR at least 1 input key is needed for 'zinter' command"
    );
    assert_eq!(
        q_err(&mut c, &["ZUNION", "abc", "a"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q_err(&mut c, &["ZUNION", "3", "a", "b"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["ZUNION", "2", "a", "b", "WEIGHTS", "1"]), "ERR syntax error");
    assert_eq!(
        q_err(&mut c, &["ZUNION", "2", "a", "b", "WEIGHTS", "1", "x"]),
        "ERR weight value is not a float"
    );
    assert_eq!(q_err(&mut c, &["ZUNION", "2", "a", "b", "AGGREGATE", "AVG"]), "ERR syntax error");
    assert_eq!(q_err(&mut c, &["ZDIFF", "2", "a", "b", "WEIGHTS", "1", "2"]), "ERR syntax error");
    assert_eq!(
        q_err(&mut c, &["ZUNIONSTORE", "d", "2", "a", "b", "WITHSCORES"]),
        "ERR syntax error"
    );
    assert_eq!(q_err(&mut c, &["ZINTERCARD", "2", "a", "b", "WITHSCORES"]), "ERR syntax error");
}

// --- Watch and encoding ---------------------------------------------------

#[test]
fn zadd_that_changes_nothing_does_not_break_a_watch() {
    let s = start();
    let mut c = conn(&s);
    let mut other = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    q::<()>(&mut c, &["WATCH", "z"]);
    assert_eq!(q::<i64>(&mut other, &["ZADD", "z", "NX", "5", "a"]), 0);
    assert_eq!(q::<i64>(&mut other, &["ZREM", "z", "nothere"]), 0);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["ZCARD", "z"]);
    assert_eq!(q::<Option<Vec<i64>>>(&mut c, &["EXEC"]), Some(vec![1]));
}

#[test]
fn zadd_that_changes_a_score_breaks_a_watch() {
    let s = start();
    let mut c = conn(&s);
    let mut other = conn(&s);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]);
    q::<()>(&mut c, &["WATCH", "z"]);
    q::<i64>(&mut other, &["ZADD", "z", "2", "a"]);
    q::<()>(&mut c, &["MULTI"]);
    q::<()>(&mut c, &["ZCARD", "z"]);
    assert_eq!(q::<Option<Vec<i64>>>(&mut c, &["EXEC"]), None);
}
