//! Replies that `client-output-buffer-limit` stops while they are built,
//! over TCP, on the keylock binary and, where it is installed, on
//! redis-server 7.0.15 alike: random picks with a huge negative count
//! (HRANDFIELD, SRANDMEMBER, ZRANDMEMBER), which the data does not bound,
//! and KEYS, whose reply Redis holds entirely in the reply list the limit
//! counts. A client whose reply reaches its limit is closed without a
//! byte of it; under the limit the replies are whole. The server's RSS
//! (/proc/<pid>/status) stays bounded meanwhile.

mod common;
use common::*;

use std::net::SocketAddr;
use std::time::Duration;

const MB: u64 = 1 << 20;
const QUIET: Duration = Duration::from_millis(500);

/// Every server the behaviour is checked on: keylock, and redis-server
/// when installed.
fn servers() -> (Binary, Option<RealRedis>) {
    (Binary::start(&[]), real_redis())
}

fn addrs(servers: &(Binary, Option<RealRedis>)) -> Vec<SocketAddr> {
    std::iter::once(servers.0.addr).chain(servers.1.as_ref().map(|r| r.addr)).collect()
}

fn set_normal_limit(addr: SocketAddr, limit: &str) {
    let mut admin = Raw::connect(addr);
    assert_eq!(
        admin.call(&["CONFIG", "SET", "client-output-buffer-limit", &format!("normal {limit}")]),
        b"+OK\r\n"
    );
}

/// Sends one command on a new connection; what came back and how the
/// connection ended.
fn run_alone(addr: SocketAddr, args: &[&str]) -> (Vec<u8>, Ending) {
    let mut c = Raw::connect(addr);
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send_cmd(&args);
    read_until_closed(&mut c.writer, QUIET)
}

fn assert_closed_without_reply(addr: SocketAddr, args: &[&str]) {
    let (got, ending) = run_alone(addr, args);
    assert_eq!(ending, Ending::Closed, "{args:?} on {addr}: still open");
    assert!(got.is_empty(), "{args:?} on {addr}: {} bytes sent", got.len());
}

/// The element count of an array reply.
fn array_len(reply: &[u8]) -> usize {
    assert_eq!(reply[0], b'*', "{}", String::from_utf8_lossy(&reply[..reply.len().min(80)]));
    let end = reply.iter().position(|&b| b == b'\r').unwrap();
    std::str::from_utf8(&reply[1..end]).unwrap().parse().unwrap()
}

fn fill_collections(addr: SocketAddr) {
    let mut c = Raw::connect(addr);
    assert_eq!(c.call(&["HSET", "myhash", "a", "b"]), b":1\r\n");
    assert_eq!(c.call(&["SADD", "myset", "a"]), b":1\r\n");
    assert_eq!(c.call(&["ZADD", "myzset", "1", "a"]), b":1\r\n");
}

const HUGE_PICKS: &[&[&str]] = &[
    &["HRANDFIELD", "myhash", "-999999999"],
    &["HRANDFIELD", "myhash", "-999999999", "WITHVALUES"],
    &["SRANDMEMBER", "myset", "-999999999"],
    &["ZRANDMEMBER", "myzset", "-999999999"],
    &["ZRANDMEMBER", "myzset", "-999999999", "WITHSCORES"],
];

#[test]
fn random_picks_with_a_huge_negative_count_close_the_client_at_its_hard_limit() {
    let servers = servers();
    for addr in addrs(&servers) {
        set_normal_limit(addr, "1000000 0 0");
        fill_collections(addr);
        for args in HUGE_PICKS {
            assert_closed_without_reply(addr, args);
        }
        // The server goes on serving.
        assert_eq!(Raw::connect(addr).call(&["PING"]), b"+PONG\r\n");
    }
}

#[test]
fn random_picks_stopped_by_the_limit_leave_the_servers_memory_bounded() {
    let server = Binary::start(&[]);
    set_normal_limit(server.addr, "1mb 0 0");
    fill_collections(server.addr);
    let idle = server.rss();
    let mut peak = idle;
    for _ in 0..5 {
        for args in HUGE_PICKS {
            assert_closed_without_reply(server.addr, args);
            peak = peak.max(server.rss());
        }
    }
    server.ping();
    std::thread::sleep(Duration::from_millis(1500));
    let after = server.rss();
    eprintln!("idle {} MB, peak {} MB, after {} MB", idle / MB, peak / MB, after / MB);
    // A 1 MB reply is about 150,000 elements while it is built (some 50
    // bytes each as values, and the vector's doubling); a billion would be
    // tens of gigabytes. The memory goes back once the client is closed.
    assert!(peak <= idle + 64 * MB, "{} MB over idle", (peak - idle) / MB);
    assert!(after <= idle + 8 * MB, "{} MB over idle after", (after - idle) / MB);
}

#[test]
fn random_picks_under_the_limit_are_answered_in_full() {
    let servers = servers();
    for addr in addrs(&servers) {
        set_normal_limit(addr, "1000000 0 0");
        fill_collections(addr);
        let mut c = Raw::connect(addr);
        assert_eq!(array_len(&c.call(&["HRANDFIELD", "myhash", "-1000"])), 1000);
        assert_eq!(array_len(&c.call(&["HRANDFIELD", "myhash", "-1000", "WITHVALUES"])), 2000);
        assert_eq!(array_len(&c.call(&["SRANDMEMBER", "myset", "-1000"])), 1000);
        assert_eq!(array_len(&c.call(&["ZRANDMEMBER", "myzset", "-1000", "WITHSCORES"])), 2000);
        // 100,000 picks: a 700 KB reply, under the 1 MB limit.
        let reply = c.call(&["SRANDMEMBER", "myset", "-100000"]);
        assert_eq!(reply.len(), 9 + 100_000 * 7);
    }
}

#[test]
fn without_a_limit_keylock_refuses_picks_past_four_million() {
    // Redis would build the reply until it runs out of memory.
    let server = Binary::start(&[]);
    fill_collections(server.addr);
    let mut c = Raw::connect(server.addr);
    for args in HUGE_PICKS {
        assert_eq!(c.call(args), b"-ERR value is out of range\r\n", "{args:?}");
    }
    assert_eq!(
        c.call(&["HRANDFIELD", "myhash", "-9223372036854775808"]),
        b"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
    );
}

fn populate_long_keys(addr: SocketAddr, n: usize) {
    let mut c = Raw::connect(addr);
    let prefix = format!("long-key-name-prefix-of-100-chars{}", "-".repeat(67));
    for i in 0..n {
        let key = format!("{prefix}{i}");
        c.send_cmd(&[b"SET", key.as_bytes(), b"v"]);
    }
    for _ in 0..n {
        assert_eq!(c.reply(), b"+OK\r\n");
    }
}

#[test]
fn a_keys_reply_of_110kb_closes_the_client_at_a_100000_byte_limit() {
    // 1,000 keys of about 103 bytes: a 110 KB reply, which Redis holds in
    // its reply list whole (it sends the length last), over the limit.
    let servers = servers();
    for addr in addrs(&servers) {
        populate_long_keys(addr, 1000);
        set_normal_limit(addr, "100000 0 0");
        assert_closed_without_reply(addr, &["KEYS", "*"]);
        let mut c = Raw::connect(addr);
        assert_eq!(array_len(&c.call(&["KEYS", "*-99?"])), 10);
    }
}

#[test]
fn a_known_length_reply_under_the_limit_past_the_reply_buffer_is_answered() {
    // 60 KB of LRANGE: 16 KB in the reply buffer, 44 KB in the list (in
    // Redis, 3 blocks counting 61 KB; 4 blocks, 82 KB, if its reply
    // buffer has shrunk to 1 KB).
    let servers = servers();
    for addr in addrs(&servers) {
        let mut c = Raw::connect(addr);
        let item = "x".repeat(1000);
        for _ in 0..60 {
            c.call(&["RPUSH", "mylist", &item]);
        }
        set_normal_limit(addr, "100000 0 0");
        let (got, ending) = run_alone(addr, &["LRANGE", "mylist", "0", "-1"]);
        assert_eq!(ending, Ending::Open, "closed on {addr}");
        assert_eq!(array_len(&got), 60);
    }
}
