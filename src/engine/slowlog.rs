//! The slow log (Redis's slowlog.c): every command that ran for at least
//! `slowlog-log-slower-than` microseconds (negative: never; 0: every
//! command), newest first, at most `slowlog-max-len` of them.
//!
//! Entries are made where every executed command is booked
//! (`State::book_run`), so a client's commands, those EXEC runs and those
//! a script runs (Lua, native or direct, shown as Redis shows its script
//! client: `?:0`) are all seen, and commands Redis flags `skip_slowlog`
//! (AUTH, HELLO, EXEC …) never are. An entry keeps what Redis keeps: at
//! most 32 arguments (the last saying how many more there were), each cut
//! at 128 bytes (saying how many more bytes there were).

use std::collections::VecDeque;

use bytes::Bytes;

use crate::reply::Reply;

/// Redis's `SLOWLOG_ENTRY_MAX_ARGC`.
const MAX_ARGC: usize = 32;
/// Redis's `SLOWLOG_ENTRY_MAX_STRING`.
const MAX_STRING: usize = 128;

/// One logged command.
#[derive(Debug)]
struct Entry {
    id: u64,
    /// Unix seconds when it was logged.
    time: u64,
    /// How long it ran, in microseconds.
    duration_us: u64,
    argv: Vec<Bytes>,
    /// The client's address (`ip:port`, `path:0`, or `?:0` for scripts).
    peer: Bytes,
    name: Bytes,
}

#[derive(Debug, Default)]
pub struct SlowLog {
    entries: VecDeque<Entry>,
    next_id: u64,
}

/// Who ran a logged command.
pub struct Caller<'a> {
    pub peer: String,
    pub name: Option<&'a Bytes>,
}

impl SlowLog {
    /// Logs a command that ran `duration_us` if it was slow enough, and
    /// keeps at most `max_len` entries (Redis's `slowlogPushEntryIfNeeded`).
    pub fn push_if_slow(&mut self, slower_than: i64, max_len: usize, duration_us: u64, argv: &[Bytes], caller: Caller, now_secs: u64) {
        if slower_than < 0 {
            return;
        }
        if duration_us >= slower_than as u64 {
            let entry = Entry {
                id: self.next_id,
                time: now_secs,
                duration_us,
                argv: kept_args(argv),
                peer: Bytes::from(caller.peer),
                name: caller.name.cloned().unwrap_or_default(),
            };
            self.next_id += 1;
            self.entries.push_front(entry);
        }
        self.entries.truncate(max_len);
    }

    /// Keeps the newest `max_len` entries.
    pub fn truncate(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// SLOWLOG RESET: the entries go, the ids go on.
    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// SLOWLOG GET: the newest `count` entries as Redis replies with them.
    pub fn newest(&self, count: usize) -> Reply {
        Reply::Array(
            self.entries
                .iter()
                .take(count)
                .map(|e| {
                    Reply::Array(vec![
                        Reply::Int(e.id as i64),
                        Reply::Int(e.time as i64),
                        Reply::Int(e.duration_us as i64),
                        Reply::Array(e.argv.iter().cloned().map(Reply::Bulk).collect()),
                        Reply::Bulk(e.peer.clone()),
                        Reply::Bulk(e.name.clone()),
                    ])
                })
                .collect(),
        )
    }
}

/// The arguments an entry keeps (Redis's `slowlogCreateEntry`).
fn kept_args(argv: &[Bytes]) -> Vec<Bytes> {
    let kept = argv.len().min(MAX_ARGC);
    (0..kept)
        .map(|j| {
            if kept != argv.len() && j == kept - 1 {
                Bytes::from(format!("... ({} more arguments)", argv.len() - kept + 1))
            } else if argv[j].len() > MAX_STRING {
                let mut cut = argv[j][..MAX_STRING].to_vec();
                cut.extend_from_slice(format!("... ({} more bytes)", argv[j].len() - MAX_STRING).as_bytes());
                Bytes::from(cut)
            } else {
                Bytes::copy_from_slice(&argv[j])
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller() -> Caller<'static> {
        Caller {
            peer: "127.0.0.1:1".into(),
            name: None,
        }
    }

    #[test]
    fn long_argument_lists_and_strings_are_cut_as_redis_cuts_them() {
        let argv: Vec<Bytes> = (0..40)
            .map(|i| Bytes::from(if i == 1 { "x".repeat(130) } else { i.to_string() }))
            .collect();
        let kept = kept_args(&argv);
        assert_eq!(kept.len(), 32);
        assert_eq!(kept[31], Bytes::from_static(b"... (9 more arguments)"));
        assert_eq!(kept[1], Bytes::from(format!("{}... (2 more bytes)", "x".repeat(128))));
    }

    #[test]
    fn entries_are_kept_newest_first_up_to_the_maximum() {
        let mut log = SlowLog::default();
        for i in 0..5 {
            log.push_if_slow(0, 3, i, &[Bytes::from(i.to_string())], caller(), 0);
        }
        assert_eq!(log.len(), 3);
        assert_eq!(log.entries[0].id, 4);
        log.push_if_slow(-1, 3, 1_000_000, &[], caller(), 0);
        assert_eq!(log.entries[0].id, 4, "a negative threshold logs nothing");
    }
}
