//! Memory a misbehaving client can make the server hold, measured on the
//! keylock binary as a separate process: its resident set size
//! (/proc/<pid>/status VmRSS) before, during and after, against a stated
//! allowance.

mod common;
use common::*;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The keylock binary on a free port, killed on drop.
struct Binary {
    child: Child,
    addr: SocketAddr,
}

impl Binary {
    fn start(extra: &[&str]) -> Binary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keylock"))
            .args(["--port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("listening on ").expect("announce line").parse().unwrap();
        Binary { child, addr }
    }

    /// Resident set size in bytes.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    /// The largest RSS seen over `period`.
    fn peak_rss(&self, period: Duration) -> u64 {
        let end = Instant::now() + period;
        let mut peak = self.rss();
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
            peak = peak.max(self.rss());
        }
        peak
    }

    fn ping(&self) {
        assert_eq!(Raw::connect(self.addr).call(&["PING"]), b"+PONG\r\n");
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const MB: u64 = 1 << 20;

/// Raises this process's open-file limit (the binary inherits it) and
/// returns how many connections both sides can afford, at most `want`.
fn affordable_connections(want: usize) -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(want as u64 + 256);
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
