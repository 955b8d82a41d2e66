//! A connection's read buffer (Redis's query buffer) as CLIENT LIST shows
//! it and as the cron resizes it, over TCP, on keylock and, where it is
//! installed, on redis-server 7.0.15 alike: `qbuf` is what is not parsed
//! yet, `qbuf-free` the room after it; the buffer is 16 KB once a client
//! sent anything, is given back once the client has been idle for more
//! than 2 seconds, and one grown by a big argument shrinks to its recent
//! peak while the client goes on with small requests. The sizes are
//! compared as ranges: Redis's buffer is rounded up to its allocator's
//! size classes (16 KB shows as 20,474 bytes there).

mod common;
use common::*;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Every server the behaviour is checked on: keylock, and redis-server
/// when installed.
fn servers() -> (ServerHandle, Option<RealRedis>) {
    (start(), real_redis())
}

fn addrs(servers: &(ServerHandle, Option<RealRedis>)) -> Vec<SocketAddr> {
    std::iter::once(servers.0.addr())
        .chain(servers.1.as_ref().map(|r| r.addr))
        .collect()
}

fn admin(addr: SocketAddr) -> redis::Connection {
    redis::Client::open(format!("redis://{addr}/"))
        .unwrap()
        .get_connection()
        .expect("connect")
}

/// A raw client named `name` that has sent one command (CLIENT SETNAME).
fn named_client(addr: SocketAddr, name: &str) -> Raw {
    let mut c = Raw::connect(addr);
    assert_eq!(c.call(&["CLIENT", "SETNAME", name]), b"+OK\r\n");
    c
}

/// The fields `names` of the CLIENT LIST line of the client named `name`.
fn fields<const N: usize>(admin: &mut redis::Connection, name: &str, names: [&str; N]) -> [u64; N] {
    let list: String = q(admin, &["CLIENT", "LIST"]);
    let needle = format!(" name={name} ");
    let line = list
        .lines()
        .find(|l| l.contains(&needle))
        .unwrap_or_else(|| panic!("{name} not in {list}"));
    names.map(|field| {
        let prefix = format!("{field}=");
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(prefix.as_str())?.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in {line}"))
    })
}

/// `qbuf` and `qbuf-free` of the client named `name`.
fn qbuf(admin: &mut redis::Connection, name: &str) -> (u64, u64) {
    let [len, free] = fields(admin, name, ["qbuf", "qbuf-free"]);
    (len, free)
}

/// What the read buffer of the client named `name` holds in all.
fn query_buffer_size(admin: &mut redis::Connection, name: &str) -> u64 {
    let (len, free) = qbuf(admin, name);
    len + free
}

#[test]
fn a_client_that_sent_a_command_has_a_16kb_read_buffer() {
    let servers = servers();
    for addr in addrs(&servers) {
        let _c = named_client(addr, "c");
        let mut admin = admin(addr);
        let (len, free) = qbuf(&mut admin, "c");
        assert_eq!(len, 0, "{addr}");
        assert!((16384..32768).contains(&free), "{addr}: qbuf-free={free}");
    }
}

#[test]
fn qbuf_is_the_unparsed_part_of_a_partial_request() {
    let servers = servers();
    for addr in addrs(&servers) {
        let mut c = named_client(addr, "c");
        let mut admin = admin(addr);
        let size = query_buffer_size(&mut admin, "c");
        // The array and bulk headers are parsed; two bytes of the
        // argument wait for the rest.
        c.send(b"*1\r\n$4\r\nPI");
        wait_until(5, "the partial request never showed", || qbuf(&mut admin, "c").0 > 0);
        assert_eq!(qbuf(&mut admin, "c"), (2, size - 2), "{addr}");
        c.send(b"NG\r\n");
        assert_eq!(c.reply(), b"+PONG\r\n");
        assert_eq!(qbuf(&mut admin, "c"), (0, size), "{addr}");
        // An inline request is parsed only once its line is complete.
        c.send(b"PIN");
        wait_until(5, "the partial line never showed", || qbuf(&mut admin, "c").0 > 0);
        assert_eq!(qbuf(&mut admin, "c"), (3, size - 3), "{addr}");
        c.send(b"G\r\n");
        assert_eq!(c.reply(), b"+PONG\r\n");
    }
}

#[test]
fn a_clients_own_client_info_shows_the_request_being_run_in_its_buffer() {
    let servers = servers();
    for addr in addrs(&servers) {
        let mut c = Raw::connect(addr);
        c.send(b"CLIENT INFO\r\n");
        let info = String::from_utf8(c.reply()).unwrap();
        assert!(info.contains(" qbuf=13 "), "{addr}: {info}");
    }
}

/// Clients named `idle` on every server, each having sent one command at
/// about the same moment: how long after it each one's read buffer was
/// seen given back (its `idle` then, and the time since the command).
fn idle_buffers_given_back(addrs: &[SocketAddr]) -> Vec<(u64, Duration)> {
    let mut clients: Vec<Raw> = addrs.iter().map(|&a| named_client(a, "idle")).collect();
    let sent = Instant::now();
    for c in &mut clients {
        assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    }
    let mut admins: Vec<redis::Connection> = addrs.iter().map(|&a| admin(a)).collect();
    for (admin, addr) in admins.iter_mut().zip(addrs) {
        assert!(query_buffer_size(admin, "idle") >= 16384, "{addr}: no read buffer");
    }
    let mut freed = vec![None; addrs.len()];
    while freed.iter().any(Option::is_none) {
        assert!(sent.elapsed() < Duration::from_secs(10), "still held: {freed:?}");
        for (admin, at) in admins.iter_mut().zip(&mut freed) {
            let [len, free, idle] = fields(admin, "idle", ["qbuf", "qbuf-free", "idle"]);
            if at.is_none() && len + free == 0 {
                *at = Some((idle, sent.elapsed()));
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    freed.into_iter().flatten().collect()
}

#[test]
fn an_idle_client_gives_its_read_buffer_back_after_2_seconds() {
    let servers = servers();
    for (idle, after) in idle_buffers_given_back(&addrs(&servers)) {
        // Redis's rule: idle for more than 2 whole seconds of its clock.
        assert!((3..=4).contains(&idle), "idle={idle}");
        assert!(after >= Duration::from_secs(2), "{after:?}");
    }
}

#[test]
fn an_idle_partial_request_keeps_its_bytes_in_a_buffer_of_their_size() {
    let servers = servers();
    for addr in addrs(&servers) {
        let mut c = named_client(addr, "c");
        let mut admin = admin(addr);
        c.send(b"*2\r\n$4\r\nECHO\r\n$5\r\nhel");
        wait_until(10, "the partial request's buffer never shrank", || qbuf(&mut admin, "c") == (3, 0));
        c.send(b"lo\r\n");
        assert_eq!(c.reply(), b"$5\r\nhello\r\n");
    }
}

#[test]
fn a_buffer_grown_by_a_big_argument_shrinks_to_its_recent_peak_while_in_use() {
    let servers = servers();
    for addr in addrs(&servers) {
        let mut c = named_client(addr, "c");
        let mut admin = admin(addr);
        c.send_cmd(&[b"SET", b"x", &vec![b'A'; 400_000]]);
        assert_eq!(c.reply(), b"+OK\r\n");
        // Reading goes on in a buffer the size of the argument.
        let grown = query_buffer_size(&mut admin, "c");
        assert!(grown >= 400_002, "{addr}: {grown}");
        let small = [b'A'; 100];
        let deadline = Instant::now() + Duration::from_secs(2);
        let shrunk = loop {
            c.send_cmd(&[b"SET", b"x", &small]);
            assert_eq!(c.reply(), b"+OK\r\n");
            let size = query_buffer_size(&mut admin, "c");
            if size < grown {
                break size;
            }
            assert!(Instant::now() < deadline, "{addr}: still {size}");
            std::thread::sleep(Duration::from_millis(10));
        };
        // Not to nothing: to the recent peak, or a fresh 16 KB.
        assert!(shrunk > 0 && shrunk < 32768, "{addr}: {shrunk}");
    }
}
