//! A soak test: 32 clients against one keylock for `KEYLOCK_SOAK_SECS`
//! seconds (600 by default), mixing Redisson lock cycles on shared locks,
//! pub/sub, MULTI/EXEC and connections dropped in the middle of commands,
//! while a probe client PINGs every 10 ms. It checks:
//!
//! - no reply is lost or wrong: every client checks each reply it waits
//!   for against what its command must answer;
//! - mutual exclusion: a counter read and written back (GET, then SET) by
//!   whoever holds a lock ends equal to the number of acknowledged cycles
//!   of that lock;
//! - transactions: two counters incremented in one MULTI/EXEC are equal;
//! - pub/sub: each subscriber receives every message published on its
//!   channel while it was subscribed, in order;
//!
//! and reports the resident memory after warm-up and once the load has
//! stopped, and the probe's latency percentiles. It is `#[ignore]`d (it
//! runs for minutes); run it with
//!
//! ```sh
//! cargo build --release
//! KEYLOCK_SOAK_BIN=target/release/keylock cargo test --release --test soak -- --ignored --nocapture
//! ```
//!
//! (`KEYLOCK_SOAK_SECS=60` for a shorter run). The README has the figures
//! of one run.

mod common;

use common::Binary;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");
const UNLOCK: &str = include_str!("../lua/redisson/4.7.0/lock-unlock.lua");

const LOCKERS: usize = 16;
const TRANSACTORS: usize = 6;
const PUBLISHERS: usize = 3;
const SUBSCRIBERS: usize = 3;
const DROPPERS: usize = 4;
const LOCKS: usize = 4;
const LEASE_MS: u64 = 30_000;

fn start() -> Binary {
    let program = std::env::var("KEYLOCK_SOAK_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_keylock").to_string());
    Binary::start_program(&program, &["--save", ""])
}

/// A blocking RESP client that reports a closed connection as an error.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn connect(addr: SocketAddr) -> Conn {
        let writer = TcpStream::connect(addr).unwrap();
        writer.set_nodelay(true).unwrap();
        writer.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Conn {
            reader: BufReader::new(writer.try_clone().unwrap()),
            writer,
        }
    }

    fn send(&mut self, args: &[&[u8]]) {
        self.writer.write_all(&common::encode(args)).unwrap();
    }

    fn call(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&args);
        self.reply()
    }

    fn reply(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        assert!(line.ends_with(b"\r\n"), "connection closed mid-reply: {line:?}");
        let mut out = line.clone();
        let rest = std::str::from_utf8(&line[1..line.len() - 2]).unwrap().to_string();
        match line[0] {
            b'$' if rest != "-1" => {
                let mut data = vec![0; rest.parse::<usize>().unwrap() + 2];
                self.reader.read_exact(&mut data).unwrap();
                out.extend(data);
            }
            b'*' if rest != "-1" => {
                for _ in 0..rest.parse::<usize>().unwrap() {
                    out.extend(self.reply());
                }
            }
            _ => {}
        }
        out
    }

    fn eval(&mut self, body: &str, keys: &[&str], args: &[&str]) -> Vec<u8> {
        let numkeys = keys.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"EVAL", body.as_bytes(), numkeys.as_bytes()];
        argv.extend(keys.iter().map(|k| k.as_bytes()));
        argv.extend(args.iter().map(|a| a.as_bytes()));
        self.send(&argv);
        self.reply()
    }
}

fn int_reply(reply: &[u8]) -> i64 {
    std::str::from_utf8(&reply[1..reply.len() - 2]).unwrap().parse().unwrap()
}

/// What the load did, for the final checks.
#[derive(Default)]
struct Totals {
    cycles: Vec<AtomicU64>,
    transactions: AtomicU64,
    published: Vec<AtomicU64>,
    ops: AtomicU64,
    anomalies: Mutex<Vec<String>>,
}

impl Totals {
    fn anomaly(&self, what: String) {
        let mut anomalies = self.anomalies.lock().unwrap();
        if anomalies.len() < 20 {
            anomalies.push(what);
        }
    }
}

/// Redisson `lock()`: acquire (retrying while another holds it), the
/// fenced read-modify-write of the lock's counter, unlock.
fn locker(addr: SocketAddr, id: usize, stop: &AtomicBool, totals: &Totals) {
    let mut c = Conn::connect(addr);
    let owner = format!("soak-{id}:1");
    let lease = LEASE_MS.to_string();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let lock = (id + n as usize) % LOCKS;
        let name = format!("soak-lock:{lock}");
        n += 1;
        loop {
            let reply = c.eval(ACQUIRE, &[&name], &[&lease, &owner]);
            if reply == b"$-1\r\n" {
                break;
            }
            if !reply.starts_with(b":") {
                totals.anomaly(format!("acquire of {name} replied {:?}", String::from_utf8_lossy(&reply)));
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let fence = format!("soak-fence:{lock}");
        let seen = c.call(&["GET", &fence]);
        let value = if seen == b"$-1\r\n" {
            0
        } else {
            std::str::from_utf8(&seen).unwrap().lines().nth(1).unwrap().parse::<u64>().unwrap()
        };
        if c.call(&["SET", &fence, &(value + 1).to_string()]) != b"+OK\r\n" {
            totals.anomaly(format!("SET of {fence} failed"));
        }
        totals.cycles[lock].fetch_add(1, Ordering::Relaxed);
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let latch = format!("redisson_unlock_latch:{{{name}}}:{owner}-{n}");
        let reply = c.eval(UNLOCK, &[&name, &channel, &latch], &["0", &lease, &owner, "PUBLISH", "8600"]);
        if reply != b":1\r\n" {
            totals.anomaly(format!("unlock of {name} replied {:?}", String::from_utf8_lossy(&reply)));
        }
        totals.ops.fetch_add(4, Ordering::Relaxed);
    }
}

/// MULTI / INCR a / INCR b / EXEC: both answers the same, one more than before.
fn transactor(addr: SocketAddr, id: usize, stop: &AtomicBool, totals: &Totals) {
    let mut c = Conn::connect(addr);
    let (a, b) = (format!("soak-tx:{id}:a"), format!("soak-tx:{id}:b"));
    let mut expected = 1;
    while !stop.load(Ordering::Relaxed) {
        let replies = [c.call(&["MULTI"]), c.call(&["INCR", &a]), c.call(&["INCR", &b]), c.call(&["EXEC"])];
        let exec = format!("*2\r\n:{expected}\r\n:{expected}\r\n");
        if replies[0] != b"+OK\r\n" || replies[1] != b"+QUEUED\r\n" || replies[2] != b"+QUEUED\r\n" || replies[3] != exec.as_bytes() {
            totals.anomaly(format!(
                "transaction {id} replied {:?}",
                replies.map(|r| String::from_utf8_lossy(&r).into_owned())
            ));
            return;
        }
        expected += 1;
        totals.transactions.fetch_add(1, Ordering::Relaxed);
        totals.ops.fetch_add(4, Ordering::Relaxed);
    }
}

/// PUBLISH soak-channel:N <sequence>, numbered from 1.
fn publisher(addr: SocketAddr, id: usize, stop: &AtomicBool, totals: &Totals) {
    let mut c = Conn::connect(addr);
    let channel = format!("soak-channel:{id}");
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let reply = c.call(&["PUBLISH", &channel, &seq.to_string()]);
        if !reply.starts_with(b":") {
            totals.anomaly(format!("PUBLISH replied {:?}", String::from_utf8_lossy(&reply)));
            return;
        }
        totals.published[id].fetch_add(1, Ordering::Relaxed);
        totals.ops.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Subscribes to one publisher's channel and checks that the sequence
/// numbers arrive without a gap, reconnecting now and then.
fn subscriber(addr: SocketAddr, id: usize, stop: &AtomicBool, totals: &Totals) {
    while !stop.load(Ordering::Relaxed) {
        let mut c = Conn::connect(addr);
        let channel = format!("soak-channel:{}", id % PUBLISHERS);
        c.send(&[b"SUBSCRIBE", channel.as_bytes()]);
        c.reply();
        c.writer.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut last: Option<u64> = None;
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            let mut line = Vec::new();
            match c.reader.read_until(b'\n', &mut line) {
                Ok(0) => {
                    totals.anomaly("subscriber's connection closed".into());
                    return;
                }
                Ok(_) => {}
                Err(_) => continue,
            }
            if line != b"*3\r\n" {
                continue;
            }
            // $7 message, $N channel, $N sequence.
            let mut parts = Vec::new();
            for _ in 0..3 {
                let mut len = Vec::new();
                c.reader.read_until(b'\n', &mut len).unwrap();
                let mut data = Vec::new();
                c.reader.read_until(b'\n', &mut data).unwrap();
                parts.push(String::from_utf8_lossy(&data[..data.len() - 2]).into_owned());
            }
            let seq: u64 = parts[2].parse().unwrap();
            if let Some(previous) = last
                && seq != previous + 1
            {
                totals.anomaly(format!("subscriber {id} got {seq} after {previous}"));
            }
            last = Some(seq);
            totals.ops.fetch_add(1, Ordering::Relaxed);
        }
        // Dropped with its subscription: a disconnect under load.
    }
}

/// Connections dropped in the middle of a command, or right after
/// sending one (its reply never read).
fn dropper(addr: SocketAddr, id: usize, stop: &AtomicBool, totals: &Totals) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let mut s = TcpStream::connect(addr).unwrap();
        // A hundred keys a dropper, so the data set stays the same size.
        let key = format!("soak-drop:{id}:{}", n % 100);
        let request = common::encode(&[b"SET", key.as_bytes(), b"value"]);
        let cut = match n % 3 {
            0 => request.len() / 2,
            1 => request.len(),
            _ => 3,
        };
        let _ = s.write_all(&request[..cut]);
        drop(s);
        totals.ops.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
#[ignore = "runs for minutes: see the module doc"]
fn thirty_two_clients_for_ten_minutes_lose_nothing_and_keep_locks_exclusive() {
    let secs: u64 = std::env::var("KEYLOCK_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(600);
    let server = start();
    let addr = server.addr;
    let pid = server.pid();
    let stop = Arc::new(AtomicBool::new(false));
    let totals = Arc::new(Totals {
        cycles: (0..LOCKS).map(|_| AtomicU64::new(0)).collect(),
        published: (0..PUBLISHERS).map(|_| AtomicU64::new(0)).collect(),
        ..Totals::default()
    });
    let mut threads = Vec::new();
    type Role = fn(SocketAddr, usize, &AtomicBool, &Totals);
    let roles: [(usize, Role); 5] = [
        (LOCKERS, locker),
        (TRANSACTORS, transactor),
        (PUBLISHERS, publisher),
        (SUBSCRIBERS, subscriber),
        (DROPPERS, dropper),
    ];
    for (count, role) in roles {
        for id in 0..count {
            let (stop, totals) = (stop.clone(), totals.clone());
            threads.push(std::thread::spawn(move || role(addr, id, &stop, &totals)));
        }
    }
    assert_eq!(threads.len(), 32);
    // The probe: PING every 10 ms on a connection of its own.
    let probe = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = Conn::connect(addr);
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
                latencies.push(t.elapsed());
                std::thread::sleep(Duration::from_millis(10));
            }
            latencies
        })
    };
    let warm_up = Duration::from_secs((secs / 10).clamp(5, 60));
    std::thread::sleep(warm_up);
    let rss_warm = common::rss_of(pid);
    std::thread::sleep(Duration::from_secs(secs).saturating_sub(warm_up));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let mut latencies = probe.join().unwrap();
    // Once the load has stopped and the cron had time to hand memory back.
    std::thread::sleep(Duration::from_secs(3));
    let rss_after = common::rss_of(pid);

    let anomalies = totals.anomalies.lock().unwrap().clone();
    let mut c = Conn::connect(addr);
    let mut fence_errors = Vec::new();
    for lock in 0..LOCKS {
        let cycles = totals.cycles[lock].load(Ordering::Relaxed);
        let fence = c.call(&["GET", &format!("soak-fence:{lock}")]);
        let fence: u64 = std::str::from_utf8(&fence).unwrap().lines().nth(1).unwrap_or("0").parse().unwrap();
        if fence != cycles {
            fence_errors.push(format!("lock {lock}: counter {fence}, cycles {cycles}"));
        }
    }
    for id in 0..TRANSACTORS {
        let a = int_reply(&c.call(&["INCRBY", &format!("soak-tx:{id}:a"), "0"]));
        let b = int_reply(&c.call(&["INCRBY", &format!("soak-tx:{id}:b"), "0"]));
        assert!(a > 0 && a == b, "transaction {id}: counters {a} and {b}");
    }
    latencies.sort();
    let cycles: u64 = totals.cycles.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    println!("soak: {secs} s, 32 clients, {} operations", totals.ops.load(Ordering::Relaxed));
    println!(
        "lock cycles {cycles}, transactions {}, messages published {}",
        totals.transactions.load(Ordering::Relaxed),
        totals.published.iter().map(|p| p.load(Ordering::Relaxed)).sum::<u64>()
    );
    println!(
        "RSS after warm-up {:.1} MiB, after the load stopped {:.1} MiB ({:+.1}%)",
        rss_warm as f64 / 1048576.0,
        rss_after as f64 / 1048576.0,
        (rss_after as f64 / rss_warm as f64 - 1.0) * 100.0
    );
    println!(
        "probe PING: {} samples, p50 {:?}, p99 {:?}, p99.9 {:?}, max {:?}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        latencies.last().copied().unwrap_or_default()
    );
    assert!(anomalies.is_empty(), "lost or wrong replies: {anomalies:#?}");
    assert!(fence_errors.is_empty(), "mutual exclusion broken: {fence_errors:?}");
    assert!(cycles > 0 && totals.transactions.load(Ordering::Relaxed) > 0);
}
