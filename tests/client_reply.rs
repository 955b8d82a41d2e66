//! CLIENT REPLY ON|OFF|SKIP: which replies a connection gets, byte for
//! byte as from redis-server (pub/sub messages are not replies and still
//! arrive while replies are off).

mod common;
use common::*;

use std::net::SocketAddr;
use std::time::Duration;

fn lines(commands: &[&[&str]]) -> Vec<u8> {
    let mut out = Vec::new();
    for args in commands {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        out.extend(encode(&args));
    }
    out
}

fn session(addr: SocketAddr) -> Vec<u8> {
    let input = lines(&[
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "a", "1"],
        &["GET", "a"],
        &["INCR", "nonint"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["GET", "a"],
        &["ECHO", "after-skip"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "SKIP"],
        &["ECHO", "skipped-by-the-second-skip"],
        &["ECHO", "answered"],
        &["CLIENT", "REPLY", "MAYBE"],
        &["CLIENT", "REPLY"],
        // HELLO's reply names the connection's id, which differs.
        &["CLIENT", "REPLY", "SKIP"],
        &["HELLO", "3"],
        &["CLIENT", "REPLY", "OFF"],
        &["SUBSCRIBE", "news"],
        &["PUBLISH", "news", "to-myself"],
        &["CLIENT", "REPLY", "ON"],
        &["PING"],
    ]);
    let (out, ending) = exchange_raw(addr, &input, Duration::from_millis(300));
    assert_eq!(ending, Ending::Open);
    out
}

#[test]
fn client_reply_silences_replies_as_redis_does() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let ours = session(keylock.addr());
    let theirs = session(redis.addr);
    assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
    // Something was dropped and something came through.
    let text = String::from_utf8_lossy(&ours);
    assert!(
        text.contains("answered") && !text.contains("skipped-by") && text.contains("to-myself"),
        "{text}"
    );
}

#[test]
fn a_subscriber_with_replies_off_still_gets_messages() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    for addr in [keylock.addr(), redis.addr] {
        let mut sub = Raw::connect(addr);
        sub.send(&lines(&[&["CLIENT", "REPLY", "OFF"], &["SUBSCRIBE", "ch"]]));
        assert_eq!(sub.reply(), b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
        let mut publisher = Raw::connect(addr);
        assert_eq!(publisher.call(&["PUBLISH", "ch", "hello"]), b":1\r\n");
        assert_eq!(sub.reply(), b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n");
    }
}
