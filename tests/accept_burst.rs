//! The listen backlog is `tcp-backlog` (511 by default, as Redis): while
//! the server cannot accept, the kernel completes that many connects for
//! it, so a burst of clients (every application instance reconnecting
//! after a blip) is not left waiting on SYN retransmits.

mod common;
use common::*;

use std::net::TcpStream;
use std::time::Duration;

/// Connects up to `n` clients while the server process is stopped (it
/// accepts none); how many the kernel completed.
fn connects_while_stopped(server: &Binary, n: usize) -> (usize, Vec<TcpStream>) {
    let pid = server.pid() as libc::pid_t;
    // SAFETY: signals to our own child process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let mut conns = Vec::new();
    for _ in 0..n {
        match TcpStream::connect_timeout(&server.addr, Duration::from_millis(300)) {
            Ok(c) => conns.push(c),
            Err(_) => break,
        }
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    (conns.len(), conns)
}

#[test]
fn the_kernel_holds_a_burst_of_connects_up_to_the_backlog() {
    let server = Binary::start(&[]);
    let (held, conns) = connects_while_stopped(&server, 400);
    assert_eq!(held, 400, "the default backlog of 511 holds 400 connects");
    // Once running again, every one of them is served.
    for mut c in conns.into_iter().step_by(40) {
        use std::io::{Read, Write};
        c.write_all(b"PING\r\n").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut reply = [0u8; 7];
        c.read_exact(&mut reply).unwrap();
        assert_eq!(&reply, b"+PONG\r\n");
    }
}

#[test]
fn tcp_backlog_sets_how_many_connects_the_kernel_holds() {
    let server = Binary::start(&["--tcp-backlog", "50"]);
    let (held, _conns) = connects_while_stopped(&server, 400);
    // Linux completes backlog + 1 connects before it drops SYNs.
    assert!((50..=60).contains(&held), "held {held} with tcp-backlog 50");
    let mut c = Raw::connect(server.addr);
    assert_eq!(
        c.call(&["CONFIG", "GET", "tcp-backlog"]),
        b"*2\r\n$11\r\ntcp-backlog\r\n$2\r\n50\r\n"
    );
}
