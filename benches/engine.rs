//! The engine in-process, without sockets: how long a command or a script
//! takes once parsed, and how long an embedded server takes to start.
//! `cargo bench --bench engine`.
//!
//! The lock scripts are Redisson 4.7.0's, sent by EVALSHA as Redisson does:
//! once with `native-scripts no` (the Lua VM, the path Redis takes) and
//! once run natively.

use bytes::{Bytes, BytesMut};
use criterion::{Criterion, criterion_group, criterion_main};
use keylock::engine::Engine;
use support::engine;

mod support;

const LOCK_ACQUIRE: &[u8] = include_bytes!("../lua/redisson/4.7.0/lock-acquire.lua");
const LOCK_UNLOCK: &[u8] = include_bytes!("../lua/redisson/4.7.0/lock-unlock.lua");

fn cmd(args: &[&[u8]]) -> Vec<Bytes> {
    args.iter().map(|a| Bytes::copy_from_slice(a)).collect()
}

fn run(engine: &mut Engine, commands: &[Vec<Bytes>], out: &mut BytesMut) {
    out.clear();
    engine.run_batch(1, commands.to_vec(), out);
}

fn load(engine: &mut Engine, body: &[u8]) -> String {
    let mut out = BytesMut::new();
    run(engine, &[cmd(&[b"SCRIPT", b"LOAD", body])], &mut out);
    keylock::scripting::sha1_hex(body)
}

fn bench_commands(c: &mut Criterion) {
    let mut e = engine(true);
    let mut out = BytesMut::new();
    let set = vec![cmd(&[b"SET", b"key", b"value"])];
    c.bench_function("engine/set", |b| b.iter(|| run(&mut e, &set, &mut out)));
    let get = vec![cmd(&[b"GET", b"key"])];
    c.bench_function("engine/get", |b| b.iter(|| run(&mut e, &get, &mut out)));
    let hset = vec![cmd(&[b"HSET", b"hash", b"field", b"value"])];
    c.bench_function("engine/hset", |b| b.iter(|| run(&mut e, &hset, &mut out)));
}

fn lock_cycle(native: bool, c: &mut Criterion, name: &str) {
    let mut e = engine(native);
    let acquire = load(&mut e, LOCK_ACQUIRE);
    let unlock = load(&mut e, LOCK_UNLOCK);
    let mut out = BytesMut::new();
    let cycle = vec![
        cmd(&[b"EVALSHA", acquire.as_bytes(), b"1", b"{lock}", b"30000", b"uuid-1:1"]),
        cmd(&[
            b"EVALSHA",
            unlock.as_bytes(),
            b"3",
            b"{lock}",
            b"redisson_lock__channel:{lock}",
            b"redisson_unlock_latch:{lock}:r",
            b"0",
            b"30000",
            b"uuid-1:1",
            b"PUBLISH",
            b"8000",
        ]),
        cmd(&[b"DEL", b"redisson_unlock_latch:{lock}:r"]),
    ];
    c.bench_function(name, |b| b.iter(|| run(&mut e, &cycle, &mut out)));
    let acquire_only = vec![cmd(&[b"EVALSHA", acquire.as_bytes(), b"1", b"{held}", b"30000", b"uuid-1:1"])];
    c.bench_function(&format!("{name}/acquire-reentrant"), |b| {
        b.iter(|| run(&mut e, &acquire_only, &mut out))
    });
}

fn bench_scripts(c: &mut Criterion) {
    lock_cycle(false, c, "evalsha/lua/lock-cycle");
    lock_cycle(true, c, "evalsha/native/lock-cycle");
}

/// Start to first reply: what an embedding test suite pays per server.
fn bench_start(c: &mut Criterion) {
    c.bench_function("server/start-ping-stop", |b| {
        b.iter(|| {
            let server = keylock::Server::ephemeral().start().expect("start");
            let mut s = std::net::TcpStream::connect(server.addr()).expect("connect");
            use std::io::{Read, Write};
            s.write_all(b"PING\r\n").unwrap();
            let mut buf = [0u8; 7];
            s.read_exact(&mut buf).unwrap();
            server.shutdown();
        })
    });
}

criterion_group!(benches, bench_commands, bench_scripts, bench_start);
criterion_main!(benches);
