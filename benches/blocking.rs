//! The event machinery under load, keylock against redis-server in one run
//! (`cargo bench --bench blocking`), over real sockets:
//!
//! - **BLPOP/LPUSH ping-pong**: two clients, each pushing to the list the
//!   other blocks on and then blocking on its own, so every round trip is
//!   a block, a wake-up and a served pop on each side;
//! - **XADD/XREADGROUP**: a producer pipelining XADDs while a consumer
//!   reads them through a group with `XREADGROUP … BLOCK 0` and XACKs
//!   them, messages per second end to end.
//!
//! Each workload runs on keylock (the release binary, `--native-scripts`
//! untouched) and on redis-server 7.0.15 (Debian's, from PATH), five times
//! each, alternating, and the table gives the medians of both rates and of
//! each server's CPU time per operation, with their ratios. Without
//! redis-server the bench says so and measures keylock alone. Figures go
//! in the README's benchmark section; they are ratios, not assertions.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Round trips of the ping-pong.
const PING_PONGS: usize = 20_000;
/// Stream entries produced and consumed.
const MESSAGES: usize = 200_000;
/// XADDs per pipelined batch, and the consumer's COUNT.
const BATCH: usize = 100;

/// A server process on a free port, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `program` with redis-server style arguments and waits until it
/// answers PING.
fn start(program: &str, extra: &[&str]) -> Option<Server> {
    let port = free_port();
    let child = Command::new(program)
        .args(["--port", &port.to_string(), "--save", "", "--appendonly", "no"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(mut c) = Client::connect(port)
            && c.call(&["PING"]) == "PONG"
        {
            return Some(server);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A raw RESP connection: commands out, replies read back whole.
struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(port: u16) -> std::io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        Ok(Client {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    fn encode(out: &mut Vec<u8>, args: &[&str]) {
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }

    fn send(&mut self, commands: &[&[&str]]) {
        let mut out = Vec::new();
        for args in commands {
            Client::encode(&mut out, args);
        }
        self.writer.write_all(&out).expect("send");
    }

    /// One whole reply; its first line's text (enough for the checks here).
    fn reply(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("reply");
        let head = line.trim_end().to_string();
        let (kind, rest) = head.split_at(1);
        match kind {
            "*" => {
                let n: i64 = rest.parse().expect("array length");
                for _ in 0..n.max(0) {
                    self.reply();
                }
            }
            "$" => {
                let n: i64 = rest.parse().expect("bulk length");
                if n >= 0 {
                    let mut data = vec![0; n as usize + 2];
                    self.reader.read_exact(&mut data).expect("bulk");
                }
            }
            _ => {}
        }
        rest.to_string()
    }

    fn call(&mut self, args: &[&str]) -> String {
        self.send(&[args]);
        self.reply()
    }
}

/// Round trips per second of two clients blocking on each other's list,
/// and how many.
fn ping_pong(port: u16) -> (f64, usize) {
    let mut setup = Client::connect(port).expect("connect");
    setup.call(&["DEL", "ping", "pong"]);
    let mut a = Client::connect(port).expect("connect");
    let mut b = Client::connect(port).expect("connect");
    let started = Instant::now();
    let other = std::thread::spawn(move || {
        b.send(&[&["BLPOP", "ping", "0"]]);
        for _ in 0..PING_PONGS {
            b.reply();
            b.send(&[&["LPUSH", "pong", "x"], &["BLPOP", "ping", "0"]]);
            b.reply();
        }
    });
    for _ in 0..PING_PONGS {
        a.send(&[&["LPUSH", "ping", "x"], &["BLPOP", "pong", "0"]]);
        a.reply();
        a.reply();
    }
    // The other side's last BLPOP waits for one more push.
    a.call(&["LPUSH", "ping", "x"]);
    other.join().expect("the other client");
    (PING_PONGS as f64 / started.elapsed().as_secs_f64(), PING_PONGS)
}

/// Messages per second from XADD to XACK through a consumer group, and
/// how many.
fn stream_group(port: u16) -> (f64, usize) {
    let mut setup = Client::connect(port).expect("connect");
    setup.call(&["DEL", "s"]);
    setup.call(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let mut consumer = Client::connect(port).expect("connect");
    let started = Instant::now();
    let reader = std::thread::spawn(move || {
        let count = BATCH.to_string();
        let mut seen = 0;
        let mut line = String::new();
        while seen < MESSAGES {
            consumer.send(&[&["XREADGROUP", "GROUP", "g", "c", "COUNT", &count, "BLOCK", "0", "STREAMS", "s", ">"]]);
            // [[s, [[id, [f, v]], …]]]: read the entry IDs to acknowledge.
            let mut ids = Vec::new();
            // `*1`, `*2`, `$1`, `s`: the one stream's name.
            for _ in 0..4 {
                line.clear();
                consumer.reader.read_line(&mut line).expect("reply");
            }
            let mut header = String::new();
            consumer.reader.read_line(&mut header).expect("entries");
            let n: usize = header.trim_end()[1..].parse().expect("entry count");
            for _ in 0..n {
                line.clear();
                consumer.reader.read_line(&mut line).expect("entry");
                line.clear();
                consumer.reader.read_line(&mut line).expect("id length");
                line.clear();
                consumer.reader.read_line(&mut line).expect("id");
                ids.push(line.trim_end().to_string());
                consumer.reply();
            }
            let mut ack: Vec<&str> = vec!["XACK", "s", "g"];
            ack.extend(ids.iter().map(String::as_str));
            consumer.call(&ack);
            seen += n;
        }
    });
    let mut producer = Client::connect(port).expect("connect");
    let xadd: &[&str] = &["XADD", "s", "*", "field", "value"];
    let batch: Vec<&[&str]> = vec![xadd; BATCH];
    for _ in 0..MESSAGES / BATCH {
        producer.send(&batch);
        for _ in 0..BATCH {
            producer.reply();
        }
    }
    reader.join().expect("the consumer");
    (MESSAGES as f64 / started.elapsed().as_secs_f64(), MESSAGES)
}

/// CPU time the server process has used, all its threads (nanoseconds,
/// from `/proc/<pid>/task/*/schedstat`).
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum()
}

/// One run on `server`: its rate, and the server's CPU time per operation
/// (microseconds), which the machine's scheduling noise moves far less
/// than a latency-bound rate.
fn measure(server: &Server, run: fn(u16) -> (f64, usize)) -> (f64, f64) {
    let before = cpu_ns(server.child.id());
    let (rate, ops) = run(server.port);
    let used = cpu_ns(server.child.id()) - before;
    (rate, used as f64 / 1000.0 / ops as f64)
}

/// Runs of each workload per server, alternating between the two so that
/// drift in the machine's load or clock falls on both; the table gives
/// the median of each.
const ROUNDS: usize = 5;

fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; a filter, if any, is not used.
    let keylock = start(env!("CARGO_BIN_EXE_keylock"), &[]).expect("keylock starts");
    let redis = start("redis-server", &[]);
    if redis.is_none() {
        eprintln!("redis-server not found on PATH: measuring keylock alone (apt-get install redis-server)");
    }
    println!("medians of {ROUNDS} alternating runs; server CPU in microseconds per operation");
    println!(
        "{:<26} {:>11} {:>11} {:>7} {:>10} {:>10} {:>7}",
        "workload", "keylock /s", "redis /s", "ratio", "keylock us", "redis us", "ratio"
    );
    for (name, run) in [
        ("BLPOP/LPUSH ping-pong", ping_pong as fn(u16) -> (f64, usize)),
        ("XADD -> XREADGROUP+XACK", stream_group),
    ] {
        let (mut ours, mut theirs) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
        for _ in 0..ROUNDS {
            let (rate, cpu) = measure(&keylock, run);
            ours.0.push(rate);
            ours.1.push(cpu);
            if let Some(r) = &redis {
                let (rate, cpu) = measure(r, run);
                theirs.0.push(rate);
                theirs.1.push(cpu);
            }
        }
        let (rate, cpu) = (median(ours.0), median(ours.1));
        if theirs.0.is_empty() {
            println!("{name:<26} {rate:>11.0} {:>11} {:>7} {cpu:>10.2} {:>10} {:>7}", "-", "-", "-", "-");
        } else {
            let (their_rate, their_cpu) = (median(theirs.0), median(theirs.1));
            println!(
                "{name:<26} {rate:>11.0} {their_rate:>11.0} {:>6.2}x {cpu:>10.2} {their_cpu:>10.2} {:>6.2}x",
                rate / their_rate,
                their_cpu / cpu
            );
        }
    }
}
