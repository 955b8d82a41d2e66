//! String commands over TCP.

mod common;
use common::*;

#[test]
fn set_nx_and_xx_respect_existence() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["SET", "k", "1", "XX"]), b"$-1\r\n");
    assert_eq!(c.call(&["SET", "k", "1", "NX"]), b"+OK\r\n");
    assert_eq!(c.call(&["SET", "k", "2", "NX"]), b"$-1\r\n");
    assert_eq!(c.call(&["SET", "k", "3", "XX"]), b"+OK\r\n");
    assert_eq!(c.call(&["GET", "k"]), b"$1\r\n3\r\n");
}

#[test]
fn set_get_returns_the_old_value_and_refuses_other_types() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["SET", "k", "a", "GET"]), b"$-1\r\n");
    assert_eq!(c.call(&["SET", "k", "b", "GET"]), b"$1\r\na\r\n");
    c.call(&["RPUSH", "l", "x"]);
    assert_eq!(
        c.call(&["SET", "l", "v", "GET"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn conflicting_set_options_are_a_syntax_error() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["SET", "k", "v", "NX", "XX"]), b"-ERR syntax error\r\n");
    assert_eq!(c.call(&["SET", "k", "v", "EX", "10", "PX", "100"]), b"-ERR syntax error\r\n");
    assert_eq!(c.call(&["SET", "k", "v", "KEEPTTL", "EX", "1"]), b"-ERR syntax error\r\n");
}

#[test]
fn invalid_expire_times_are_refused() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(
        c.call(&["SET", "k", "v", "EX", "0"]),
        b"-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(
        c.call(&["SET", "k", "v", "PX", "-5"]),
        b"-ERR invalid expire time in 'set' command\r\n"
    );
    assert_eq!(
        c.call(&["SETEX", "k", "0", "v"]),
        b"-ERR invalid expire time in 'setex' command\r\n"
    );
    assert_eq!(
        c.call(&["SET", "k", "v", "EX", "x"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn incr_family_counts_and_overflows_like_redis() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["INCR", "n"]), b":1\r\n");
    assert_eq!(c.call(&["INCRBY", "n", "41"]), b":42\r\n");
    assert_eq!(c.call(&["DECRBY", "n", "2"]), b":40\r\n");
    c.call(&["SET", "big", "9223372036854775807"]);
    assert_eq!(c.call(&["INCR", "big"]), b"-ERR increment or decrement would overflow\r\n");
    assert_eq!(
        c.call(&["DECRBY", "n", "-9223372036854775808"]),
        b"-ERR decrement would overflow\r\n"
    );
    c.call(&["SET", "s", "12a"]);
    assert_eq!(c.call(&["INCR", "s"]), b"-ERR value is not an integer or out of range\r\n");
}

#[test]
fn incrbyfloat_prints_like_redis_long_doubles() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "f", "10.50"]);
    assert_eq!(c.call(&["INCRBYFLOAT", "f", "0.1"]), b"$4\r\n10.6\r\n");
    assert_eq!(c.call(&["INCRBYFLOAT", "f", "-5"]), b"$3\r\n5.6\r\n");
    c.call(&["SET", "e", "5.0e3"]);
    assert_eq!(c.call(&["INCRBYFLOAT", "e", "2.0e2"]), b"$4\r\n5200\r\n");
    assert_eq!(
        c.call(&["INCRBYFLOAT", "e", "inf"]),
        b"-ERR increment would produce NaN or Infinity\r\n"
    );
}

#[test]
fn append_strlen_getrange_setrange() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["APPEND", "k", "Hello"]), b":5\r\n");
    assert_eq!(c.call(&["APPEND", "k", " World"]), b":11\r\n");
    assert_eq!(c.call(&["STRLEN", "k"]), b":11\r\n");
    assert_eq!(c.call(&["GETRANGE", "k", "-5", "-1"]), b"$5\r\nWorld\r\n");
    assert_eq!(c.call(&["SETRANGE", "pad", "3", "x"]), b":4\r\n");
    assert_eq!(c.call(&["GET", "pad"]), b"$4\r\n\x00\x00\x00x\r\n");
}

#[test]
fn mset_mget_and_msetnx() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["MSET", "a", "1", "b", "2"]), b"+OK\r\n");
    assert_eq!(c.call(&["MGET", "a", "nope", "b"]), b"*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n");
    assert_eq!(c.call(&["MSETNX", "b", "x", "c", "y"]), b":0\r\n");
    assert_eq!(c.call(&["EXISTS", "c"]), b":0\r\n");
    assert_eq!(c.call(&["MSET", "a"]), b"-ERR wrong number of arguments for 'mset' command\r\n");
}

#[test]
fn getdel_and_getex() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "k", "v"]);
    assert_eq!(c.call(&["GETDEL", "k"]), b"$1\r\nv\r\n");
    assert_eq!(c.call(&["GETDEL", "k"]), b"$-1\r\n");
    c.call(&["SET", "k", "v"]);
    assert_eq!(c.call(&["GETEX", "k", "EX", "100"]), b"$1\r\nv\r\n");
    assert_eq!(c.call(&["TTL", "k"]), b":100\r\n");
    assert_eq!(c.call(&["GETEX", "k", "PERSIST", "EX", "1"]), b"-ERR syntax error\r\n");
}

#[test]
fn a_string_modified_in_place_is_raw_until_set_whole() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "k", "1234"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "k"]), "int");
    q::<()>(&mut c, &["SETRANGE", "k", "0", "2"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "k"]), "raw");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "2234");
    q::<()>(&mut c, &["SET", "k", "abc"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "k"]), "embstr");
    q::<()>(&mut c, &["APPEND", "k", "d"]);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "k"]), "raw");
}
