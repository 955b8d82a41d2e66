//! Memory a misbehaving client can make the server hold, measured on the
//! keylock binary as a separate process: its resident set size
//! (/proc/<pid>/status VmRSS) before, during and after, against a stated
//! allowance.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

const MB: u64 = 1 << 20;

/// Raises this process's open-file limit (the binary inherits it; never
/// lowered, as tests run side by side) and returns how many connections
/// both sides can afford, at most `want`.
fn affordable_connections(want: usize) -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(want as u64 + 256).max(limit.rlim_cur);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    want.min((limit.rlim_cur as usize).saturating_sub(256))
}

#[test]
fn connections_declaring_512mb_arguments_hold_only_what_they_sent() {
    let n = affordable_connections(2000);
    assert!(n >= 500, "too few file descriptors for this test ({n})");
    let server = Binary::start(&[]);
    let idle = server.rss();
    let mut conns = Vec::with_capacity(n);
    while conns.len() < n {
        // In groups the listen backlog holds, each accepted (the PING on
        // a connection queued after them is answered) before the next.
        let group = (n - conns.len()).min(100);
        conns.extend((0..group).map(|_| TcpStream::connect(server.addr).unwrap()));
        server.ping();
    }
    let connected = server.peak_rss(Duration::from_millis(200));
    for c in &mut conns {
        c.write_all(b"*1\r\n$536870912\r\n").unwrap();
    }
    for c in &mut conns {
        c.write_all(&[b'x'; 100]).unwrap();
    }
    // The server reads connections in turn; a PING on a new one is
    // answered once it has been round them.
    server.ping();
    let declared = server.peak_rss(Duration::from_millis(500));
    drop(conns);
    server.ping();
    let after = server.peak_rss(Duration::from_millis(200));
    eprintln!(
        "{n} connections: idle {} MB, connected {} MB, declared {} MB, closed {} MB",
        idle / MB,
        connected / MB,
        declared / MB,
        after / MB
    );
    // Each connection holds its 100 bytes in a 1 KB read buffer: allow
    // 8 KB a connection over the idle connections, 48 MB over the idle
    // server.
    assert!(
        declared <= connected + n as u64 * 8 * 1024,
        "{} MB over connected",
        (declared - connected) / MB
    );
    assert!(declared <= idle + 48 * MB, "{} MB over idle", (declared - idle) / MB);
}

/// Sends PING without ever reading until the server stops taking them,
/// `limit` bytes are sent, or `deadline` passes; returns the bytes sent.
fn flood_without_reading(addr: SocketAddr, limit: usize, deadline: Instant) -> (TcpStream, usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
    let chunk = b"PING\r\n".repeat(1000);
    let mut sent = 0;
    while sent < limit && Instant::now() < deadline {
        match s.write(&chunk[sent % 6..]) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    (s, sent)
}

#[test]
fn clients_sending_to_a_busy_server_without_reading_do_not_grow_its_memory() {
    let server = Binary::start(&[]);
    let mut runner = Raw::connect(server.addr);
    assert_eq!(runner.call(&["CONFIG", "SET", "busy-reply-threshold", "100"]), b"+OK\r\n");
    runner.send(b"EVAL \"while true do end\" 0\r\n");
    let mut probe = Raw::connect(server.addr);
    wait_until(10, "the script never became busy", || probe.call(&["PING"]).starts_with(b"-BUSY"));
    let before = server.rss();
    // Each PING is answered with 90 bytes of BUSY: 4 clients sending
    // 8 MB each would leave 480 MB of replies if they were all kept.
    let deadline = Instant::now() + Duration::from_secs(5);
    let floods: Vec<_> = (0..4)
        .map(|_| {
            let addr = server.addr;
            std::thread::spawn(move || flood_without_reading(addr, 8 << 20, deadline))
        })
        .collect();
    let floods: Vec<(TcpStream, usize)> = floods.into_iter().map(|t| t.join().unwrap()).collect();
    let during = server.peak_rss(Duration::from_millis(300));
    assert_eq!(
        probe.call(&["PING"]),
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(probe.call(&["SCRIPT", "KILL"]), b"+OK\r\n");
    assert!(runner.reply().starts_with(b"-ERR Script killed"));
    drop(floods);
    server.ping();
    let after = server.peak_rss(Duration::from_millis(200));
    eprintln!(
        "busy: before {} MB, during {} MB, after {} MB",
        before / MB,
        during / MB,
        after / MB
    );
    // Each held-back client holds at most 64 KB of replies plus what one
    // pass reads (4 x 16 KB of PINGs, 15 times that in replies).
    assert!(during <= before + 32 * MB, "{} MB over before", (during - before) / MB);
}

/// INFO's `used_memory` (the bytes allocated, counted by the binary's allocator).
fn used_memory(addr: SocketAddr) -> u64 {
    let info = String::from_utf8(Raw::connect(addr).call(&["INFO", "memory"])).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory")
}

#[test]
fn idle_connections_give_their_read_buffers_back() {
    let n = affordable_connections(1000);
    assert!(n >= 500, "too few file descriptors for this test ({n})");
    let server = Binary::start(&[]);
    let mut conns: Vec<TcpStream> = Vec::with_capacity(n);
    while conns.len() < n {
        // In groups the listen backlog holds.
        let group = (n - conns.len()).min(100);
        conns.extend((0..group).map(|_| TcpStream::connect(server.addr).unwrap()));
        server.ping();
    }
    let ping = |c: &mut TcpStream| {
        c.write_all(b"PING\r\n").unwrap();
        let mut pong = [0; 7];
        c.read_exact(&mut pong).unwrap();
        pong == *b"+PONG\r\n"
    };
    let connected = (used_memory(server.addr), server.rss());
    // A command gives each one Redis's 16 KB read buffer.
    assert!(conns.iter_mut().all(ping));
    let active = (used_memory(server.addr), server.rss());
    assert!(active.0 >= connected.0 + n as u64 * 16 * 1024, "no read buffers while active");
    // Redis gives it back once the client has been idle for more than 2
    // seconds (its cron visits each client once a second); each idle
    // connection then holds at most 2 KB more than before its PING.
    let held = || used_memory(server.addr).saturating_sub(connected.0);
    wait_until(8, "the idle connections' read buffers were kept", || held() <= n as u64 * 2048);
    // The cron gives freed memory back to the OS once a second.
    std::thread::sleep(Duration::from_millis(1500));
    let idle = (used_memory(server.addr), server.rss());
    eprintln!(
        "{n} connections (used_memory, RSS in MB): connected {:?}, after a PING {:?}, idle {:?}",
        (connected.0 / MB, connected.1 / MB),
        (active.0 / MB, active.1 / MB),
        (idle.0 / MB, idle.1 / MB)
    );
    assert!(
        idle.1 <= connected.1 + n as u64 * 2048 + 4 * MB,
        "{} MB resident",
        (idle.1.saturating_sub(connected.1)) / MB
    );
    assert!(conns.iter_mut().all(ping));
}
