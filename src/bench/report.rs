//! What a run reports: the summary (as text, or as JSON with `--json`) and
//! the progress bar shown while it runs.
//!
//! Latencies are per operation, from the write that sent its first command
//! to the read that brought its last reply: one command for `ping`, `set`,
//! `hset`, `lock-acquire` and `script`; acquire and unlock for the
//! `*-cycle` workloads (a contended acquire ends the operation at once);
//! the whole `lock()` with its waiting, plus `unlock()`, for
//! `lock-contended`. Operations that ended in an error reply are counted
//! but not timed.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::client::{Shared, Stats};

/// Latency percentiles, in microseconds.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

/// The machine-readable result of a run (`--json`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Summary {
    /// The run's settings (flattened into the JSON summary).
    #[serde(flatten)]
    pub settings: Settings,
    /// Operations that ended without an error reply (contended ones included).
    pub ops: u64,
    /// Of those, operations that found the lock held or no permit left.
    pub contended: u64,
    /// Error replies (an operation that got one ends there).
    pub errors: u64,
    pub first_error: Option<String>,
    /// Replies a correct server never sends for this workload.
    pub unexpected: u64,
    pub first_unexpected: Option<String>,
    pub noscript_reloads: u64,
    /// Commands sent, every one answered (unlock latch DELs and SCRIPT LOADs included).
    pub commands: u64,
    /// The fewest and the most operations one client got through: far
    /// apart when the server serves some connections before others.
    pub client_ops_min: u64,
    pub client_ops_max: u64,
    pub elapsed_s: f64,
    pub ops_per_sec: f64,
    pub commands_per_sec: f64,
    pub latency_us: Latency,
}

/// The run's settings, as the summary reports them.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Settings {
    pub workload: String,
    pub target: String,
    /// The server's own words: `redis 7.0.15` or `keylock 0.1.0`.
    pub server: String,
    pub clients: u64,
    pub pipeline: u64,
    pub threads: u64,
    pub script_mode: String,
    pub resp3: bool,
    pub keys: u64,
    pub key_order: String,
    /// `--requests`, when given.
    pub requested: Option<u64>,
    /// `--wait`: the replicas WAIT asked for after every command.
    #[serde(default)]
    pub wait: Option<u64>,
}

impl Summary {
    pub fn new(settings: Settings, stats: Stats, elapsed: Duration) -> Summary {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let h = &stats.latency;
        let us = |ns: u64| ns as f64 / 1000.0;
        let latency = if h.is_empty() {
            Latency {
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
                mean: 0.0,
            }
        } else {
            Latency {
                p50: us(h.value_at_quantile(0.50)),
                p90: us(h.value_at_quantile(0.90)),
                p99: us(h.value_at_quantile(0.99)),
                p999: us(h.value_at_quantile(0.999)),
                max: us(h.max()),
                mean: h.mean().round() / 1000.0,
            }
        };
        Summary {
            settings,
            ops: stats.ops,
            contended: stats.contended,
            errors: stats.errors,
            first_error: stats.first_error,
            unexpected: stats.unexpected,
            first_unexpected: stats.first_unexpected,
            noscript_reloads: stats.noscript_reloads,
            commands: stats.commands,
            client_ops_min: stats.client_ops.iter().copied().min().unwrap_or(0),
            client_ops_max: stats.client_ops.iter().copied().max().unwrap_or(0),
            elapsed_s: (secs * 1e6).round() / 1e6,
            ops_per_sec: (stats.ops as f64 / secs).round(),
            commands_per_sec: (stats.commands as f64 / secs).round(),
            latency_us: latency,
        }
    }

    /// The summary for a person.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}: {} clients, pipeline {}, {} thread{}, {} keys ({}), {}{} against {} ({})\n",
            self.settings.workload,
            self.settings.clients,
            self.settings.pipeline,
            self.settings.threads,
            if self.settings.threads == 1 { "" } else { "s" },
            self.settings.keys,
            self.settings.key_order,
            self.settings.script_mode,
            if self.settings.resp3 { ", RESP3" } else { "" },
            self.settings.target,
            self.settings.server,
        );
        s += &format!(
            "  {} ops in {:.2} s: {:.0} ops/s ({} commands, {:.0}/s)\n",
            self.ops, self.elapsed_s, self.ops_per_sec, self.commands, self.commands_per_sec
        );
        let l = &self.latency_us;
        s += &format!(
            "  latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  (mean {:.3})\n",
            l.p50 / 1000.0,
            l.p90 / 1000.0,
            l.p99 / 1000.0,
            l.p999 / 1000.0,
            l.max / 1000.0,
            l.mean / 1000.0
        );
        if self.settings.clients > 1 {
            s += &format!("  per client: {} to {} ops\n", self.client_ops_min, self.client_ops_max);
        }
        if self.contended > 0 {
            s += &format!("  contended: {} ops found the lock or permits taken\n", self.contended);
        }
        if self.noscript_reloads > 0 {
            s += &format!("  NOSCRIPT answered by SCRIPT LOAD: {}\n", self.noscript_reloads);
        }
        if self.errors > 0 {
            s += &format!("  errors: {}, first: {}\n", self.errors, self.first_error.as_deref().unwrap_or(""));
        }
        if self.unexpected > 0 {
            s += &format!(
                "  unexpected replies: {}, first: {}\n",
                self.unexpected,
                self.first_unexpected.as_deref().unwrap_or("")
            );
        }
        s
    }
}

/// The progress bar, drawn from a thread of its own so that clients only
/// bump a counter; shown only when stderr is a terminal.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub fn start(shared: Arc<Shared>, label: String, quiet: bool) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { stop, thread: None };
        }
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (length, template) = match (shared.limit, shared.duration) {
                (Some(n), _) => (n, "{prefix} [{bar:32}] {pos}/{len} ops {msg}"),
                (None, Some(d)) => (d.as_millis() as u64, "{prefix} [{bar:32}] {msg}"),
                (None, None) => (0, "{prefix} {msg}"),
            };
            let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(label);
            let mut last = (Instant::now(), 0u64);
            let mut rate = 0.0;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let done = shared.completed.load(Ordering::Relaxed);
                let now = Instant::now();
                let dt = now.duration_since(last.0).as_secs_f64();
                if dt >= 0.5 {
                    rate = (done - last.1) as f64 / dt;
                    last = (now, done);
                }
                let elapsed = shared.start.get().map_or(Duration::ZERO, |s| now.duration_since(*s));
                if last.1 == 0 && elapsed.as_secs_f64() > 0.0 {
                    rate = done as f64 / elapsed.as_secs_f64();
                }
                match shared.limit {
                    Some(_) => bar.set_position(done),
                    None => bar.set_position((elapsed.as_millis() as u64).min(length)),
                }
                bar.set_message(format!("{:.1} s, {done} ops, {rate:.0} ops/s", elapsed.as_secs_f64()));
            }
            bar.finish_and_clear();
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
