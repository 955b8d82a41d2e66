//! Client eviction (`maxmemory-clients`): once the clients' memory (their
//! read buffers, unwritten output, queued transactions, watched keys,
//! subscriptions) reaches the limit, the largest are closed until it is
//! below it, CLIENT NO-EVICT clients excepted, counted in INFO's
//! `evicted_clients`; the same scenarios give the same survivors on
//! redis-server 7.0.15.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{Raw, text};

const MB: usize = 1024 * 1024;

fn info_field(c: &mut Raw, field: &str) -> String {
    common::info_value(c, "stats", field)
}

/// A client's `tot-mem` in CLIENT LIST, by name.
fn tot_mem(control: &mut Raw, name: &str) -> Option<usize> {
    let list = text(control.call(&["CLIENT", "LIST"]));
    let line = list.lines().find(|l| l.contains(&format!(" name={name} ")))?;
    let field = line.split(' ').find_map(|f| f.strip_prefix("tot-mem="))?;
    field.parse().ok()
}

/// A connection named `name` that has sent the start of a `size`-byte
/// argument and nothing more: its read buffer holds `size` bytes.
fn half_sent(addr: SocketAddr, name: &str, size: usize) -> TcpStream {
    let mut c = Raw::connect(addr);
    assert_eq!(c.call(&["CLIENT", "SETNAME", name]), b"+OK\r\n");
    half_sent_on(c, size)
}

fn control(addr: SocketAddr) -> Raw {
    let mut c = Raw::connect(addr);
    assert_eq!(c.call(&["CLIENT", "SETNAME", "control"]), b"+OK\r\n");
    assert_eq!(c.call(&["CLIENT", "NO-EVICT", "ON"]), b"+OK\r\n");
    c
}

fn named_clients(control: &mut Raw, prefix: &str) -> usize {
    text(control.call(&["CLIENT", "LIST"]))
        .lines()
        .filter(|l| l.contains(&format!(" name={prefix}")))
        .count()
}

/// Ten clients holding 1 MB each, then a limit that holds half of them:
/// how many are left, and how many were evicted.
fn only_until_below_the_limit(addr: SocketAddr) -> (usize, String) {
    let mut control = control(addr);
    let streams: Vec<TcpStream> = (0..10).map(|i| half_sent(addr, &format!("client{i}"), MB)).collect();
    let mut largest = 0;
    for i in 0..10 {
        let name = format!("client{i}");
        common::wait_until(10, "the read buffer to fill", || {
            tot_mem(&mut control, &name).is_some_and(|m| m >= MB)
        });
        largest = largest.max(tot_mem(&mut control, &name).unwrap());
    }
    // Room for five clients and the control client as CLIENT LIST shows
    // it, running CLIENT LIST (its arguments, which it no longer holds
    // once CONFIG SET runs, are counted).
    let limit = largest * 10 / 2 + tot_mem(&mut control, "control").unwrap();
    assert_eq!(
        control.call(&["CONFIG", "SET", "maxmemory-clients", &limit.to_string()]),
        b"+OK\r\n"
    );
    let left = named_clients(&mut control, "client");
    drop(streams);
    (left, info_field(&mut control, "evicted_clients"))
}

#[test]
fn clients_are_evicted_only_until_below_the_limit_as_redis_does() {
    let keylock = common::start();
    let ours = only_until_below_the_limit(keylock.addr());
    assert_eq!(ours, (5, "5".to_string()));
    if let Some(redis) = common::real_redis() {
        assert_eq!(only_until_below_the_limit(redis.addr), ours);
    }
}

#[test]
fn a_client_whose_read_buffer_reaches_the_limit_is_evicted() {
    let server = common::start();
    let mut control = control(server.addr());
    assert_eq!(control.call(&["CONFIG", "SET", "maxmemory-clients", "3000000"]), b"+OK\r\n");
    let mut s = half_sent(server.addr(), "big", 3_000_000);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Closed without a reply.
    assert!(matches!(std::io::Read::read(&mut s, &mut [0; 16]), Ok(0) | Err(_)));
    assert_eq!(named_clients(&mut control, "big"), 0);
    assert_eq!(info_field(&mut control, "evicted_clients"), "1");
    assert_eq!(control.call(&["PING"]), b"+PONG\r\n");
}

#[test]
fn a_client_whose_unread_replies_reach_the_limit_is_evicted() {
    let server = common::start();
    let mut control = control(server.addr());
    assert_eq!(control.call(&["SET", "big", &"x".repeat(MB)]), b"+OK\r\n");
    assert_eq!(control.call(&["CONFIG", "SET", "maxmemory-clients", "3000000"]), b"+OK\r\n");
    let mut c = Raw::connect(server.addr());
    assert_eq!(c.call(&["CLIENT", "SETNAME", "reader"]), b"+OK\r\n");
    let mut s = c.writer;
    // Five replies of 1 MB that it does not read.
    s.write_all(&common::encode(&[b"GET", b"big"]).repeat(5)).unwrap();
    common::wait_until(10, "the reader to be evicted", || named_clients(&mut control, "reader") == 0);
    assert_eq!(info_field(&mut control, "evicted_clients"), "1");
}

#[test]
fn no_evict_clients_count_but_stay_and_the_largest_other_goes() {
    let server = common::start();
    let mut control = control(server.addr());
    let mut kept = Raw::connect(server.addr());
    assert_eq!(kept.call(&["CLIENT", "NO-EVICT", "ON"]), b"+OK\r\n");
    assert_eq!(kept.call(&["CLIENT", "SETNAME", "kept"]), b"+OK\r\n");
    let kept = half_sent_on(kept, 2 * MB);
    let small = half_sent(server.addr(), "small", 256 * 1024);
    let large = half_sent(server.addr(), "large", MB);
    for name in ["kept", "small", "large"] {
        common::wait_until(10, "the read buffers to fill", || {
            tot_mem(&mut control, name).is_some_and(|m| m > 200_000)
        });
    }
    let total: usize = ["kept", "small", "large", "control"]
        .iter()
        .map(|n| tot_mem(&mut control, n).unwrap())
        .sum();
    // Under the limit once the large client goes, not before.
    let limit = total - MB / 2;
    assert_eq!(
        control.call(&["CONFIG", "SET", "maxmemory-clients", &limit.to_string()]),
        b"+OK\r\n"
    );
    assert_eq!(named_clients(&mut control, "kept"), 1);
    assert_eq!(named_clients(&mut control, "small"), 1);
    assert_eq!(named_clients(&mut control, "large"), 0);
    drop((kept, small, large));
}

/// [`half_sent`] on a connection already set up.
fn half_sent_on(c: Raw, size: usize) -> TcpStream {
    let mut s = c.writer;
    let mut request = format!("*2\r\n${}\r\n", size + 1).into_bytes();
    request.resize(request.len() + size, b'v');
    // A client evicted as soon as it announced the argument finds the
    // connection closed.
    let _ = s.write_all(&request);
    s
}

#[test]
fn a_percentage_of_maxmemory_is_a_limit_and_resetstat_clears_the_count() {
    let server = common::start();
    let mut control = control(server.addr());
    assert_eq!(
        control.call(&["CONFIG", "SET", "maxmemory", "60mb", "maxmemory-clients", "5%"]),
        b"+OK\r\n"
    );
    let under = half_sent(server.addr(), "under", MB);
    common::wait_until(10, "the read buffer to fill", || {
        tot_mem(&mut control, "under").is_some_and(|m| m >= MB)
    });
    assert_eq!(named_clients(&mut control, "under"), 1);
    let _over = half_sent(server.addr(), "over", 3 * MB);
    common::wait_until(10, "a client to be evicted", || info_field(&mut control, "evicted_clients") == "1");
    assert_eq!(named_clients(&mut control, "over"), 0);
    assert_eq!(control.call(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    assert_eq!(info_field(&mut control, "evicted_clients"), "0");
    drop(under);
}

/// The room a big argument needs counts as soon as it is announced, as
/// Redis allocates it then: `tot-mem` is over the argument's size after
/// 1,000 of its 220,200 bytes, and the client is evicted on that alone.
fn announced_room(addr: SocketAddr) -> (String, bool, usize) {
    let mut control = control(addr);
    let mut c = Raw::connect(addr);
    assert_eq!(c.call(&["CLIENT", "SETNAME", "announcer"]), b"+OK\r\n");
    let mut s = c.writer;
    let mut request = b"*1\r\n$220200\r\n".to_vec();
    request.resize(request.len() + 1000, b'v');
    s.write_all(&request).unwrap();
    common::wait_until(10, "the bytes to arrive", || {
        text(control.call(&["CLIENT", "LIST"]))
            .lines()
            .any(|l| l.contains("name=announcer") && l.contains(" qbuf=1000 "))
    });
    let memory = tot_mem(&mut control, "announcer").unwrap();
    let qbuf = text(control.call(&["CLIENT", "LIST"]))
        .lines()
        .find(|l| l.contains("name=announcer"))
        .and_then(|l| l.split(' ').find(|f| f.starts_with("qbuf=")).map(str::to_string))
        .unwrap();
    assert_eq!(control.call(&["CONFIG", "SET", "maxmemory-clients", "200000"]), b"+OK\r\n");
    let evicted = named_clients(&mut control, "announcer") == 0;
    drop(s);
    (qbuf, evicted, memory)
}

#[test]
fn a_big_arguments_announced_room_counts_at_once_as_in_redis() {
    let server = common::start();
    let (qbuf, evicted, memory) = announced_room(server.addr());
    assert_eq!(qbuf, "qbuf=1000");
    assert!(evicted);
    assert!(memory >= 220_200, "{memory}");
    if let Some(redis) = common::real_redis() {
        let (theirs_qbuf, theirs_evicted, theirs_memory) = announced_room(redis.addr);
        assert_eq!((theirs_qbuf, theirs_evicted), (qbuf, evicted));
        assert!(theirs_memory >= 220_200, "{theirs_memory}");
    }
}

/// A client that sent 249 of its request's 250 arguments (Redis's "input
/// buffer of a dead client"): the arguments read so far show in CLIENT
/// LIST's `argv-mem`, count in its `tot-mem`, and make it the client
/// eviction evicts once the limit is below them.
fn partial_request(addr: SocketAddr) -> (String, String, bool, usize) {
    let mut control = control(addr);
    let mut c = Raw::connect(addr);
    assert_eq!(c.call(&["CLIENT", "SETNAME", "partial"]), b"+OK\r\n");
    let mut s = c.writer;
    let mut request = b"*250\r\n".to_vec();
    for _ in 0..249 {
        request.extend_from_slice(b"$1000\r\n");
        request.resize(request.len() + 1000, b'x');
        request.extend_from_slice(b"\r\n");
    }
    s.write_all(&request).unwrap();
    let field = |control: &mut Raw, name: &str| {
        text(control.call(&["CLIENT", "LIST"]))
            .lines()
            .find(|l| l.contains("name=partial"))
            .and_then(|l| l.split(' ').find(|f| f.starts_with(&format!("{name}="))).map(str::to_string))
            .unwrap_or_default()
    };
    common::wait_until(10, "the arguments to arrive", || {
        field(&mut control, "argv-mem") == "argv-mem=249000"
    });
    let (qbuf, argv_mem) = (field(&mut control, "qbuf"), field(&mut control, "argv-mem"));
    let memory = tot_mem(&mut control, "partial").unwrap();
    assert_eq!(control.call(&["CONFIG", "SET", "maxmemory-clients", "200000"]), b"+OK\r\n");
    let evicted = named_clients(&mut control, "partial") == 0;
    drop(s);
    (qbuf, argv_mem, evicted, memory)
}

#[test]
fn the_arguments_of_a_request_still_arriving_count_as_in_redis() {
    let server = common::start();
    let (qbuf, argv_mem, evicted, memory) = partial_request(server.addr());
    assert_eq!((qbuf.as_str(), argv_mem.as_str(), evicted), ("qbuf=0", "argv-mem=249000", true));
    assert!(memory >= 249_000, "{memory}");
    if let Some(redis) = common::real_redis() {
        let (theirs_qbuf, theirs_argv, theirs_evicted, theirs_memory) = partial_request(redis.addr);
        assert_eq!((theirs_qbuf, theirs_argv, theirs_evicted), (qbuf, argv_mem, evicted));
        assert!(theirs_memory >= 249_000, "{theirs_memory}");
    }
}
