//! Connection commands over TCP.

mod common;
use common::*;

#[test]
fn ping_replies_pong() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["PING", "hi"]), "hi");
}

#[test]
fn ping_with_two_arguments_is_an_arity_error() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(
        q_err(&mut c, &["PING", "a", "b"]),
        "ERR wrong number of arguments for 'ping' command"
    );
}

#[test]
fn unknown_command_error_lists_arguments() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(
        raw.call(&["FOO", "a", "b"]),
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
    );
}

#[test]
fn hello_3_switches_to_resp3_maps() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    let reply = raw.call(&["HELLO", "3"]);
    assert!(
        reply.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert_eq!(raw.call(&["GET", "missing"]), b"_\r\n");
}

#[test]
fn select_out_of_range_is_refused() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["SELECT", "16"]), "ERR DB index is out of range");
    assert_eq!(q::<String>(&mut c, &["SELECT", "15"]), "OK");
}

#[test]
fn quit_replies_ok_then_closes() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["QUIT"]), b"+OK\r\n");
    assert!(raw.is_closed());
}
