//! Counters behind INFO stats, commandstats and errorstats, reset by
//! CONFIG RESETSTAT.

use std::collections::BTreeMap;

use crate::error::CmdError;

#[derive(Debug, Default, Clone)]
pub struct CommandStat {
    pub calls: u64,
    /// Time spent, in `clock::ticks` (microseconds when reported).
    pub ticks: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    /// Its runs' latencies (`latency-tracking`), from its first run.
    pub latency: Option<super::histogram::LatencyHistogram>,
}

#[derive(Debug, Default)]
pub struct Stats {
    pub total_connections_received: u64,
    /// Error replies to a master, a replica or the AOF's replay, which
    /// should make none (Redis's `stat_unexpected_error_replies`).
    pub unexpected_error_replies: u64,
    pub total_commands_processed: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub rejected_connections: u64,
    /// Indexed by `Command::stat_index`.
    pub cmd: Vec<CommandStat>,
    /// Error counts by prefix (`ERR`, `WRONGTYPE` …).
    pub errors: BTreeMap<String, u64>,
    pub total_error_replies: u64,
    /// `total_error_replies` when the last command started or was booked
    /// (Redis's `prev_err_count`): a command failed if errors were counted
    /// since, not counting those of the commands it ran itself.
    pub prev_error_replies: u64,
    /// Command lines the pipeline (`engine::exec`) resolved for running:
    /// equal to the executions, which a test checks.
    pub resolutions: u64,
    /// Reply buffers the cron shrank and grew (see `output::ReplyBuffer`).
    pub reply_buffer_shrinks: u64,
    pub reply_buffer_expands: u64,
    /// Runs of each recognized script (`scripting::native`), by table index.
    pub recognized: Vec<ScriptRuns>,
}

/// How many times a recognized script ran natively and in the Lua VM.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScriptRuns {
    pub native: u64,
    pub lua: u64,
}

impl Stats {
    pub fn new(commands: usize) -> Stats {
        Stats {
            cmd: vec![CommandStat::default(); commands],
            ..Stats::default()
        }
    }

    pub fn reset(&mut self) {
        let n = self.cmd.len();
        *self = Stats::new(n);
    }

    /// The run counters of recognized script `index`.
    pub fn recognized_runs(&mut self, index: usize) -> &mut ScriptRuns {
        if self.recognized.len() <= index {
            self.recognized.resize(index + 1, ScriptRuns::default());
        }
        &mut self.recognized[index]
    }

    pub fn count_error(&mut self, e: &CmdError) {
        self.count_error_text(e.as_bytes());
    }

    /// Counts an error reply under its code, as Redis's `afterErrorReply`
    /// finds it: the first word, if a space ends it within the line's
    /// first 32 bytes (its `-` included), else `ERR`.
    pub fn count_error_text(&mut self, e: &[u8]) {
        let prefix = match memchr::memchr(b' ', &e[..e.len().min(31)]) {
            Some(space) => &e[..space],
            None => b"ERR".as_slice(),
        };
        *self.errors.entry(String::from_utf8_lossy(prefix).into_owned()).or_default() += 1;
        self.total_error_replies += 1;
    }
}

/// Bytes and calls on the network (INFO's `total_net_*_bytes`,
/// `total_reads_processed`, `total_writes_processed`), counted by the
/// connections and read by the engine.
#[derive(Debug, Default)]
pub struct NetStats {
    input_bytes: std::sync::atomic::AtomicU64,
    output_bytes: std::sync::atomic::AtomicU64,
    reads: std::sync::atomic::AtomicU64,
    writes: std::sync::atomic::AtomicU64,
}

impl NetStats {
    /// A read that brought `n` bytes.
    pub fn read(&self, n: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.input_bytes.fetch_add(n as u64, Relaxed);
        self.reads.fetch_add(1, Relaxed);
    }

    /// A write that took `n` bytes.
    pub fn wrote(&self, n: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.output_bytes.fetch_add(n as u64, Relaxed);
        self.writes.fetch_add(1, Relaxed);
    }

    /// Input bytes, output bytes, reads, writes.
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.input_bytes.load(Relaxed),
            self.output_bytes.load(Relaxed),
            self.reads.load(Relaxed),
            self.writes.load(Relaxed),
        )
    }

    pub fn reset(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        for counter in [&self.input_bytes, &self.output_bytes, &self.reads, &self.writes] {
            counter.store(0, Relaxed);
        }
    }
}
