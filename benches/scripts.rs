//! Lock scripts native vs Lua: EVALSHA of Redisson 4.7.0's lock-acquire and
//! lock-unlock through two in-process servers, one with `native-scripts
//! yes` (the default) and one with `native-scripts no`, over a real TCP
//! connection. Each iteration sends a pipeline of 100 scripts and reads the
//! 100 replies, so the network cost is amortized and what differs is the
//! engine's cost per script.
//!
//! Cases:
//! - `acquire-reentrant`: the owner takes its lock again (EXISTS, HEXISTS,
//!   HINCRBY, PEXPIRE);
//! - `acquire-contended`: another thread asks (EXISTS, HEXISTS, PTTL);
//! - `unlock-reentrant`: one hold released, the lock still held (GET latch,
//!   HEXISTS, HINCRBY, PEXPIRE, SET latch PX), latches cleared by one DEL
//!   per pipeline;
//! - `lock-unlock-cycle`: Redisson's uncontended lock() + unlock(): acquire,
//!   unlock (DEL, PUBLISH, SET latch PX) and the client's DEL of the latch,
//!   50 cycles per pipeline;
//! - `rwlock-read-cycle`: a read lock taken and released while another
//!   reader holds it (the unlock walks both readers' timeout keys), with
//!   the latch DEL, 50 cycles per pipeline.
//!
//! `cargo bench --bench scripts`; the ratio native/Lua is in the README.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keylock::{Config, Server, ServerHandle};

const PIPELINE: usize = 100;
const OWNER: &str = "5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:1";
const FOREIGN: &str = "8e2d1c0b-7a6f-4e5d-8c4b-3a2918070605:57";

fn body(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/lua/redisson/4.7.0/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend(b"\r\n");
    }
}

struct Conn {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(server: &ServerHandle) -> Conn {
        let s = TcpStream::connect(server.addr()).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    /// Sends a pipeline and reads `n` replies; every reply here is one line
    /// (an integer or a nil) except bulk strings, which are read through.
    fn round_trip(&mut self, pipeline: &[u8], n: usize) {
        self.writer.write_all(pipeline).unwrap();
        let mut line = Vec::with_capacity(64);
        for _ in 0..n {
            line.clear();
            self.reader.read_until(b'\n', &mut line).unwrap();
            match line.first() {
                Some(b':') => {}
                Some(b'$') if line.starts_with(b"$-1") => {}
                Some(b'$') => {
                    let len: usize = std::str::from_utf8(&line[1..line.len() - 2]).unwrap().parse().unwrap();
                    let mut data = vec![0; len + 2];
                    self.reader.read_exact(&mut data).unwrap();
                }
                Some(b'+') => {}
                _ => panic!("unexpected reply {:?}", String::from_utf8_lossy(&line)),
            }
        }
    }

    fn call(&mut self, args: &[&[u8]]) {
        let mut out = Vec::new();
        encode(args, &mut out);
        self.round_trip(&out, 1);
    }
}

fn server(native: bool) -> ServerHandle {
    let mut config = Config::ephemeral();
    if !native {
        config.directives.push(("native-scripts".into(), vec!["no".into()]));
    }
    Server::new(config).start().unwrap()
}

struct Scripts {
    acquire: String,
    unlock: String,
    read_acquire: String,
    read_unlock: String,
}

fn load(conn: &mut Conn) -> Scripts {
    let names = [
        "lock-acquire.lua",
        "lock-unlock.lua",
        "rwlock-read-acquire.lua",
        "rwlock-read-unlock.lua",
    ];
    for name in names {
        conn.call(&[b"SCRIPT", b"LOAD", &body(name)]);
    }
    let sha = |name: &str| sha1_smol::Sha1::from(body(name)).digest().to_string();
    Scripts {
        acquire: sha(names[0]),
        unlock: sha(names[1]),
        read_acquire: sha(names[2]),
        read_unlock: sha(names[3]),
    }
}

fn read_acquire(out: &mut Vec<u8>, s: &Scripts, owner: &str) {
    let prefix = format!("{{rw}}:{owner}:rwlock_timeout");
    let writer = format!("{owner}:write");
    encode(
        &[
            b"EVALSHA",
            s.read_acquire.as_bytes(),
            b"2",
            b"rw",
            prefix.as_bytes(),
            b"30000",
            owner.as_bytes(),
            writer.as_bytes(),
        ],
        out,
    );
}

fn read_unlock(out: &mut Vec<u8>, s: &Scripts, owner: &str, latch: &str) {
    let prefix = format!("{{rw}}:{owner}:rwlock_timeout");
    encode(
        &[
            b"EVALSHA",
            s.read_unlock.as_bytes(),
            b"5",
            b"rw",
            b"redisson_rwlock:{rw}",
            prefix.as_bytes(),
            b"{rw}",
            latch.as_bytes(),
            b"0",
            owner.as_bytes(),
            b"PUBLISH",
            b"8600",
        ],
        out,
    );
}

fn acquire(out: &mut Vec<u8>, s: &Scripts, lock: &str, owner: &str) {
    encode(
        &[b"EVALSHA", s.acquire.as_bytes(), b"1", lock.as_bytes(), b"30000", owner.as_bytes()],
        out,
    );
}

fn unlock(out: &mut Vec<u8>, s: &Scripts, lock: &str, latch: &str) {
    let channel = format!("redisson_lock__channel:{{{lock}}}");
    encode(
        &[
            b"EVALSHA",
            s.unlock.as_bytes(),
            b"3",
            lock.as_bytes(),
            channel.as_bytes(),
            latch.as_bytes(),
            b"0",
            b"30000",
            OWNER.as_bytes(),
            b"PUBLISH",
            b"8600",
        ],
        out,
    );
}

fn bench_scripts(c: &mut Criterion) {
    let servers = [("native", server(true)), ("lua", server(false))];
    let mut group = c.benchmark_group("scripts");
    group.warm_up_time(Duration::from_millis(700));
    group.measurement_time(Duration::from_secs(2));
    group.sample_size(20);
    group.throughput(Throughput::Elements(PIPELINE as u64));

    for (mode, server) in &servers {
        let mut conn = Conn::open(server);
        let s = load(&mut conn);

        let mut pipeline = Vec::new();
        for _ in 0..PIPELINE {
            acquire(&mut pipeline, &s, "reentrant", OWNER);
        }
        group.bench_function(format!("acquire-reentrant/{mode}"), |b| {
            b.iter(|| conn.round_trip(&pipeline, PIPELINE))
        });

        conn.call(&[b"HSET", b"contended", OWNER.as_bytes(), b"1"]);
        conn.call(&[b"PEXPIRE", b"contended", b"3600000"]);
        let mut pipeline = Vec::new();
        for _ in 0..PIPELINE {
            acquire(&mut pipeline, &s, "contended", FOREIGN);
        }
        group.bench_function(format!("acquire-contended/{mode}"), |b| {
            b.iter(|| conn.round_trip(&pipeline, PIPELINE))
        });

        conn.call(&[b"HSET", b"held", OWNER.as_bytes(), b"1000000000000"]);
        let latches: Vec<String> = (0..PIPELINE).map(|i| format!("redisson_unlock_latch:{{held}}:{i}")).collect();
        let mut pipeline = Vec::new();
        for latch in &latches {
            unlock(&mut pipeline, &s, "held", latch);
        }
        let mut del: Vec<&[u8]> = vec![b"DEL"];
        del.extend(latches.iter().map(|l| l.as_bytes()));
        encode(&del, &mut pipeline);
        group.bench_function(format!("unlock-reentrant/{mode}"), |b| {
            b.iter(|| conn.round_trip(&pipeline, PIPELINE + 1))
        });

        let mut pipeline = Vec::new();
        let latch = "redisson_unlock_latch:{cycle}:1";
        for _ in 0..PIPELINE / 2 {
            acquire(&mut pipeline, &s, "cycle", OWNER);
            unlock(&mut pipeline, &s, "cycle", latch);
            encode(&[b"DEL", latch.as_bytes()], &mut pipeline);
        }
        group.bench_function(format!("lock-unlock-cycle/{mode}"), |b| {
            b.iter(|| conn.round_trip(&pipeline, PIPELINE / 2 * 3))
        });

        let mut setup = Vec::new();
        read_acquire(&mut setup, &s, FOREIGN);
        conn.round_trip(&setup, 1);
        conn.call(&[b"PERSIST", format!("{{rw}}:{FOREIGN}:rwlock_timeout:1").as_bytes()]);
        let mut pipeline = Vec::new();
        let latch = "redisson_unlock_latch:{rw}:1";
        for _ in 0..PIPELINE / 2 {
            read_acquire(&mut pipeline, &s, OWNER);
            read_unlock(&mut pipeline, &s, OWNER, latch);
            encode(&[b"DEL", latch.as_bytes()], &mut pipeline);
        }
        group.bench_function(format!("rwlock-read-cycle/{mode}"), |b| {
            b.iter(|| conn.round_trip(&pipeline, PIPELINE / 2 * 3))
        });
    }
    group.finish();
    for (_, s) in servers {
        s.shutdown();
    }
}

criterion_group!(benches, bench_scripts);
criterion_main!(benches);
