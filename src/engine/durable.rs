//! Replies that wait for the append-only file: one write per round of
//! connections, and group commit for `appendfsync always`.
//!
//! Redis writes its append-only file once per event-loop iteration, before
//! it writes any reply of that iteration, and with `always` syncs it there
//! too: one `fsync` covers every client served in the iteration, and the
//! loop waits for it. keylock keeps the promise without the wait:
//!
//! - a batch's effects are recorded; a task of the server thread (the
//!   flusher, woken by the first batch that recorded something) writes
//!   everything recorded once the connections that were ready have run
//!   their batches: one `write` per round instead of one per connection;
//! - with `always`, a thread of its own ([`Syncer`]) then runs `fdatasync`
//!   over everything written so far while the engine serves on: one sync
//!   covers the writes of every connection made while the previous one ran.
//!
//! The rule a connection follows (see [`OutputBuffer::gate`]): output
//! queued at a moment when the stream has recorded `n` bytes may be
//! written once the file holds those `n` bytes (`everysec`, `no`) or once
//! they are synced (`always`). That holds for any output (a reply, a
//! pub/sub message, a keyspace event, a served blocked client), since
//! whatever it tells of was recorded before it was queued; output queued
//! while nothing is waiting passes at once. So no reply tells of a write
//! that a crash of the process (or, with `always`, of the machine) can
//! lose.
//!
//! `everysec` syncs on the same thread once a second. A write or sync that
//! fails with `always` is fatal, as in Redis (the replies that waited for
//! it are never sent); otherwise it turns `aof_last_write_status` to `err`
//! and writes are refused with MISCONF until the file takes data again.
//!
//! [`OutputBuffer::gate`]: super::output::OutputBuffer::gate

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::watch;

/// What output waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Wait {
    /// Nothing (no append-only file).
    Nothing = 0,
    /// The write of what was recorded before it (`everysec`, `no`).
    Written = 1,
    /// Its sync (`always`).
    Synced = 2,
}

/// What the engine, the connections and the syncing thread share.
#[derive(Debug)]
pub struct Durability {
    /// What output waits for ([`Wait`]).
    wait: AtomicU8,
    /// Bytes the AOF stream recorded so far (written to the file or about
    /// to be), over every file the AOF has had.
    recorded: AtomicU64,
    /// Of those, the bytes written to the file, and those known to be on
    /// disk.
    progress: watch::Sender<Progress>,
    /// A sync is running.
    syncing: AtomicBool,
    /// The errno of the last sync if it failed, 0 once one succeeds.
    failed: AtomicI32,
    /// Syncs done (INFO keylock `aof_syncs`).
    syncs: AtomicU64,
    /// A SLOW-FSYNC fault: every sync takes this much longer (ms, 0 for
    /// none), and how many syncs it slowed since it was set.
    slow_sync_ms: AtomicU64,
    slowed: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    written: u64,
    synced: u64,
}

impl Default for Durability {
    fn default() -> Durability {
        Durability {
            wait: AtomicU8::new(Wait::Nothing as u8),
            recorded: AtomicU64::new(0),
            progress: watch::Sender::new(Progress::default()),
            syncing: AtomicBool::new(false),
            failed: AtomicI32::new(0),
            syncs: AtomicU64::new(0),
            slow_sync_ms: AtomicU64::new(0),
            slowed: AtomicU64::new(0),
        }
    }
}

/// The thread an append-only file is synced on, and what it is asked to
/// do next; it ends when this is dropped.
#[derive(Debug)]
pub struct Syncer {
    queue: Arc<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    next: Mutex<Next>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct Next {
    request: Option<(Arc<File>, u64)>,
    stop: bool,
}

impl Syncer {
    pub fn start(durability: Arc<Durability>) -> Syncer {
        let queue = Arc::new(Queue::default());
        let thread_queue = queue.clone();
        let spawned = std::thread::Builder::new()
            .name("keylock-aof-sync".into())
            .spawn(move || run(&thread_queue, &durability));
        if spawned.is_err() {
            crate::log::warning(format_args!("Can't start the AOF sync thread"));
        }
        Syncer { queue }
    }

    /// Asks for `file` to be synced, covering `upto` recorded bytes (the
    /// thread takes the latest request when it is free: one sync covers
    /// everything written before it starts).
    pub fn request(&self, file: &Arc<File>, upto: u64) {
        let mut next = self.queue.next.lock().unwrap_or_else(|e| e.into_inner());
        next.request = Some((file.clone(), upto));
        drop(next);
        self.queue.wake.notify_one();
    }

    /// A sync asked for and not yet started (INFO `aof_pending_bio_fsync`
    /// counts it with the one running).
    pub fn queued(&self) -> u64 {
        u64::from(self.queue.next.lock().unwrap_or_else(|e| e.into_inner()).request.is_some())
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.queue.next.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        self.queue.wake.notify_one();
    }
}

fn run(queue: &Queue, durability: &Durability) {
    loop {
        let (file, upto) = {
            let mut next = queue.next.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if next.stop {
                    return;
                }
                if let Some(request) = next.request.take() {
                    durability.syncing.store(true, Ordering::Release);
                    break request;
                }
                next = queue.wake.wait(next).unwrap_or_else(|e| e.into_inner());
            }
        };
        let slow = durability.slow_sync_ms.load(Ordering::Acquire);
        if slow > 0 {
            std::thread::sleep(std::time::Duration::from_millis(slow));
            durability.slowed.fetch_add(1, Ordering::AcqRel);
        }
        let result = file.sync_data();
        drop(file);
        durability.syncs.fetch_add(1, Ordering::AcqRel);
        match result {
            Ok(()) => {
                durability.failed.store(0, Ordering::Release);
                durability.advance_to(upto);
            }
            Err(e) => durability.failed.store(e.raw_os_error().unwrap_or(libc::EIO), Ordering::Release),
        }
        durability.syncing.store(false, Ordering::Release);
    }
}

impl Durability {
    fn advance_to(&self, upto: u64) {
        self.progress.send_if_modified(|p| {
            let moved = upto > p.synced;
            p.synced = p.synced.max(upto);
            p.written = p.written.max(p.synced);
            moved
        });
    }

    /// What was recorded up to `upto` is held by a majority of a Raft
    /// shard (its "sync").
    pub fn committed_to(&self, upto: u64) {
        self.advance_to(upto);
    }

    /// The file holds everything recorded up to `upto`.
    pub fn written_to(&self, upto: u64) {
        self.progress.send_if_modified(|p| {
            let moved = upto > p.written;
            p.written = p.written.max(upto);
            moved
        });
    }

    /// The stream recorded `n` more bytes; the count so far.
    pub fn record(&self, n: usize) -> u64 {
        self.recorded.fetch_add(n as u64, Ordering::AcqRel) + n as u64
    }

    /// The bytes recorded so far.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Acquire)
    }

    /// Everything recorded so far counts as on disk (the engine synced
    /// the file itself: a rewrite's switch of files, the AOF turned off,
    /// shutdown).
    pub fn synced_all(&self) {
        self.advance_to(self.recorded.load(Ordering::Acquire));
    }

    /// What output waits for from now on; with nothing to wait for (the
    /// AOF turned off, written and synced first), whatever waited goes.
    pub fn set_wait(&self, wait: Wait) {
        let before = self.wait.swap(wait as u8, Ordering::AcqRel);
        if (wait as u8) < before {
            let all = self.recorded.load(Ordering::Acquire);
            // Waiters look again (a wait for less may be over already).
            self.progress.send_modify(|p| {
                if wait == Wait::Nothing {
                    p.written = p.written.max(all);
                    p.synced = p.synced.max(all);
                }
            });
        }
    }

    fn waits_for(&self) -> Wait {
        match self.wait.load(Ordering::Acquire) {
            0 => Wait::Nothing,
            1 => Wait::Written,
            _ => Wait::Synced,
        }
    }

    fn reached(wait: Wait, p: Progress, upto: u64) -> bool {
        match wait {
            Wait::Nothing => true,
            Wait::Written => p.written >= upto,
            Wait::Synced => p.synced >= upto,
        }
    }

    /// The recorded bytes output queued now must wait for, if it must.
    pub fn needed(&self) -> Option<u64> {
        let wait = self.waits_for();
        if wait == Wait::Nothing {
            return None;
        }
        let recorded = self.recorded.load(Ordering::Acquire);
        (!Self::reached(wait, *self.progress.borrow(), recorded)).then_some(recorded)
    }

    /// Whether output waiting for `upto` recorded bytes may go.
    pub fn is_synced(&self, upto: u64) -> bool {
        Self::reached(self.waits_for(), *self.progress.borrow(), upto)
    }

    /// Waits until output waiting for `upto` recorded bytes may go.
    pub async fn wait_synced(&self, upto: u64) {
        let mut progress = self.progress.subscribe();
        let _ = progress.wait_for(|&p| Self::reached(self.waits_for(), p, upto)).await;
    }

    /// The errno of the last sync, if it failed.
    pub fn sync_error(&self) -> Option<i32> {
        match self.failed.load(Ordering::Acquire) {
            0 => None,
            errno => Some(errno),
        }
    }

    /// Syncs done so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Acquire)
    }

    /// Sets the SLOW-FSYNC fault (None removes it).
    pub fn set_slow_sync(&self, ms: Option<u64>) {
        let before = self.slow_sync_ms.swap(ms.unwrap_or(0), Ordering::AcqRel);
        if ms.is_some_and(|ms| ms != before) {
            self.slowed.store(0, Ordering::Release);
        }
    }

    /// Syncs the SLOW-FSYNC fault slowed since it was set.
    pub fn slowed_syncs(&self) -> u64 {
        self.slowed.load(Ordering::Acquire)
    }

    /// Whether a sync is running.
    pub fn syncing(&self) -> bool {
        self.syncing.load(Ordering::Acquire)
    }
}
