//! `keylock bench` against an in-process keylock: every workload runs to
//! its requested count with no errors, sane percentiles, and the keyspace
//! it should leave (locks released, semaphores refilled); server errors and
//! failed connections are reported with the right exit status; and the
//! hot path makes no allocation per request.

mod common;
use common::*;

use std::cell::Cell;
use std::process::{Command, Output};

use clap::Parser;
use keylock::bench::{BenchArgs, Summary};

/// Counts allocations made by the current thread, for the hot-path check.
struct ThreadCountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl std::alloc::GlobalAlloc for ThreadCountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwards the caller's layout contract to the system allocator.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: ThreadCountingAlloc = ThreadCountingAlloc;

/// Runs the `keylock` binary's `bench` against `server`.
fn bench(server: &ServerHandle, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keylock"))
        .arg("bench")
        .arg("--target")
        .arg(server.addr().to_string())
        .args(args)
        .output()
        .expect("run keylock bench")
}

/// Runs a workload with `--json` and returns its summary, failing on a
/// non-zero exit.
fn summary(server: &ServerHandle, args: &[&str]) -> Summary {
    let out = bench(server, &[args, &["--json"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {:?}\n{stderr}", out.status);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// What every clean run must show.
fn assert_clean(s: &Summary, requested: u64) {
    assert_eq!(s.settings.requested, Some(requested));
    assert_eq!(s.ops, requested, "{s:?}");
    assert_eq!((s.errors, s.unexpected), (0, 0), "{s:?}");
    assert!(s.commands >= s.ops, "{s:?}");
    assert!(
        s.client_ops_min <= s.client_ops_max && s.client_ops_max * s.settings.clients >= requested,
        "{s:?}"
    );
    assert!(s.ops_per_sec > 0.0 && s.elapsed_s > 0.0, "{s:?}");
    let l = &s.latency_us;
    assert!(
        0.0 < l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.p999 && l.p999 <= l.max,
        "{l:?}"
    );
    assert!(l.p50 <= l.mean.max(l.p50) && l.mean <= l.max, "{l:?}");
    assert!(s.settings.server.starts_with("keylock "), "{}", s.settings.server);
}

fn keys(c: &mut Raw, pattern: &str) -> Vec<String> {
    let raw = c.call(&["KEYS", pattern]);
    String::from_utf8_lossy(&raw)
        .split("\r\n")
        .filter(|line| !line.is_empty() && !line.starts_with(['*', '$']))
        .map(str::to_string)
        .collect()
}

#[test]
fn ping_set_and_hset_complete_every_request() {
    let s = start();
    for workload in ["ping", "set", "hset"] {
        let summary = summary(&s, &[workload, "-n", "300", "-c", "3", "-P", "4"]);
        assert_clean(&summary, 300);
        assert_eq!(summary.commands, 300);
        assert_eq!(summary.settings.workload, workload);
    }
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["HGET", "bench:hash", "element:0"]), b"$3\r\nxxx\r\n");
    assert_eq!(c.call(&["GET", "bench:key:0"]), b"$3\r\nxxx\r\n");
}

#[test]
fn lock_cycle_releases_every_lock_and_latch() {
    let s = start();
    let summary = summary(&s, &["lock-cycle", "-n", "400", "-c", "4", "-P", "3", "--keys", "5"]);
    assert_clean(&summary, 400);
    // Acquire + unlock per uncontended cycle, plus the latch DEL after it.
    let cycles = summary.ops - summary.contended;
    assert_eq!(summary.commands, summary.ops + 2 * cycles, "{summary:?}");
    let mut c = Raw::connect(s.addr());
    assert_eq!(keys(&mut c, "*"), Vec::<String>::new());
}

#[test]
fn lock_acquire_holds_each_key_once_in_sequence() {
    let s = start();
    let summary = summary(
        &s,
        &[
            "lock-acquire",
            "-n",
            "500",
            "--keys",
            "500",
            "--key-order",
            "seq",
            "-c",
            "5",
            "-P",
            "4",
            "--lease-ms",
            "600000",
        ],
    );
    assert_clean(&summary, 500);
    assert_eq!(summary.contended, 0);
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["DBSIZE"]), b":500\r\n");
    let ttl = String::from_utf8(c.call(&["PTTL", "bench:lock-acquire:499"])).unwrap();
    let ttl: i64 = ttl.trim_start_matches(':').trim().parse().unwrap();
    assert!(ttl > 500_000, "{ttl}");
    // Every hold is the same owner's, once.
    let held = c.call(&["HGETALL", "bench:lock-acquire:0"]);
    assert!(
        held.starts_with(b"*2\r\n") && held.ends_with(b"$1\r\n1\r\n"),
        "{}",
        String::from_utf8_lossy(&held)
    );
}

#[test]
fn lock_acquire_by_eval_and_over_resp3() {
    let s = start();
    assert_clean(
        &summary(&s, &["lock-acquire", "-n", "200", "-c", "2", "--script-mode", "eval"]),
        200,
    );
    assert_clean(&summary(&s, &["lock-cycle", "-n", "200", "-c", "2", "-P", "2", "--resp3"]), 200);
    let mut c = Raw::connect(s.addr());
    assert_eq!(keys(&mut c, "bench:lock:*"), Vec::<String>::new());
}

#[test]
fn lock_contended_waits_for_the_unlock_message() {
    let s = start();
    let summary = summary(&s, &["lock-contended", "-n", "300", "-c", "6"]);
    assert_clean(&summary, 300);
    assert_eq!(summary.settings.keys, 1);
    assert!(summary.contended > 0, "six clients on one lock never met: {summary:?}");
    // No waiter slept out the 30 s lease: wake-ups came by message.
    assert!(summary.latency_us.max < 10_000_000.0, "{summary:?}");
    let mut c = Raw::connect(s.addr());
    assert_eq!(keys(&mut c, "*"), Vec::<String>::new());
}

#[test]
fn lock_contended_takes_no_pipeline() {
    let s = start();
    let out = bench(&s, &["lock-contended", "-n", "10", "-P", "2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no --pipeline"));
}

#[test]
fn rwlock_cycle_mixes_readers_and_writers_and_releases_all() {
    let s = start();
    let summary = summary(
        &s,
        &[
            "rwlock-cycle",
            "-n",
            "600",
            "-c",
            "4",
            "-P",
            "4",
            "--keys",
            "3",
            "--write-percent",
            "30",
        ],
    );
    assert_clean(&summary, 600);
    let mut c = Raw::connect(s.addr());
    assert_eq!(keys(&mut c, "*"), Vec::<String>::new());
}

#[test]
fn semaphore_cycle_gives_every_permit_back() {
    let s = start();
    let summary = summary(
        &s,
        &[
            "semaphore-cycle",
            "-n",
            "600",
            "-c",
            "5",
            "-P",
            "4",
            "--keys",
            "3",
            "--permits",
            "2",
        ],
    );
    assert_clean(&summary, 600);
    assert!(summary.contended > 0, "20 slots on 6 permits never waited: {summary:?}");
    let mut c = Raw::connect(s.addr());
    for key in 0..3 {
        assert_eq!(c.call(&["GET", &format!("bench:semaphore:{key}")]), b"$1\r\n2\r\n");
    }
}

#[test]
fn script_fills_key_and_argument_templates() {
    let s = start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tally.lua");
    std::fs::write(
        &file,
        "redis.call('sadd', KEYS[2], ARGV[1]) return redis.call('incrby', KEYS[1], ARGV[2])",
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let args = [
        "script",
        "--file",
        &file,
        "--keys-template",
        "tally:{rand:4}",
        "--keys-template",
        "{clients}",
        "--args-template",
        "c{client}",
        "--args-template",
        "2",
        "-n",
        "500",
        "-c",
        "3",
        "-P",
        "2",
    ];
    assert_clean(&summary(&s, &args), 500);
    let mut c = Raw::connect(s.addr());
    let total: i64 = (0..4)
        .map(|i| {
            let v = c.call(&["GET", &format!("tally:{i}")]);
            String::from_utf8_lossy(&v).lines().nth(1).map_or(0, |n| n.parse().unwrap())
        })
        .sum();
    assert_eq!(total, 1000);
    assert_eq!(c.call(&["SCARD", "{clients}"]), b":3\r\n");
}

#[test]
fn wait_follows_every_command_of_an_operation() {
    let s = start();
    let summary = summary(&s, &["lock-cycle", "-n", "200", "-c", "4", "-P", "2", "--keys", "5", "--wait", "0"]);
    assert_clean(&summary, 200);
    assert_eq!(summary.settings.wait, Some(0));
    // Acquire + WAIT per operation; unlock + WAIT + latch DEL per cycle.
    let cycles = summary.ops - summary.contended;
    assert_eq!(summary.commands, 2 * summary.ops + 3 * cycles, "{summary:?}");
    let mut c = Raw::connect(s.addr());
    assert_eq!(keys(&mut c, "*"), Vec::<String>::new());
    // A standalone keylock has no replica to acknowledge: WAIT 1 answers
    // 0, which the run reports.
    let out = bench(&s, &["set", "-n", "3", "-c", "1", "--wait", "1", "--wait-timeout", "10", "--json"]);
    assert!(!out.status.success());
    let summary: Summary = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary.ops, summary.unexpected, summary.commands), (3, 3, 6), "{summary:?}");
    assert!(summary.first_unexpected.unwrap().starts_with("reply to WAIT 1: "));
}

#[test]
fn script_error_replies_are_counted_and_the_first_reported() {
    let s = start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fails.lua");
    std::fs::write(&file, "return redis.call('incr', KEYS[1])").unwrap();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "word", "abc"]);
    let out = bench(
        &s,
        &[
            "script",
            "--file",
            &file.to_string_lossy(),
            "--keys-template",
            "word",
            "-n",
            "50",
            "-c",
            "2",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Summary = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((summary.ops, summary.errors), (0, 50));
    let first = summary.first_error.unwrap();
    assert!(first.starts_with("ERR value is not an integer"), "{first}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("50 error replies, the first: ERR value is not an integer"));
}

#[test]
fn a_script_that_does_not_compile_stops_the_run_at_load() {
    let s = start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.lua");
    std::fs::write(&file, "return (").unwrap();
    let out = bench(&s, &["script", "--file", &file.to_string_lossy(), "-n", "5"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SCRIPT LOAD of broken.lua failed: ERR Error compiling script"),
        "{stderr}"
    );
}

#[test]
fn noscript_is_answered_by_loading_the_script_again() {
    let s = start();
    let flusher = {
        let addr = s.addr();
        std::thread::spawn(move || {
            let mut c = Raw::connect(addr);
            for _ in 0..4 {
                std::thread::sleep(std::time::Duration::from_millis(150));
                assert_eq!(c.call(&["SCRIPT", "FLUSH"]), b"+OK\r\n");
            }
        })
    };
    let summary = summary(&s, &["lock-cycle", "--duration", "1s", "-c", "3", "-P", "2"]);
    flusher.join().unwrap();
    assert_eq!((summary.errors, summary.unexpected), (0, 0), "{summary:?}");
    assert!(summary.noscript_reloads >= 4, "{summary:?}");
    let mut c = Raw::connect(s.addr());
    assert_eq!(keys(&mut c, "bench:lock:*"), Vec::<String>::new());
}

#[test]
fn wrong_password_fails_with_a_clear_message() {
    let s = start_with(|c| c.set("requirepass", &["s3cret"]).unwrap());
    let out = bench(&s, &["ping", "-n", "10", "--auth", "wrong"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("authentication failed on 127.0.0.1:"), "{stderr}");
    assert!(stderr.contains("WRONGPASS"), "{stderr}");
    let out = bench(&s, &["ping", "-n", "10"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused PING: NOAUTH"));
    assert_clean(&summary(&s, &["ping", "-n", "10", "--auth", "s3cret"]), 10);
    assert_clean(&summary(&s, &["ping", "-n", "10", "--auth", "default:s3cret", "--resp3"]), 10);
}

#[test]
fn a_refused_connection_fails_with_a_clear_message() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let out = Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args(["bench", "ping", "-n", "1", "--target", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!("keylock bench: cannot connect to 127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn a_server_that_goes_away_mid_run_ends_it_with_an_error() {
    let s = start();
    let addr = s.addr().to_string();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        s.shutdown();
    });
    let out = Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args(["bench", "ping", "--duration", "20s", "-c", "2", "--target", &addr])
        .output()
        .unwrap();
    stopper.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&addr), "{stderr}");
}

/// Allocations made by this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn the_hot_path_allocates_nothing_per_request() {
    let s = start();
    let target = s.addr().to_string();
    let run = |requests: &str, workload: &str| {
        let args = BenchArgs::try_parse_from([
            "bench", workload, "--target", &target, "-n", requests, "-c", "4", "-P", "8", "--quiet", "--keys", "50",
        ])
        .unwrap();
        // With one thread, the clients run on this one.
        let summary = keylock::bench::run(&args).unwrap();
        assert_eq!((summary.errors, summary.unexpected), (0, 0));
    };
    for workload in ["hset", "lock-cycle", "rwlock-cycle"] {
        let small = allocations(|| run("2000", workload));
        let large = allocations(|| run("22000", workload));
        assert!(
            large < small + 200,
            "{workload}: {small} allocations for 2,000 operations, {large} for 22,000"
        );
    }
}
