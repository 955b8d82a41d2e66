//! `keylock bench`: a load generator for any RESP server (keylock or Redis)
//! with named workloads, reporting throughput and latency percentiles, a
//! progress bar on a terminal, and a JSON summary with `--json`.
//!
//! Workloads (see `workload` for exactly what each sends):
//! - `ping`, `set`, `hset`: plain commands, for comparing with redis-benchmark;
//! - `lock-acquire`: Redisson 4.7.0's lock-acquire script, re-entered by one
//!   owner over `--keys` names, so every call succeeds;
//! - `lock-cycle`: acquire + unlock (+ the unlock latch DEL) by many owners
//!   over `--keys` names; a TTL reply is counted as contended and the slot
//!   moves on, as Redisson's `tryLock()` does;
//! - `lock-contended`: Redisson's `lock()`, waiting by SUBSCRIBE for the
//!   unlock message (default one lock for all clients);
//! - `rwlock-cycle`: read or write lock acquire + unlock, `--write-percent`
//!   writers;
//! - `semaphore-cycle`: tryacquire + release, with `--permits` set first by
//!   trysetpermits;
//! - `script`: any Lua file (`--file`) with templated KEYS and ARGV
//!   (`--keys-template`, `--args-template`; see `template`).
//!
//! Layout: `resp` scans replies in place, `template` renders requests,
//! `workload` describes operations as data, `conn` is one connection,
//! `client` drives connections (the hot path), `report` prints.
//!
//! Exit status: 0 after a clean run; 1 when the run could not be made
//! (connection refused or lost, authentication, setup, bad options); 2 for
//! a command line clap rejects; 3 when the run finished but the server
//! answered errors or replies a correct server never sends (the summary,
//! with the first one, is still printed).
//!
//! Dependencies added for this tool: `clap` (arguments), `hdrhistogram`
//! (latency percentiles), `indicatif` (progress bar), `serde` and
//! `serde_json` (the `--json` summary).

pub mod client;
pub mod conn;
pub mod report;
pub mod resp;
pub mod template;
pub mod workload;

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use clap::{Parser, ValueEnum};

use client::{RunSpec, Shared, Stats};
use conn::{Conn, Handshake};
pub use report::Summary;

/// Why a run could not be made or finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchError(pub String);

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadName {
    /// PING.
    Ping,
    /// SET bench:key:{key} xxx.
    Set,
    /// HSET bench:hash element:{key} xxx.
    Hset,
    /// Redisson lock-acquire, re-entered by one owner (always succeeds).
    LockAcquire,
    /// Redisson lock acquire + unlock (+ latch DEL); a TTL reply is contended.
    LockCycle,
    /// Redisson lock(): wait by SUBSCRIBE for the unlock, then unlock.
    LockContended,
    /// Redisson read or write lock acquire + unlock.
    RwlockCycle,
    /// Redisson semaphore tryacquire + release.
    SemaphoreCycle,
    /// The Lua file given by --file, with templated KEYS and ARGV.
    Script,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScriptMode {
    /// EVAL with the script body on every call.
    Eval,
    /// EVALSHA, as Redisson 4.x sends: SCRIPT LOAD first, and again on NOSCRIPT.
    Evalsha,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeyOrder {
    /// Keys in turn, 0, 1, 2, … across all clients (wrapping at --keys).
    Seq,
    /// A uniformly random key per operation.
    Rand,
}

/// `keylock bench WORKLOAD [options]`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "keylock bench",
    about = "Load any RESP server (keylock or Redis) with a named workload; report throughput and latency",
    after_help = "Templates (--keys-template, --args-template): {rand:N} a random integer below N, {key} the operation's \
                  key number (--keys, --key-order), {client} the client number, {thread} the Redisson thread (pipeline \
                  slot) number, {seq} the operation's number within its client. Other braces are literal."
)]
pub struct BenchArgs {
    /// What to run.
    #[arg(value_enum)]
    pub workload: WorkloadName,
    /// The server, host:port.
    #[arg(long, default_value = "127.0.0.1:6379")]
    pub target: String,
    /// Connections, each with --pipeline operations in flight.
    #[arg(short = 'c', long, default_value_t = 50)]
    pub clients: u64,
    /// Commands per round trip on each connection.
    #[arg(short = 'P', long, default_value_t = 1)]
    pub pipeline: u64,
    /// Run for this long (`10s`, `500ms`, `2m`; a plain number is seconds).
    /// The default, without --requests, is 10s.
    #[arg(long, value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,
    /// Run this many operations in all.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,
    /// AUTH on every connection: `password` or `user:password`.
    #[arg(short = 'a', long, value_name = "[USER:]PASSWORD")]
    pub auth: Option<String>,
    /// How scripts are sent.
    #[arg(long, value_enum, default_value = "evalsha")]
    pub script_mode: ScriptMode,
    /// Speak RESP3 (HELLO 3 on every connection).
    #[arg(long)]
    pub resp3: bool,
    /// Key (lock, semaphore) names to spread operations over; fewer keys
    /// means more contention. Default: 1 for ping/set/hset/lock-contended,
    /// 16 semaphores, 100 rwlocks, 1000 otherwise.
    #[arg(short = 'k', long)]
    pub keys: Option<u64>,
    /// How each operation picks its key.
    #[arg(long, value_enum, default_value = "rand")]
    pub key_order: KeyOrder,
    /// After every command of an operation, `WAIT REPLICAS TIMEOUT` in the
    /// same round trip, as Redisson sends it when its locks check that
    /// replicas have their writes (`checkLockSyncedSlaves`); an operation
    /// ends with WAIT's reply, and one below REPLICAS counts as unexpected.
    #[arg(long, value_name = "REPLICAS")]
    pub wait: Option<u64>,
    /// WAIT's timeout, in milliseconds.
    #[arg(long, default_value_t = 1000, requires = "wait")]
    pub wait_timeout: u64,
    /// Threads generating load (each runs a share of the clients).
    #[arg(long, default_value_t = 1)]
    pub threads: u64,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Lock lease in milliseconds (ARGV of the lock scripts).
    #[arg(long, default_value_t = 30_000)]
    pub lease_ms: u64,
    /// rwlock-cycle: percentage of operations that take the write lock.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub write_percent: u8,
    /// semaphore-cycle: permits each semaphore is set up with.
    #[arg(long, default_value_t = 2)]
    pub permits: u64,
    /// script: the Lua file to run.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// script: one KEYS entry (repeat for more), with placeholders.
    #[arg(long = "keys-template", value_name = "TEMPLATE")]
    pub key_templates: Vec<String>,
    /// script: one ARGV entry (repeat for more), with placeholders.
    #[arg(long = "args-template", value_name = "TEMPLATE")]
    pub arg_templates: Vec<String>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number.parse().map_err(|_| format!("bad duration {text:?}: use 10s, 500ms or 2m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("bad duration unit {unit:?}: use ms, s, m or h")),
    };
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(format!("duration {text:?} must be positive"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The `keylock bench` command line (without the leading `bench`); returns
/// the process exit status.
pub fn main(args: &[String]) -> i32 {
    let args = match BenchArgs::try_parse_from(std::iter::once("keylock bench".to_string()).chain(args.iter().cloned())) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match run(&args) {
        Ok(summary) => {
            if args.json {
                match serde_json::to_string_pretty(&summary) {
                    Ok(json) => println!("{json}"),
                    Err(e) => {
                        eprintln!("keylock bench: {e}");
                        return 1;
                    }
                }
            } else {
                print!("{}", summary.text());
            }
            if summary.errors > 0 || summary.unexpected > 0 {
                if let Some(error) = &summary.first_error {
                    eprintln!("keylock bench: {} error replies, the first: {error}", summary.errors);
                }
                if let Some(reply) = &summary.first_unexpected {
                    eprintln!("keylock bench: {} unexpected replies, the first: {reply}", summary.unexpected);
                }
                return 3;
            }
            0
        }
        Err(e) => {
            eprintln!("keylock bench: {e}");
            1
        }
    }
}

/// Runs the workload `args` describes and summarizes it.
pub fn run(args: &BenchArgs) -> Result<Summary, BenchError> {
    if args.clients == 0 || args.pipeline == 0 || args.threads == 0 {
        return Err(BenchError("--clients, --pipeline and --threads must be at least 1".into()));
    }
    if args.requests == Some(0) {
        return Err(BenchError("--requests must be at least 1".into()));
    }
    let plan = workload::plan(args).map_err(BenchError)?;
    if plan.wait.is_some() && args.wait.is_some() {
        return Err(BenchError("--wait is not supported by lock-contended".into()));
    }
    if plan.wait.is_some() && args.pipeline != 1 {
        return Err(BenchError(
            "lock-contended waits as Redisson's lock() does, one command at a time: it takes no --pipeline".into(),
        ));
    }
    let keys = args.keys.unwrap_or(plan.keys);
    if keys == 0 {
        return Err(BenchError("--keys must be at least 1".into()));
    }
    let handshake = Handshake {
        auth: args.auth.as_ref().map(|auth| match auth.split_once(':') {
            Some((user, password)) => (Some(user.to_string()), password.to_string()),
            None => (None, auth.clone()),
        }),
        resp3: args.resp3,
    };
    let server = setup(args, &plan, keys, &handshake)?;
    let threads = args.threads.min(args.clients);
    let duration = match (args.requests, args.duration) {
        (None, None) => Some(Duration::from_secs(10)),
        (_, duration) => duration,
    };
    let shared = Arc::new(Shared::new(args.requests, duration));
    let spec = Arc::new(RunSpec {
        target: args.target.clone(),
        handshake,
        plan,
        pipeline: args.pipeline as usize,
        keys,
        key_order: args.key_order,
        evalsha: args.script_mode == ScriptMode::Evalsha,
        seed: fastrand::u64(..),
        wait: args.wait.map(|replicas| {
            let (n, timeout) = (replicas.to_string(), args.wait_timeout.to_string());
            (replicas, template::encode_command(&[b"WAIT", n.as_bytes(), timeout.as_bytes()]))
        }),
    });
    let progress = report::Progress::start(Arc::clone(&shared), workload_label(args.workload), args.quiet);
    let barrier = Arc::new(Barrier::new(threads as usize));
    let share = |t: u64| t * args.clients / threads..(t + 1) * args.clients / threads;
    let others: Vec<_> = (1..threads)
        .map(|t| {
            let (spec, shared, barrier) = (Arc::clone(&spec), Arc::clone(&shared), Arc::clone(&barrier));
            let ids = share(t);
            std::thread::Builder::new()
                .name(format!("bench-{t}"))
                .spawn(move || client::run_thread(ids, spec, shared, &barrier))
        })
        .collect();
    // The first share runs on this thread.
    let mut result = client::run_thread(share(0), Arc::clone(&spec), Arc::clone(&shared), &barrier);
    for handle in others {
        let joined = match handle {
            Ok(handle) => handle.join().unwrap_or_else(|_| Err(BenchError("a load thread panicked".into()))),
            Err(e) => Err(BenchError(format!("cannot start a load thread: {e}"))),
        };
        result = match (result, joined) {
            (Ok(mut stats), Ok(more)) => {
                stats.merge(more);
                Ok(stats)
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
    }
    let elapsed = shared.start.get().map_or(Duration::ZERO, |start| start.elapsed());
    progress.finish();
    let stats: Stats = result?;
    let settings = report::Settings {
        workload: workload_label(args.workload),
        target: args.target.clone(),
        server,
        clients: args.clients,
        pipeline: args.pipeline,
        threads,
        script_mode: format!("{:?}", args.script_mode).to_lowercase(),
        resp3: args.resp3,
        keys,
        key_order: format!("{:?}", args.key_order).to_lowercase(),
        requested: args.requests,
        wait: args.wait,
    };
    Ok(Summary::new(settings, stats, elapsed))
}

fn workload_label(workload: WorkloadName) -> String {
    workload
        .to_possible_value()
        .map_or_else(|| format!("{workload:?}"), |v| v.get_name().to_string())
}

/// Before the clock starts, on a connection of its own: checks the server
/// answers (and who it is), loads the workload's scripts, and runs its
/// per-key setup. Returns the server's name and version.
fn setup(args: &BenchArgs, plan: &workload::Plan, keys: u64, handshake: &Handshake) -> Result<String, BenchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError(format!("cannot start a runtime: {e}")))?;
    runtime.block_on(async {
        let mut conn = Conn::open(&args.target, handshake).await?;
        let info = conn.call(&[b"INFO", b"server"]).await?;
        let server = server_name(info.text.as_deref().unwrap_or_default());
        if args.script_mode == ScriptMode::Evalsha {
            for script in &plan.scripts {
                conn.write(&script.load).await?;
                let reply = conn.reply().await?;
                if let Some(error) = reply.error {
                    return Err(BenchError(format!("SCRIPT LOAD of {} failed: {error}", script.name)));
                }
            }
        }
        if plan.setup.is_some() {
            let (mut scratch, mut out) = (Vec::new(), Vec::new());
            for chunk_start in (0..keys).step_by(1000) {
                out.clear();
                let chunk = chunk_start..(chunk_start + 1000).min(keys);
                for key in chunk.clone() {
                    plan.render_setup(key, &mut scratch, &mut out);
                }
                conn.write(&out).await?;
                for _ in chunk {
                    if let Some(error) = conn.reply().await?.error {
                        return Err(BenchError(format!("setup failed: {error}")));
                    }
                }
            }
        }
        Ok(server)
    })
}

/// `keylock 0.1.0` or `redis 7.0.15`, from INFO server.
fn server_name(info: &[u8]) -> String {
    let info = String::from_utf8_lossy(info);
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':').map(|v| v.trim().to_string()))
    };
    match (field("keylock_version"), field("redis_version")) {
        (Some(keylock), _) => format!("keylock {keylock}"),
        (None, Some(redis)) => format!("redis {redis}"),
        (None, None) => "unknown server".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn server_names_come_from_info() {
        assert_eq!(server_name(b"# Server\r\nredis_version:7.0.15\r\n"), "redis 7.0.15");
        assert_eq!(server_name(b"redis_version:7.0.15\r\nkeylock_version:0.1.0\r\n"), "keylock 0.1.0");
        assert_eq!(server_name(b""), "unknown server");
    }

    #[test]
    fn duration_and_requests_exclude_each_other() {
        assert!(BenchArgs::try_parse_from(["bench", "ping", "--duration", "1s", "--requests", "5"]).is_err());
        let args = BenchArgs::try_parse_from(["bench", "lock-cycle", "-c", "4", "-P", "2", "-n", "10"]).unwrap();
        assert_eq!((args.clients, args.pipeline, args.requests), (4, 2, Some(10)));
    }
}
