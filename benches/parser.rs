//! keylock's request parser (`server::parser`) against the `redis-protocol`
//! crate's RESP2 decoder, on the same requests: both turn a read buffer
//! holding a pipeline into one argument vector (`Vec<Bytes>`) per command,
//! without copying the arguments. The decision this measures is in the
//! README's design notes.
//!
//! Cases: a pipeline of 16 `SET key value` (the common small request), 16
//! Redisson lock-acquire `EVALSHA`s (a 40-byte SHA, one key, two
//! arguments), and one `SET` of a 100 KB value.

use bytes::{Bytes, BytesMut};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keylock::server::parser::{Limits, RequestParser};
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::BytesFrame;

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn pipeline(command: &[&[u8]], n: usize) -> Vec<u8> {
    let one = encode(command);
    one.iter().copied().cycle().take(one.len() * n).collect()
}

const LIMITS: Limits = Limits {
    proto_max_bulk_len: 512 * 1024 * 1024,
    authenticated: true,
};

/// keylock: every command in `input`, as the connection parses a read.
fn keylock_parse(input: &[u8]) -> Vec<Vec<Bytes>> {
    let mut buf = BytesMut::from(input);
    let mut parser = RequestParser::default();
    let mut out = Vec::new();
    while let Ok(Some(argv)) = parser.next(&mut buf, LIMITS) {
        out.push(argv);
    }
    out
}

/// redis-protocol: every frame in `input`, each array's bulk strings as an
/// argument vector.
fn crate_parse(input: &[u8]) -> Vec<Vec<Bytes>> {
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    while let Ok(Some((frame, _, _))) = decode_bytes_mut(&mut buf) {
        if let BytesFrame::Array(items) = frame {
            out.push(
                items
                    .into_iter()
                    .filter_map(|f| match f {
                        BytesFrame::BulkString(b) => Some(b),
                        _ => None,
                    })
                    .collect(),
            );
        }
    }
    out
}

fn bench_parsers(c: &mut Criterion) {
    let big = vec![b'v'; 100 * 1024];
    let cases: Vec<(&str, Vec<u8>, usize)> = vec![
        (
            "set x16",
            pipeline(&[b"SET", b"key:12345", b"some-value-of-32-bytes-000000000"], 16),
            16,
        ),
        (
            "lock-acquire evalsha x16",
            pipeline(
                &[
                    b"EVALSHA",
                    b"ad8bc2b2ec4a9ec1e7e8ca06d1a9c3a5ff5b1a8f",
                    b"1",
                    b"redisson-lock:orders",
                    b"30000",
                    b"5f1e9a4c-1b2d-4e8f-9a7b-3c6d2e1f0a9b:1",
                ],
                16,
            ),
            16,
        ),
        ("set 100kb", encode(&[b"SET", b"key", &big]), 1),
    ];
    for (name, input, commands) in &cases {
        assert_eq!(keylock_parse(input), crate_parse(input), "{name}: both parse the same");
        assert_eq!(keylock_parse(input).len(), *commands);
        let mut group = c.benchmark_group(*name);
        group.throughput(Throughput::Elements(*commands as u64));
        group.bench_function("keylock", |b| b.iter(|| keylock_parse(std::hint::black_box(input))));
        group.bench_function("redis-protocol", |b| b.iter(|| crate_parse(std::hint::black_box(input))));
        group.finish();
    }
}

criterion_group!(benches, bench_parsers);
criterion_main!(benches);
