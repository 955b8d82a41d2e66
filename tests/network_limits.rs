//! What one connection may send or leave unread before the server drops
//! it, so that it cannot harm the others: the request limits of clients
//! that have not authenticated, their reply limit, and the query buffer
//! limit. Expected bytes are what redis-server 7.0.15 sends for the same
//! input (compared live when redis-server is installed); after each case
//! another connection must still get its PONG.

mod common;
use common::*;

use std::time::Duration;

const PASS: &str = "s3cret";
/// How long a connection that stays open must stay quiet before we stop reading.
const QUIET: Duration = Duration::from_millis(300);

fn keylock_protected() -> ServerHandle {
    start_with(|c| c.set("requirepass", &[PASS]).unwrap())
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

/// Connects, and waits until the server's cron has seen the connection
/// (Redis then shrinks its reply buffer to 1 KB; keylock counts the same).
fn connect_and_settle(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    s
}

fn unread_noauth_replies(addr: std::net::SocketAddr, pings: usize) -> (Vec<u8>, Ending) {
    use std::io::Write;
    let mut s = connect_and_settle(addr);
    s.write_all(&b"*1\r\n$4\r\nPING\r\n".repeat(pings)).unwrap();
    read_until_closed(&mut s, QUIET)
}

#[test]
fn unauthenticated_client_may_leave_1k_of_replies_in_its_buffer() {
    // 30 NOAUTH replies are 1020 bytes: they fit.
    let noauth = b"-NOAUTH Authentication required.\r\n";
    let keylock = keylock_protected();
    let ours = unread_noauth_replies(keylock.addr(), 30);
    assert_eq!(ours, (noauth.repeat(30), Ending::Open));
    assert_others_still_served(keylock.addr());
    if let Some(redis) = redis_protected() {
        assert_eq!(unread_noauth_replies(redis.addr, 30), ours);
    }
}

#[test]
fn unauthenticated_client_past_its_reply_buffer_is_closed_without_its_replies() {
    // 31 replies (1054 bytes) overflow the 1 KB buffer: Redis drops them
    // and the connection.
    let keylock = keylock_protected();
    let ours = unread_noauth_replies(keylock.addr(), 31);
    assert_eq!(ours, (Vec::new(), Ending::Closed));
    assert_others_still_served(keylock.addr());
    if let Some(redis) = redis_protected() {
        assert_eq!(unread_noauth_replies(redis.addr, 31), ours);
    }
}

#[test]
fn unauthenticated_client_s_limit_is_its_own_reply_buffer() {
    // With resizing off the buffer stays at 16 KB: 40 replies (1360
    // bytes) fit in it however long the client waited.
    let noauth = b"-NOAUTH Authentication required.\r\n";
    let run = |addr: std::net::SocketAddr| {
        let mut admin = Raw::connect(addr);
        assert_eq!(admin.call(&["AUTH", PASS]), b"+OK\r\n");
        assert_eq!(admin.call(&["DEBUG", "REPLYBUFFER", "RESIZING", "0"]), b"+OK\r\n");
        unread_noauth_replies(addr, 40)
    };
    let keylock = start_with(|c| {
        c.set("requirepass", &[PASS]).unwrap();
        c.directives.push(("enable-debug-command".into(), vec!["yes".into()]));
    });
    let ours = run(keylock.addr());
    assert_eq!(ours, (noauth.repeat(40), Ending::Open));
    if let Some(redis) = real_redis_with(&["--requirepass", PASS, "--enable-debug-command", "yes"]) {
        assert_eq!(run(redis.addr), ours);
    }
}

/// Sends `SET x 5` without ever reading until the server drops the
/// connection (writes fail); returns how many bytes were sent by then.
fn flood_without_reading(addr: std::net::SocketAddr) -> usize {
    use std::io::Write;
    const SET: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$1\r\n5\r\n";
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(100))).unwrap();
    let chunk = SET.repeat(1000);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut sent = 0;
    while std::time::Instant::now() < deadline {
        // Partial writes resume mid-command: the stream stays whole.
        match s.write(&chunk[sent % SET.len()..]) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return sent,
        }
    }
    panic!("the server kept open an unauthenticated client that never reads ({sent} bytes sent)");
}

#[test]
fn unauthenticated_client_that_never_reads_is_closed() {
    let keylock = keylock_protected();
    let sent = flood_without_reading(keylock.addr());
    assert!(sent < 64 << 20, "closed only after {sent} bytes");
    assert_others_still_served(keylock.addr());
    if let Some(redis) = redis_protected() {
        flood_without_reading(redis.addr);
    }
}

/// A SET whose value is announced as `declared` bytes, of which `sent`
/// are sent; returns what the server answered and how it ended.
fn partial_set(addr: std::net::SocketAddr, declared: usize, sent: usize) -> (Vec<u8>, Ending) {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${declared}\r\n").as_bytes())
        .unwrap();
    let chunk = vec![b'v'; 64 * 1024];
    let mut left = sent;
    while left > 0 {
        let n = left.min(chunk.len());
        if s.write_all(&chunk[..n]).is_err() {
            break;
        }
        left -= n;
    }
    read_until_closed(&mut s, QUIET)
}

fn config_set(addr: std::net::SocketAddr, name: &str, value: &str) -> Vec<u8> {
    Raw::connect(addr).call(&["CONFIG", "SET", name, value])
}

#[test]
fn query_buffer_past_the_limit_closes_the_connection() {
    let keylock = start();
    assert_eq!(config_set(keylock.addr(), "client-query-buffer-limit", "1mb"), b"+OK\r\n");
    let ours = partial_set(keylock.addr(), 2_000_000, 1_200_000);
    assert_eq!(ours, (Vec::new(), Ending::Closed));
    let mut other = Raw::connect(keylock.addr());
    assert_eq!(other.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(other.call(&["EXISTS", "k"]), b":0\r\n");
    if let Some(redis) = real_redis() {
        assert_eq!(config_set(redis.addr, "client-query-buffer-limit", "1mb"), b"+OK\r\n");
        assert_eq!(partial_set(redis.addr, 2_000_000, 1_200_000), ours);
    }
}

#[test]
fn query_buffer_within_the_limit_is_served() {
    let keylock = start();
    config_set(keylock.addr(), "client-query-buffer-limit", "1mb");
    let ours = partial_set(keylock.addr(), 1_000_000, 1_000_002);
    assert_eq!(ours, (b"+OK\r\n".to_vec(), Ending::Open));
    if let Some(redis) = real_redis() {
        config_set(redis.addr, "client-query-buffer-limit", "1mb");
        assert_eq!(partial_set(redis.addr, 1_000_000, 1_000_002), ours);
    }
}

#[test]
fn query_buffer_limit_is_read_from_the_command_line() {
    let args: Vec<String> = ["--port", "0", "--client-query-buffer-limit", "1mb"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let keylock = Server::new(Config::from_args(&args).unwrap()).start().unwrap();
    let mut c = Raw::connect(keylock.addr());
    assert_eq!(
        c.call(&["CONFIG", "GET", "client-query-buffer-limit"]),
        b"*2\r\n$25\r\nclient-query-buffer-limit\r\n$7\r\n1048576\r\n"
    );
    assert_eq!(partial_set(keylock.addr(), 2_000_000, 1_200_000), (Vec::new(), Ending::Closed));
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
}

#[test]
fn query_buffer_limit_below_1mb_is_refused_like_redis() {
    let keylock = start();
    let ours = config_set(keylock.addr(), "client-query-buffer-limit", "1000");
    assert_eq!(
        ours,
        b"-ERR CONFIG SET failed (possibly related to argument 'client-query-buffer-limit') - argument must be between 1048576 and 9223372036854775807 inclusive\r\n"
    );
    if let Some(redis) = real_redis() {
        assert_eq!(config_set(redis.addr, "client-query-buffer-limit", "1000"), ours);
    }
}

/// SETs a 2 MB value, then GETs it on a connection of its own.
fn get_big_value(addr: std::net::SocketAddr) -> (Vec<u8>, Ending) {
    let mut c = Raw::connect(addr);
    let value = vec![b'v'; 2 << 20];
    c.send_cmd(&[b"SET", b"big", &value]);
    assert_eq!(c.reply(), b"+OK\r\n");
    exchange_raw(addr, &encode(&[b"GET", b"big"]), QUIET)
}

#[test]
fn reply_past_the_normal_hard_output_limit_closes_the_connection() {
    let keylock = start();
    assert_eq!(
        config_set(keylock.addr(), "client-output-buffer-limit", "normal 1mb 0 0"),
        b"+OK\r\n"
    );
    let ours = get_big_value(keylock.addr());
    assert_eq!(ours, (Vec::new(), Ending::Closed));
    assert_eq!(Raw::connect(keylock.addr()).call(&["PING"]), b"+PONG\r\n");
    if let Some(redis) = real_redis() {
        config_set(redis.addr, "client-output-buffer-limit", "normal 1mb 0 0");
        assert_eq!(get_big_value(redis.addr), ours);
    }
}

/// An inline line is read 16 KB at a time, as Redis reads it, and refused
/// once more than 64 KB of it came without its end: a 100 KB line sent in
/// one write is refused whatever the reads brought in (keylock used to take
/// it in one read and accept it), a 60 KB one is served; both as
/// redis-server answers them.
#[test]
fn inline_lines_past_64kb_are_refused_however_they_arrive() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    for len in [60_000usize, 100_000, 300_000] {
        let mut line = b"SET k ".to_vec();
        line.resize(len, b'a');
        line.extend_from_slice(b"\r\n");
        let ours = exchange_raw(keylock.addr(), &line, std::time::Duration::from_millis(300));
        let theirs = exchange_raw(redis.addr, &line, std::time::Duration::from_millis(300));
        assert_eq!(ours, theirs, "an inline line of {len} bytes");
        let refused = ours.0.starts_with(b"-ERR Protocol error: too big inline request");
        assert_eq!(refused, len > 65_536 + 16_384, "{len}: {}", String::from_utf8_lossy(&ours.0));
    }
}
