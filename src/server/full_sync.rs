//! Relaying a replica's snapshot from the child process that writes it
//! (see `engine::replication`, `fork_snapshot`): the engine forks, the
//! child writes `$EOF:<mark>`, the file and the mark into a pipe, and a
//! task here moves what the pipe holds into the replica's output while
//! the server goes on serving (Redis's diskless sync,
//! `rdbPipeReadHandler`). The pipe is read only while the replica's
//! output holds less than [`HIGH_WATER`] bytes, so that a slow replica
//! slows the child instead of filling memory. Once the child has
//! written everything and exited, the engine puts the stream held
//! meanwhile after the snapshot; a child that fails, a replica that goes,
//! or one that reads nothing for `repl-timeout` seconds ("Disconnecting
//! timedout replica (full sync)"), ends the transfer: the child is killed,
//! and reaped without blocking the server.

use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use super::Shared;
use crate::engine::CloseRequest;
use crate::engine::replication::SnapshotRelay;

/// Most of the snapshot waiting in a replica's output at once.
const HIGH_WATER: usize = 4 << 20;

/// Starts a task for each snapshot the engine started since the last
/// batch.
pub(crate) fn start_relays(shared: &Rc<Shared>) {
    let relays = std::mem::take(&mut shared.engine.borrow_mut().state.replicas.relays);
    for relay in relays {
        tokio::task::spawn_local(relay_task(shared.clone(), relay));
    }
}

async fn relay_task(shared: Rc<Shared>, relay: SnapshotRelay) {
    let SnapshotRelay { client, outbox, pid, pipe } = relay;
    let relayed = relay_pipe(&shared, client, &outbox, pipe).await;
    if !relayed {
        // SAFETY: signals this process's own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // The child has closed its end of the pipe (it is exiting) or was
    // just killed: its exit is waited for off the server's loop, as the
    // kernel may take a while to take a large copy of the dataset down.
    let mut status = 0;
    let reaped = loop {
        // SAFETY: reaps this process's own child, without blocking.
        let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if reaped != 0 {
            break reaped;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let ok = relayed && reaped == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    shared.engine.borrow_mut().state.snapshot_relayed(client, ok);
    shared.after_batch();
}

/// Moves the pipe's bytes into `outbox` until the child closes it: true
/// at its end, false if the replica (`client`) went or the pipe failed.
async fn relay_pipe(shared: &Shared, client: crate::db::ClientId, outbox: &crate::engine::Outbox, pipe: std::os::fd::OwnedFd) -> bool {
    // SAFETY: sets a flag on a descriptor owned here.
    let nonblocking = unsafe {
        let flags = libc::fcntl(pipe.as_raw_fd(), libc::F_GETFL);
        flags >= 0 && libc::fcntl(pipe.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
    };
    if !nonblocking {
        return false;
    }
    let timeout = {
        let engine = shared.engine.borrow();
        Duration::from_secs(engine.state.params.int("repl-timeout").unwrap_or(60).max(1) as u64)
    };
    // When the replica last read some of what waits for it.
    let (mut waiting, mut moved_at) = (0, tokio::time::Instant::now());
    // SAFETY: an OwnedFd stays open, on the same pipe, for as long as
    // the AsyncFd that owns it.
    let Ok(pipe) = (unsafe { AsyncFd::register(pipe) }) else {
        return false;
    };
    let mut buf = vec![0u8; 1 << 16];
    loop {
        if outbox.close_request() != CloseRequest::Open || !shared.engine.borrow().state.clients.contains_key(&client) {
            return false;
        }
        let unwritten = outbox.unwritten();
        if unwritten < waiting || unwritten == 0 {
            moved_at = tokio::time::Instant::now();
        }
        waiting = unwritten;
        if unwritten > HIGH_WATER {
            if moved_at.elapsed() > timeout {
                crate::log::warning(format_args!("Disconnecting timedout replica (full sync): client id={client}"));
                outbox.close_now();
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        // Looked at again now and then: a replica that went while the
        // child is slow (`rdb-key-save-delay`) ends it.
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
            Ok(Ok(0)) => return true,
            Ok(Ok(n)) => {
                if let Some(mut out) = outbox.writable() {
                    // In whole chunks, as the stream is written.
                    out.extend_from_slice(&buf[..n]);
                    out.place(false);
                }
                outbox.wake();
                waiting += n;
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Err(_)) => return false,
            Err(_would_block) => {}
        }
    }
}
