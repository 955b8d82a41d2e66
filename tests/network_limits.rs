//! What one connection may send before the server drops it, so that it
//! cannot harm the others: the request limits of clients that have not
//! authenticated. Expected bytes are what redis-server 7.0.15 sends for
//! the same input (compared live when redis-server is installed); after
//! each case another connection must still get its PONG.

mod common;
use common::*;

use std::time::Duration;

const PASS: &str = "s3cret";
/// How long a connection that stays open must stay quiet before we stop reading.
const QUIET: Duration = Duration::from_millis(300);

fn keylock_protected() -> ServerHandle {
    start_with(|c| c.requirepass = Some(PASS.into()))
}

fn redis_protected() -> Option<RealRedis> {
    real_redis_with(&["--requirepass", PASS])
}

fn request(args: &[&[u8]]) -> Vec<u8> {
    encode(args)
}

/// Another connection still authenticates and gets PONG.
fn assert_others_still_served(addr: std::net::SocketAddr) {
    let mut raw = Raw::connect(addr);
    assert_eq!(raw.call(&["AUTH", PASS]), b"+OK\r\n");
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
}

/// Sends `input` to keylock (with `requirepass`) and, when installed, to
/// redis-server configured alike; both must send the same bytes and end
/// the connection the same way. Returns keylock's side.
fn same_as_redis(input: &[u8]) -> (Vec<u8>, Ending) {
    let keylock = keylock_protected();
    let ours = exchange_raw(keylock.addr(), input, QUIET);
    assert_others_still_served(keylock.addr());
    if let Some(redis) = redis_protected() {
        let theirs = exchange_raw(redis.addr, input, QUIET);
        assert_eq!(
            (String::from_utf8_lossy(&ours.0), ours.1),
            (String::from_utf8_lossy(&theirs.0), theirs.1),
            "keylock vs redis-server"
        );
    }
    ours
}

#[test]
fn unauthenticated_multibulk_longer_than_10_is_refused_and_closes() {
    let (out, ending) = same_as_redis(b"*11\r\n");
    assert_eq!(out, b"-ERR Protocol error: unauthenticated multibulk length\r\n");
    assert_eq!(ending, Ending::Closed);
}

#[test]
fn unauthenticated_multibulk_of_10_is_served() {
    let mut args: Vec<&[u8]> = vec![b"AUTH"];
    args.extend(std::iter::repeat_n(b"x".as_slice(), 9));
    let (out, ending) = same_as_redis(&request(&args));
    assert_eq!(out, b"-ERR syntax error\r\n");
    assert_eq!(ending, Ending::Open);
}

#[test]
fn unauthenticated_bulk_longer_than_16384_is_refused_before_its_data_and_closes() {
    let (out, ending) = same_as_redis(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n");
    assert_eq!(out, b"-ERR Protocol error: unauthenticated bulk length\r\n");
    assert_eq!(ending, Ending::Closed);
}

#[test]
fn unauthenticated_bulk_of_16384_is_served() {
    let password = vec![b'p'; 16384];
    let (out, ending) = same_as_redis(&request(&[b"AUTH", &password]));
    assert_eq!(out, b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    assert_eq!(ending, Ending::Open);
}

#[test]
fn authenticated_clients_are_not_held_to_the_unauthenticated_request_limits() {
    let keys: Vec<Vec<u8>> = (0..20).map(|i| format!("k{i}").into_bytes()).collect();
    let mut args: Vec<&[u8]> = vec![b"DEL"];
    args.extend(keys.iter().map(Vec::as_slice));
    let mut input = request(&[b"AUTH", PASS.as_bytes()]);
    input.extend(request(&args));
    input.extend(request(&[b"ECHO", &vec![b'e'; 20000]]));
    let (out, ending) = same_as_redis(&input);
    let mut expected = b"+OK\r\n:0\r\n$20000\r\n".to_vec();
    expected.extend(vec![b'e'; 20000]);
    expected.extend(b"\r\n");
    assert_eq!(out, expected);
    assert_eq!(ending, Ending::Open);
}
