//! Every Redisson script body keylock recognizes (4.7.0, 3.13.6 and the
//! older ones under seed-2018), native vs Lua, through the engine
//! in-process (no sockets): the cost of one EVALSHA as the engine runs it.
//! `cargo bench --bench native_scripts`; the README reports the ratios.
//!
//! Each case puts the keyspace into the state the script meets in normal
//! use (an uncontended lock, a semaphore with permits, a latch at one, a
//! fair-lock queue with a waiter …) with untimed commands, then times the
//! one EVALSHA, then resets. The same case runs in an engine with
//! `native-scripts no` (the Lua VM, the path Redis takes) and in one with
//! native scripts on. Scripts without a native implementation run in Lua
//! on both sides, which the bench shows as a ratio near 1.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{Criterion, criterion_group, criterion_main};
use keylock::engine::Engine;

mod support;

const OWN: &str = "5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:1";
const OTHER: &str = "8e2d1c0b-7a6f-4e5d-8c4b-3a2918070605:57";
/// A fixed "now" for the scripts that take the time from the client.
const NOW: &str = "1700000000000";
const LATER: &str = "1700000300000";
const EARLIER: &str = "1699999999000";

/// One case: untimed setup, then the timed script call. Commands are
/// written with spaces between arguments; `@<version>/<name>` stands for
/// the SHA1 of `lua/redisson/<version>/<name>.lua`, `OWN`/`OTHER` for owners,
/// `NOW`/`LATER`/`EARLIER` for times, `''` for an empty argument.
struct Case {
    script: &'static str,
    setup: &'static [&'static str],
    call: &'static str,
}

const CASES: &[Case] = &[
    Case {
        script: "4.7.0/lock-acquire",
        setup: &["DEL lk"],
        call: "EVALSHA @4.7.0/lock-acquire 1 lk 30000 OWN",
    },
    Case {
        script: "4.7.0/lock-unlock",
        setup: &["HSET lk OWN 1", "DEL latch"],
        call: "EVALSHA @4.7.0/lock-unlock 3 lk redisson_lock__channel:{lk} latch 0 30000 OWN PUBLISH 8600",
    },
    Case {
        script: "4.7.0/lock-force-unlock",
        setup: &["HSET lk OWN 1"],
        call: "EVALSHA @4.7.0/lock-force-unlock 2 lk redisson_lock__channel:{lk} 0 PUBLISH",
    },
    Case {
        script: "4.7.0/lock-renew-batch",
        setup: &["HSET lk OWN 1"],
        call: "EVALSHA @4.7.0/lock-renew-batch 1 lk 30000 OWN",
    },
    Case {
        script: "4.7.0/keys-pexpire",
        setup: &["SET a 1", "SET b 1"],
        call: "EVALSHA @4.7.0/keys-pexpire 2 a b 30000 ''",
    },
    Case {
        script: "4.7.0/cluster-detect-probe",
        setup: &[],
        call: "EVALSHA @4.7.0/cluster-detect-probe 2 test1 test2",
    },
    Case {
        script: "4.7.0/fairlock-acquire",
        setup: &["DEL fl q t"],
        call: "EVALSHA @4.7.0/fairlock-acquire 3 fl q t 30000 OWN 300000 NOW",
    },
    Case {
        script: "4.7.0/fairlock-tryacquire-nowait",
        setup: &["DEL fl q t"],
        call: "EVALSHA @4.7.0/fairlock-tryacquire-nowait 3 fl q t 30000 OWN NOW 300000",
    },
    Case {
        script: "4.7.0/fairlock-unlock",
        setup: &["DEL q t latch", "HSET fl OWN 1", "RPUSH q OTHER", "ZADD t LATER OTHER"],
        call: "EVALSHA @4.7.0/fairlock-unlock 5 fl q t redisson_lock__channel:{fl} latch 0 30000 OWN NOW PUBLISH 8600",
    },
    Case {
        script: "4.7.0/fairlock-acquire-failed",
        setup: &["DEL q t", "RPUSH q OWN OTHER", "ZADD t LATER OWN LATER OTHER"],
        call: "EVALSHA @4.7.0/fairlock-acquire-failed 2 q t OWN 300000",
    },
    Case {
        script: "4.7.0/semaphore-tryacquire",
        setup: &["SET sem 5"],
        call: "EVALSHA @4.7.0/semaphore-tryacquire 1 sem 1",
    },
    Case {
        script: "4.7.0/semaphore-release",
        setup: &["SET sem 0"],
        call: "EVALSHA @4.7.0/semaphore-release 2 sem redisson_sc:{sem} 1 PUBLISH",
    },
    Case {
        script: "4.7.0/semaphore-trysetpermits",
        setup: &["DEL sem"],
        call: "EVALSHA @4.7.0/semaphore-trysetpermits 2 sem redisson_sc:{sem} 5 PUBLISH",
    },
    Case {
        script: "4.7.0/pesemaphore-tryacquire",
        setup: &["SET pes 5", "DEL tz"],
        call: "EVALSHA @4.7.0/pesemaphore-tryacquire 3 pes tz redisson_sc:{pes} 1 LATER NOW 9223372036854775807 PUBLISH 0f1e2d3c4b5a69788796a5b4c3d2e1f0",
    },
    Case {
        script: "4.7.0/pesemaphore-release",
        setup: &["SET pes 4", "ZADD tz LATER 0f1e2d3c4b5a69788796a5b4c3d2e1f0"],
        call: "EVALSHA @4.7.0/pesemaphore-release 3 pes redisson_sc:{pes} tz 0f1e2d3c4b5a69788796a5b4c3d2e1f0 1 NOW PUBLISH",
    },
    Case {
        script: "4.7.0/pesemaphore-available-permits",
        setup: &["SET pes 4", "ZADD tz EARLIER 0f1e2d3c4b5a69788796a5b4c3d2e1f0"],
        call: "EVALSHA @4.7.0/pesemaphore-available-permits 3 pes tz redisson_sc:{pes} NOW PUBLISH",
    },
    Case {
        script: "4.7.0/latch-trysetcount",
        setup: &["DEL latch1"],
        call: "EVALSHA @4.7.0/latch-trysetcount 2 latch1 redisson_countdownlatch__channel__{latch1} 1 1 PUBLISH",
    },
    Case {
        script: "4.7.0/latch-countdown",
        setup: &["SET latch1 1"],
        call: "EVALSHA @4.7.0/latch-countdown 2 latch1 redisson_countdownlatch__channel__{latch1} 0 PUBLISH",
    },
    Case {
        script: "4.7.0/rwlock-read-acquire",
        setup: &["DEL rw {rw}:OWN:rwlock_timeout:1"],
        call: "EVALSHA @4.7.0/rwlock-read-acquire 2 rw {rw}:OWN:rwlock_timeout 30000 OWN OWN:write",
    },
    Case {
        script: "4.7.0/rwlock-read-unlock",
        setup: &[
            "DEL rw latch",
            "EVALSHA @4.7.0/rwlock-read-acquire 2 rw {rw}:OWN:rwlock_timeout 30000 OWN OWN:write",
        ],
        call: "EVALSHA @4.7.0/rwlock-read-unlock 5 rw redisson_rwlock:{rw} {rw}:OWN:rwlock_timeout {rw} latch 0 OWN PUBLISH 8600",
    },
    Case {
        script: "4.7.0/rwlock-write-acquire",
        setup: &["DEL rw"],
        call: "EVALSHA @4.7.0/rwlock-write-acquire 1 rw 30000 OWN:write",
    },
    Case {
        script: "4.7.0/rwlock-write-unlock",
        setup: &["DEL rw latch", "EVALSHA @4.7.0/rwlock-write-acquire 1 rw 30000 OWN:write"],
        call: "EVALSHA @4.7.0/rwlock-write-unlock 3 rw redisson_rwlock:{rw} latch 0 30000 OWN:write PUBLISH 8600",
    },
    Case {
        script: "4.7.0/rwlock-read-renew-batch",
        setup: &[
            "DEL rw",
            "EVALSHA @4.7.0/rwlock-read-acquire 2 rw {rw}:OWN:rwlock_timeout 30000 OWN OWN:write",
        ],
        call: "EVALSHA @4.7.0/rwlock-read-renew-batch 2 rw {rw} 30000 1 OWN",
    },
    Case {
        script: "4.7.0/rwlock-read-islocked",
        setup: &[
            "DEL rw",
            "EVALSHA @4.7.0/rwlock-read-acquire 2 rw {rw}:OWN:rwlock_timeout 30000 OWN OWN:write",
        ],
        call: "EVALSHA @4.7.0/rwlock-read-islocked 1 rw",
    },
    // Redisson 3.13.6 bodies (sent by EVAL; timed here by EVALSHA, which
    // runs the same script without hashing its body).
    Case {
        script: "3.13.6/lock-acquire",
        setup: &["DEL lk"],
        call: "EVALSHA @3.13.6/lock-acquire 1 lk 30000 OWN",
    },
    Case {
        script: "3.13.6/lock-unlock",
        setup: &["HSET lk OWN 1"],
        call: "EVALSHA @3.13.6/lock-unlock 2 lk redisson_lock__channel:{lk} 0 30000 OWN",
    },
    Case {
        script: "3.13.6/lock-force-unlock",
        setup: &["HSET lk OWN 1"],
        call: "EVALSHA @3.13.6/lock-force-unlock 2 lk redisson_lock__channel:{lk} 0",
    },
    Case {
        script: "3.13.6/lock-renew",
        setup: &["HSET lk OWN 1"],
        call: "EVALSHA @3.13.6/lock-renew 1 lk 30000 OWN",
    },
    Case {
        script: "3.13.6/fairlock-acquire",
        setup: &["DEL fl q t"],
        call: "EVALSHA @3.13.6/fairlock-acquire 3 fl q t 30000 OWN 300000 NOW",
    },
    Case {
        script: "3.13.6/fairlock-tryacquire-nowait",
        setup: &["DEL fl q t"],
        call: "EVALSHA @3.13.6/fairlock-tryacquire-nowait 3 fl q t 30000 OWN NOW 300000",
    },
    Case {
        script: "3.13.6/fairlock-unlock",
        setup: &["DEL q t", "HSET fl OWN 1", "RPUSH q OTHER", "ZADD t LATER OTHER"],
        call: "EVALSHA @3.13.6/fairlock-unlock 4 fl q t redisson_lock__channel:{fl} 0 30000 OWN NOW",
    },
    Case {
        script: "3.13.6/latch-trysetcount",
        setup: &["DEL latch1"],
        call: "EVALSHA @3.13.6/latch-trysetcount 2 latch1 redisson_countdownlatch__channel__{latch1} 1 1",
    },
    Case {
        script: "3.13.6/latch-countdown",
        setup: &["SET latch1 1"],
        call: "EVALSHA @3.13.6/latch-countdown 2 latch1 redisson_countdownlatch__channel__{latch1} 0",
    },
    Case {
        script: "3.13.6/pesemaphore-tryacquire",
        setup: &["SET pes 5", "DEL tz"],
        call: "EVALSHA @3.13.6/pesemaphore-tryacquire 3 pes tz redisson_sc:{pes} 1 LATER 0f1e2d3c4b5a69788796a5b4c3d2e1f0 NOW 9223372036854775807",
    },
    Case {
        script: "3.13.6/pesemaphore-release",
        setup: &["SET pes 4", "ZADD tz LATER 0f1e2d3c4b5a69788796a5b4c3d2e1f0"],
        call: "EVALSHA @3.13.6/pesemaphore-release 3 pes redisson_sc:{pes} tz 0f1e2d3c4b5a69788796a5b4c3d2e1f0 1",
    },
    Case {
        script: "3.13.6/pesemaphore-available-permits",
        setup: &["SET pes 4", "ZADD tz EARLIER 0f1e2d3c4b5a69788796a5b4c3d2e1f0"],
        call: "EVALSHA @3.13.6/pesemaphore-available-permits 3 pes tz redisson_sc:{pes} NOW",
    },
    Case {
        script: "3.13.6/semaphore-release",
        setup: &["SET sem 0"],
        call: "EVALSHA @3.13.6/semaphore-release 2 sem redisson_sc:{sem} 1",
    },
    Case {
        script: "3.13.6/semaphore-trysetpermits",
        setup: &["DEL sem"],
        call: "EVALSHA @3.13.6/semaphore-trysetpermits 2 sem redisson_sc:{sem} 5",
    },
    Case {
        script: "3.13.6/rwlock-read-unlock",
        setup: &[
            "DEL rw",
            "EVALSHA @4.7.0/rwlock-read-acquire 2 rw {rw}:OWN:rwlock_timeout 30000 OWN OWN:write",
        ],
        call: "EVALSHA @3.13.6/rwlock-read-unlock 4 rw redisson_rwlock:{rw} {rw}:OWN:rwlock_timeout {rw} 0 OWN",
    },
    Case {
        script: "3.13.6/rwlock-write-unlock",
        setup: &["DEL rw", "EVALSHA @4.7.0/rwlock-write-acquire 1 rw 30000 OWN:write"],
        call: "EVALSHA @3.13.6/rwlock-write-unlock 2 rw redisson_rwlock:{rw} 0 30000 OWN:write",
    },
    Case {
        script: "3.13.6/rwlock-read-renew",
        setup: &[
            "DEL rw",
            "EVALSHA @4.7.0/rwlock-read-acquire 2 rw {rw}:OWN:rwlock_timeout 30000 OWN OWN:write",
        ],
        call: "EVALSHA @3.13.6/rwlock-read-renew 2 rw {rw} 30000 OWN",
    },
    // Older releases' bodies (lua/redisson/seed-2018).
    Case {
        script: "seed-2018/lock-acquire",
        setup: &["DEL lk"],
        call: "EVALSHA @seed-2018/lock-acquire 1 lk 30000 OWN",
    },
    Case {
        script: "seed-2018/lock-unlock",
        setup: &["HSET lk OWN 1"],
        call: "EVALSHA @seed-2018/lock-unlock 2 lk redisson_lock__channel:{lk} 0 30000 OWN",
    },
    Case {
        script: "seed-2018/rwlock-read-acquire",
        setup: &["DEL rw {rw}:OWN:rwlock_timeout:1"],
        call: "EVALSHA @seed-2018/rwlock-read-acquire 2 rw {rw}:OWN:rwlock_timeout 30000 OWN OWN:write",
    },
];

fn body(name: &str) -> Vec<u8> {
    let path = format!("{}/lua/redisson/{name}.lua", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A command line of the case table as arguments.
fn command(line: &str) -> Vec<Bytes> {
    line.split(' ')
        .map(|word| {
            let word = word.replace("OWN", OWN).replace("OTHER", OTHER);
            let arg = match word.as_str() {
                "''" => String::new(),
                "NOW" => NOW.into(),
                "LATER" => LATER.into(),
                "EARLIER" => EARLIER.into(),
                w => match w.strip_prefix('@') {
                    Some(name) => keylock::scripting::sha1_hex(&body(name)),
                    None => word,
                },
            };
            Bytes::from(arg)
        })
        .collect()
}

struct Bench {
    engine: Engine,
    out: BytesMut,
}

impl Bench {
    fn new(native: bool) -> Bench {
        let engine = support::engine(native);
        let mut bench = Bench {
            engine,
            out: BytesMut::new(),
        };
        for case in CASES {
            let load = vec![
                Bytes::from_static(b"SCRIPT"),
                Bytes::from_static(b"LOAD"),
                Bytes::from(body(case.script)),
            ];
            bench.run(vec![load]);
        }
        bench
    }

    fn run(&mut self, commands: Vec<Vec<Bytes>>) {
        self.out.clear();
        self.engine.run_batch(1, commands, &mut self.out);
    }

    /// Runs the case once and returns the script's raw reply.
    fn reply(&mut self, setup: &[Vec<Bytes>], call: &[Bytes]) -> Vec<u8> {
        self.run(setup.to_vec());
        self.run(vec![call.to_vec()]);
        self.out.to_vec()
    }
}

fn bench_native_scripts(c: &mut Criterion) {
    let mut lua = Bench::new(false);
    let mut native = Bench::new(true);
    let mut group = c.benchmark_group("script");
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(1));
    for case in CASES {
        let setup: Vec<Vec<Bytes>> = case.setup.iter().map(|l| command(l)).collect();
        let call = command(case.call);
        // The case must do what it says on both sides.
        let (l, n) = (lua.reply(&setup, &call), native.reply(&setup, &call));
        assert_eq!(l, n, "{}: native and Lua replies differ", case.script);
        assert!(!l.starts_with(b"-"), "{}: {}", case.script, String::from_utf8_lossy(&l));
        for (side, bench) in [("lua", &mut lua), ("native", &mut native)] {
            group.bench_function(format!("{}@{side}", case.script), |b| {
                b.iter_custom(|iters| {
                    let mut timed = Duration::ZERO;
                    for _ in 0..iters {
                        bench.run(setup.clone());
                        let batch = vec![call.clone()];
                        let start = Instant::now();
                        bench.run(batch);
                        timed += start.elapsed();
                    }
                    timed
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_native_scripts);
criterion_main!(benches);
