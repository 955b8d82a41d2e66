//! Relaying a replica's snapshot from the child process that writes it
//! (see `engine::replication`, `fork_snapshot`): the engine forks, the
//! child writes `$EOF:<mark>`, the file and the mark into a pipe, and a
//! task here moves what the pipe holds into the replica's output while
//! the server goes on serving (Redis's diskless sync,
//! `rdbPipeReadHandler`). One child writes for all the replicas that
//! waited for it, and each gets every byte. The pipe is read only while
//! every replica's output holds less than [`HIGH_WATER`] bytes, so that a
//! slow replica slows the child instead of filling memory. Once the child
//! has written everything and exited, the engine puts the stream held
//! meanwhile after the snapshot. A replica that goes, or one that reads
//! nothing for `repl-timeout` seconds ("Disconnecting timedout replica
//! (full sync)"), is left out; when none is left, or the child fails, the
//! transfer ends: the child is killed, and reaped without blocking the
//! server.
//!
//! A disk-based sync's snapshot (Redis's `sendBulkToSlave`) is relayed
//! from the file a background save wrote, after `$<length>`, to each
//! replica at its own pace (the file is there to be read again, where a
//! pipe is read once for all); the replicas that waited for that save are
//! online once it is all in their outputs, and the stream held for them
//! follows at once.

use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use super::Shared;
use crate::engine::CloseRequest;
use crate::engine::replication::{SnapshotRelay, SnapshotSource};

/// Most of the snapshot waiting in a replica's output at once.
const HIGH_WATER: usize = 4 << 20;

/// Starts a task for each snapshot child the engine started since the
/// last batch.
pub(crate) fn start_relays(shared: &Rc<Shared>) {
    let relays = std::mem::take(&mut shared.engine.borrow_mut().state.replicas.relays);
    for relay in relays {
        tokio::task::spawn_local(relay_task(shared.clone(), relay));
    }
}

/// A replica the snapshot goes to, and how far its output moved.
struct Target {
    client: crate::db::ClientId,
    outbox: crate::engine::Outbox,
    /// Still taking the snapshot.
    up: bool,
    /// What waited in its output at the last look, and when it last read
    /// some of it.
    waiting: usize,
    moved_at: tokio::time::Instant,
    /// How much of a saved file it was given (each replica takes a file
    /// at its own pace, as Redis's `repldboff`).
    offset: u64,
}

async fn relay_task(shared: Rc<Shared>, relay: SnapshotRelay) {
    let now = tokio::time::Instant::now();
    let mut targets: Vec<Target> = relay
        .targets
        .into_iter()
        .map(|(client, outbox)| Target {
            client,
            outbox,
            up: true,
            waiting: 0,
            moved_at: now,
            offset: 0,
        })
        .collect();
    let (pid, pipe) = match relay.source {
        SnapshotSource::Pipe { pid, pipe } => (pid, pipe),
        SnapshotSource::File { file, len } => {
            let sent = relay_file(&shared, &mut targets, file, len).await;
            let outcomes: Vec<_> = targets.iter().map(|t| (t.client, sent && t.up)).collect();
            shared.engine.borrow_mut().state.saved_file_sent(&outcomes);
            shared.after_batch();
            return;
        }
    };
    let relayed = relay_pipe(&shared, &mut targets, pipe, pid).await;
    if !relayed {
        // SAFETY: signals this process's own child (not yet reaped: its
        // pid is still its own).
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // The child has closed its end of the pipe (it is exiting) or was
    // just killed: its exit is waited for off the server's loop, as the
    // kernel may take a while to take a large copy of the dataset down.
    let status = loop {
        if let Some(status) = reap(pid) {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let ok = relayed && succeeded(status);
    // Redis's `backgroundSaveDoneHandlerSocket`.
    match status {
        Some(status) if libc::WIFSIGNALED(status) => {
            crate::log::warning(format_args!("Background transfer terminated by signal {}", libc::WTERMSIG(status)))
        }
        _ if ok => crate::log::notice(format_args!("Background RDB transfer terminated with success")),
        _ => crate::log::warning(format_args!("Background transfer error")),
    }
    let outcomes: Vec<_> = targets.iter().map(|t| (t.client, ok && t.up)).collect();
    {
        let mut engine = shared.engine.borrow_mut();
        let engine = &mut *engine;
        engine.state.snapshot_child_ended(pid, &outcomes);
        // Replicas that asked meanwhile get the next child now (Redis's
        // `checkChildrenDone`).
        let scripts = &engine.scripts;
        engine.state.start_pending_snapshot(|| scripts.library_codes());
    }
    shared.after_batch();
}

/// The exit status of the child `pid` once it has exited (None inside
/// if it cannot be had).
fn reap(pid: libc::pid_t) -> Option<Option<libc::c_int>> {
    let mut status = 0;
    // SAFETY: reaps this process's own child, without blocking.
    match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
        0 => None,
        reaped if reaped == pid => Some(Some(status)),
        _ => Some(None),
    }
}

/// Whether a child exited with success.
fn succeeded(status: Option<libc::c_int>) -> bool {
    status.is_some_and(|s| libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0)
}

/// Whether the child `pid` has ended without success (killed, as by the
/// OOM killer, or failed), looked at without reaping it: its pid stays
/// its own (FLUSHALL may signal it) until [`reap`].
fn failed_meanwhile(pid: libc::pid_t) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid value for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: looks at this process's own child, without blocking or
    // reaping it.
    let done = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: `si_pid` and `si_status` are set for a child's exit.
    let (exited, status) = unsafe { (info.si_pid(), info.si_status()) };
    done == 0 && exited == pid && (info.si_code != libc::CLD_EXITED || status != 0)
}

/// Moves the pipe's bytes into the targets' outputs until the child
/// closes it: true at its end, false if every replica went, the child
/// failed (killed, as by the OOM killer), or the pipe failed. A replica
/// that went, or that read nothing for `repl-timeout` while its output
/// was full, is left out from then on (`up` false).
async fn relay_pipe(shared: &Shared, targets: &mut [Target], pipe: std::os::fd::OwnedFd, pid: libc::pid_t) -> bool {
    // SAFETY: sets a flag on a descriptor owned here.
    let nonblocking = unsafe {
        let flags = libc::fcntl(pipe.as_raw_fd(), libc::F_GETFL);
        flags >= 0 && libc::fcntl(pipe.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
    };
    if !nonblocking {
        return false;
    }
    // SAFETY: an OwnedFd stays open, on the same pipe, for as long as
    // the AsyncFd that owns it.
    let Ok(pipe) = (unsafe { AsyncFd::register(pipe) }) else {
        return false;
    };
    let mut buf = vec![0u8; 1 << 16];
    loop {
        // A child that exited with success may have left its last bytes
        // in the pipe; one that failed ends the transfer even while the
        // replicas' outputs are full and the pipe is not read (Redis's
        // `checkChildrenDone`).
        if failed_meanwhile(pid) {
            return false;
        }
        match pace(shared, targets) {
            Pace::NoneLeft => {
                crate::log::warning(format_args!("Diskless rdb transfer, last replica dropped, killing fork child."));
                return false;
            }
            Pace::Full => {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            Pace::Go => {}
        }
        // Looked at again now and then: a replica that went while the
        // child is slow (`rdb-key-save-delay`) is left out.
        let ready = tokio::select! {
            ready = pipe.readable() => ready,
            _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
        };
        let Ok(mut ready) = ready else { return false };
        let read = ready.try_io(|fd| {
            // SAFETY: reads into `buf`, which has room for its length.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match read {
            Ok(Ok(0)) => {
                let up = targets.iter().filter(|t| t.up).count();
                crate::log::warning(format_args!(
                    "Diskless rdb transfer, done reading from pipe, {up} replicas still up."
                ));
                return true;
            }
            Ok(Ok(n)) => {
                for t in targets.iter_mut().filter(|t| t.up) {
                    crate::engine::replication::send_raw(&t.outbox, &buf[..n]);
                    t.waiting += n;
                }
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Err(_)) => return false,
            Err(_would_block) => {}
        }
    }
}

/// What the replicas' outputs allow.
enum Pace {
    /// Every replica went.
    NoneLeft,
    /// The slowest replica's output is full: wait (Redis's
    /// `rdb_pipe_numconns_writing`).
    Full,
    Go,
}

/// `repl-timeout`, read each time: CONFIG SET applies to a transfer
/// under way.
fn repl_timeout(shared: &Shared) -> Duration {
    let engine = shared.engine.borrow();
    Duration::from_secs(engine.state.params.int("repl-timeout").unwrap_or(60).max(1) as u64)
}

/// Looks at a target's output: whether it has room for more. A replica
/// that went, or that read nothing for `timeout` while its output was
/// full ("Disconnecting timedout replica (full sync)"), is left out from
/// then on (`up` false).
fn has_room(shared: &Shared, t: &mut Target, timeout: Duration) -> bool {
    if t.outbox.close_request() != CloseRequest::Open || !shared.engine.borrow().state.clients.contains_key(&t.client) {
        t.up = false;
        return false;
    }
    let unwritten = t.outbox.unwritten();
    if unwritten < t.waiting || unwritten == 0 {
        t.moved_at = tokio::time::Instant::now();
    }
    t.waiting = unwritten;
    if unwritten <= HIGH_WATER {
        return true;
    }
    if t.moved_at.elapsed() > timeout {
        let name = shared
            .engine
            .borrow()
            .state
            .replicas
            .announced
            .get(&t.client)
            .map(|a| a.name.clone());
        crate::log::warning(format_args!(
            "Disconnecting timedout replica (full sync): {}",
            name.unwrap_or_default()
        ));
        t.outbox.close_now();
        t.up = false;
    }
    false
}

/// Looks at the targets' outputs (see [`has_room`]): the slowest sets the
/// pace of a pipe, read once for all.
fn pace(shared: &Shared, targets: &mut [Target]) -> Pace {
    let timeout = repl_timeout(shared);
    let mut full = false;
    for t in targets.iter_mut().filter(|t| t.up) {
        full |= !has_room(shared, t, timeout) && t.up;
    }
    if !targets.iter().any(|t| t.up) {
        Pace::NoneLeft
    } else if full {
        Pace::Full
    } else {
        Pace::Go
    }
}

/// Moves the saved `file`, `len` bytes after `$<len>`, into the targets'
/// outputs, each at its own pace (a replica that reads slowly holds back
/// no other): true once all of it is there for those still `up`, false if
/// every replica went or the file could not be read.
async fn relay_file(shared: &Shared, targets: &mut [Target], file: std::fs::File, len: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let preamble = format!("${len}\r\n");
    for t in targets.iter_mut() {
        crate::engine::replication::send_raw(&t.outbox, preamble.as_bytes());
    }
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let timeout = repl_timeout(shared);
        let mut moved = false;
        for t in targets.iter_mut().filter(|t| t.up && t.offset < len) {
            if !has_room(shared, t, timeout) {
                continue;
            }
            let want = buf.len().min((len - t.offset) as usize);
            match file.read_at(&mut buf[..want], t.offset) {
                Ok(0) => {
                    crate::log::warning(format_args!("Read error sending DB to replica: premature EOF"));
                    return false;
                }
                Ok(n) => {
                    crate::engine::replication::send_raw(&t.outbox, &buf[..n]);
                    t.waiting += n;
                    t.offset += n as u64;
                    moved = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    crate::log::warning(format_args!(
                        "Read error sending DB to replica: {}",
                        crate::error::os_error_text(&e)
                    ));
                    return false;
                }
            }
        }
        let up: Vec<&Target> = targets.iter().filter(|t| t.up).collect();
        if up.is_empty() {
            return false;
        }
        if up.iter().all(|t| t.offset >= len) {
            return true;
        }
        if moved {
            // Other connections run between pieces.
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
