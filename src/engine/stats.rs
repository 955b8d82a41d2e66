//! Counters behind INFO stats, commandstats and errorstats, reset by
//! CONFIG RESETSTAT.

use std::collections::BTreeMap;

use crate::error::CmdError;

#[derive(Debug, Default, Clone)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

#[derive(Debug, Default)]
pub struct Stats {
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub rejected_connections: u64,
    /// Indexed by `Command::stat_index`.
    pub cmd: Vec<CommandStat>,
    /// Error counts by prefix (`ERR`, `WRONGTYPE` …).
    pub errors: BTreeMap<String, u64>,
    pub total_error_replies: u64,
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

    pub fn count_error(&mut self, e: &CmdError) {
        self.count_error_text(e.0.as_bytes());
    }

    pub fn count_error_text(&mut self, e: &[u8]) {
        let prefix = e.split(|&c| c == b' ').next().unwrap_or(b"ERR");
        *self.errors.entry(String::from_utf8_lossy(prefix).into_owned()).or_default() += 1;
        self.total_error_replies += 1;
    }
}
