//! A client's output: the bytes owed to it and not yet written, where the
//! engine puts replies and pushes and the connection writes them from, and
//! Redis's `client-output-buffer-limit`, which closes a client that leaves
//! too much of it unread.
//!
//! The engine and every connection run on one thread, so a client's
//! [`Outbox`] is one buffer shared by both: replies, pub/sub messages and
//! MONITOR lines are appended to it as they are produced (copied per
//! client, as Redis copies them into each client's reply list), and
//! [`Outbox::unwritten`] is at every moment what the client still has to
//! read. That is what the limits are checked against, when output is
//! queued and from the cron, as Redis's `checkClientOutputBufferLimits`:
//!
//! - the class is Redis's `getClientType`: `pubsub` while the client has a
//!   subscription (in RESP3 too), otherwise `normal`. MONITOR clients are
//!   `normal` (Redis marks them replicas but exempts them here). The
//!   `replica` (`slave`) class is parsed and shown but applies to no
//!   client: keylock has no replicas.
//! - what counts is Redis's reply list, not its reply buffer
//!   (Redis's `c->buf`, see [`ReplyBuffer`]). Redis's `_addReplyToBufferOrList`
//!   puts a reply in the buffer as far as it has room, and the rest in the
//!   list; nothing goes to the buffer while the list holds anything, and
//!   nothing of a reply whose length is sent last (`addReplyDeferredLen`:
//!   KEYS, SINTER, ZRANGEBYSCORE, a script's table…), which starts a list
//!   entry of its own. The buffer's room comes back once all it holds is
//!   written. [`OutputBuffer`] keeps that split as a count of bytes
//!   ([`ReplySplit`]); the commands whose replies Redis sends that way say
//!   so (`Ctx::defer_reply_len`), and inside MULTI/EXEC or a script the
//!   whole reply of EXEC or EVAL is taken to start the list (in Redis, the
//!   replies before the first such one fill the buffer first).
//!   Where keylock is approximate: Redis counts its list's allocations
//!   (blocks of at least 16 KB, rounded up by jemalloc, a 16 KB block
//!   counting 20,464 bytes, plus 40 bytes a block) where keylock counts
//!   bytes, so a limit closes a client on up to about a fifth fewer bytes
//!   (and one block) in Redis. The reply buffer's size is Redis's for the
//!   same client ([`ReplyBuffer`]): 16 KB at first, shrunk by the cron
//!   while replies leave it mostly empty, grown back when they fill it.
//! - the hard limit closes a client as soon as it is reached; the soft
//!   limit once it has been reached continuously for more than its seconds
//!   (whole seconds of the server clock, as Redis's `server.unixtime`; the
//!   time it was first reached is forgotten only by a check that finds the
//!   client below it). Nothing is checked while the reply list is empty,
//!   as in Redis.
//! - a client found over its limits while output is queued is scheduled to
//!   close ([`Outbox::close_now`]): what it was owed is dropped at once and
//!   nothing more is queued for it (Redis's `freeClientAsync`, with its log
//!   line `… scheduled to be closed ASAP …`); the cron closes it with
//!   `… closed for overcoming …`.
//!
//! A command whose reply the data does not bound (HRANDFIELD, SRANDMEMBER
//! and ZRANDMEMBER with a negative count) or that Redis stops once its
//! client is closing (KEYS) builds its reply through a [`ReplyGauge`]:
//! Redis checks `CLIENT_CLOSE_ASAP` in those loops and stops adding to a
//! reply that will never be sent. The gauge knows how many more bytes the
//! client may be owed before its limits close it; the command stops
//! adding elements once they would reach that, and the engine then closes
//! the client as the limit does (its log line, no reply). Elsewhere the
//! replies are unchanged: the gauge only ever shortens a reply that is
//! dropped.
//!
//! The outbox also carries the size of the connection's read buffer, as
//! the connection last reported it, for CLIENT LIST (`qbuf`, `qbuf-free`).
//!
//! The output is one buffer until it holds [`CHUNK`] bytes, then further
//! buffers of that size after it ([`OutputBuffer`], Redis's reply list), so
//! that a backlog grows without reallocating and copying what is already
//! queued, and is freed a chunk at a time as it is written. With one
//! growing buffer, a subscriber closed at 32 MB had made the server's RSS
//! peak at 80 MB (the doubled buffer, and the one it replaced, not yet
//! purged); with chunks, at 55-60 MB (Redis: 46 MB).

use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use tokio::sync::Notify;

use crate::memory::allocation_size;
use crate::reply::Reply;

/// The reply buffer a client starts with, and the most the cron grows it
/// to (Redis's PROTO_REPLY_CHUNK_BYTES): output placed in it is not what
/// `client-output-buffer-limit` counts.
pub const REPLY_BUFFER: usize = 16 * 1024;
/// The least the cron shrinks a reply buffer to (PROTO_REPLY_MIN_BYTES).
pub const REPLY_BUFFER_SHRUNK: usize = 1024;
/// How often a reply buffer's peak starts over, in milliseconds
/// (REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME).
pub const REPLY_BUFFER_PEAK_RESET_MS: u64 = 5000;

/// A client's reply buffer as Redis 7.0 sizes it (its dynamic reply
/// buffer, CLIENT LIST's `rbs` and `rbp`): it starts at [`REPLY_BUFFER`]
/// bytes, and the cron ([`OutputBuffer::resize_reply_buffer`]) halves it
/// and more, down to [`REPLY_BUFFER_SHRUNK`], while the replies it held
/// (its peak) used less than half of it, and doubles it back when they
/// filled it. The peak starts over from what the buffer holds every
/// `peak-reset-time` (DEBUG REPLYBUFFER). keylock allocates the buffer
/// only as replies need it, but keeps it once written only while it is no
/// larger than this size: a large reply's memory goes back once it is
/// written, as Redis's reply list's does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyBuffer {
    /// Its size (Redis's `buf_usable_size`, jemalloc's size for it).
    pub size: usize,
    /// The most it held since the peak last started over (`buf_peak`).
    pub peak: usize,
    /// When the peak last started over, in milliseconds of the server
    /// clock (0: never, so the cron's first visit starts it over, as
    /// Redis's does).
    peak_reset_ms: u64,
}

impl Default for ReplyBuffer {
    fn default() -> Self {
        ReplyBuffer {
            size: REPLY_BUFFER,
            peak: REPLY_BUFFER,
            peak_reset_ms: 0,
        }
    }
}

/// What the cron did to a reply buffer (INFO's `reply_buffer_shrinks`,
/// `reply_buffer_expands`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resized {
    Shrunk,
    Expanded,
}

/// The size from which output goes on in a new buffer.
pub const CHUNK: usize = 1 << 20;

/// Output waiting for the socket, oldest first: one buffer, and more of
/// [`CHUNK`] bytes after it once it holds that much (see the module doc).
#[derive(Debug, Default)]
pub struct OutputBuffer {
    chunks: VecDeque<BytesMut>,
    /// Bytes in every chunk but the last.
    sealed: usize,
    /// Output held back by a DELAY fault (KEYLOCK FAULT).
    hold: Option<Hold>,
    /// Where Redis would hold the bytes placed so far.
    split: ReplySplit,
    /// Bytes written out since the buffer was last reset.
    sent: u64,
    /// Output waiting for the disk (`appendfsync always`, see
    /// [`super::durable`]), oldest first: the bytes queued before `end`
    /// (counted as `sent` counts) wait until the append-only file is
    /// synced to `upto` recorded bytes.
    disk_waits: VecDeque<DiskWait>,
    /// The bytes before this may go (the end of the last wait that ended).
    released: u64,
    /// Redis's reply buffer's size and peak (kept when the rest resets).
    reply_buffer: ReplyBuffer,
}

#[derive(Clone, Copy, Debug)]
struct DiskWait {
    end: u64,
    upto: u64,
}

/// Only the first `writable` bytes may be written before `until`.
#[derive(Clone, Copy, Debug)]
struct Hold {
    writable: usize,
    until: Instant,
}

/// Where Redis holds a client's unwritten output: its reply buffer, then
/// its reply list (see the module doc). Bytes appended and not yet placed
/// ([`OutputBuffer::place`]) count as one reply that the buffer may take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplySplit {
    /// Bytes put in the reply buffer since it was last written out in
    /// full (Redis's `bufpos`, CLIENT LIST's `obl`).
    pub buffer_fill: usize,
    /// Of the unwritten bytes, those in the reply buffer (the oldest).
    pub in_buffer: usize,
    /// Of the unwritten bytes, those in the reply list (after them).
    pub in_list: usize,
}

impl ReplySplit {
    /// The split once `bytes` more are added as one reply to a reply
    /// buffer of `size` bytes; `list_only` for a reply whose length is
    /// sent last.
    fn with(self, size: usize, bytes: usize, list_only: bool) -> ReplySplit {
        let room = if list_only || self.in_list > 0 {
            0
        } else {
            size.saturating_sub(self.buffer_fill)
        };
        let to_buffer = bytes.min(room);
        ReplySplit {
            buffer_fill: self.buffer_fill + to_buffer,
            in_buffer: self.in_buffer + to_buffer,
            in_list: self.in_list + bytes - to_buffer,
        }
    }

    /// The split once the oldest `n` bytes are written.
    fn written(self, n: usize) -> ReplySplit {
        let from_buffer = n.min(self.in_buffer);
        let in_buffer = self.in_buffer - from_buffer;
        ReplySplit {
            // The buffer takes replies from its start again once emptied.
            buffer_fill: if in_buffer == 0 { 0 } else { self.buffer_fill },
            in_buffer,
            in_list: self.in_list.saturating_sub(n - from_buffer),
        }
    }
}

impl OutputBuffer {
    pub fn len(&self) -> usize {
        self.sealed + self.chunks.back().map_or(0, BytesMut::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes appended since the last [`place`](Self::place).
    fn unplaced(&self) -> usize {
        self.len() - self.split.in_buffer - self.split.in_list
    }

    /// Places what was appended since the last call as one reply, in
    /// Redis's reply buffer as far as it has room unless `list_only` (a
    /// reply whose length is sent last), the rest in its reply list.
    pub fn place(&mut self, list_only: bool) {
        self.split = self.split.with(self.reply_buffer.size, self.unplaced(), list_only);
        self.note_peak();
    }

    /// Redis's `buf_peak` follows what its reply buffer holds.
    fn note_peak(&mut self) {
        let fill = self.split().buffer_fill;
        let rb = &mut self.reply_buffer;
        rb.peak = rb.peak.max(fill);
    }

    /// The reply buffer's size and peak.
    pub fn reply_buffer(&self) -> ReplyBuffer {
        self.reply_buffer
    }

    /// The cron's visit (Redis's `clientsCronResizeOutputBuffer`): the
    /// reply buffer shrinks to its peak (at least [`REPLY_BUFFER_SHRUNK`])
    /// when that is less than half its size, or doubles (up to
    /// [`REPLY_BUFFER`]) when the peak filled it; then, every `reset_ms`
    /// (None: never), the peak starts over from what the buffer holds.
    pub fn resize_reply_buffer(&mut self, now_ms: u64, reset_ms: Option<u64>) -> Option<Resized> {
        // Pushes not written yet were never placed: they count now.
        self.note_peak();
        let fill = self.split().buffer_fill;
        let rb = &mut self.reply_buffer;
        let mut resized = None;
        if rb.size / 2 >= REPLY_BUFFER_SHRUNK && rb.peak < rb.size / 2 {
            rb.size = allocation_size(REPLY_BUFFER_SHRUNK.max(rb.peak + 1));
            resized = Some(Resized::Shrunk);
        } else if rb.size * 2 < REPLY_BUFFER * 2 && rb.peak == rb.size {
            rb.size = allocation_size(REPLY_BUFFER.min(rb.size * 2));
            resized = Some(Resized::Expanded);
        }
        if let Some(reset) = reset_ms
            && now_ms.saturating_sub(rb.peak_reset_ms) >= reset
        {
            rb.peak = fill;
            rb.peak_reset_ms = now_ms;
        }
        // Redis reallocates the buffer at its new size: a kept one larger
        // than that goes now if it holds nothing.
        let size = rb.size;
        if self.is_empty() && self.chunks.front().is_some_and(|c| c.capacity() > size) {
            self.chunks.clear();
        }
        resized
    }

    /// Where Redis would hold the unwritten output, what was appended and
    /// not yet placed counting as one reply.
    pub fn split(&self) -> ReplySplit {
        self.split.with(self.reply_buffer.size, self.unplaced(), false)
    }

    /// How many of the chunks hold reply-list bytes (CLIENT LIST's `oll`:
    /// keylock's entries, of up to [`CHUNK`] bytes, not Redis's 16 KB blocks).
    pub fn list_chunks(&self) -> usize {
        let mut left = self.split().in_list;
        let mut chunks = 0;
        for c in self.chunks.iter().rev() {
            if left == 0 {
                break;
            }
            chunks += 1;
            left = left.saturating_sub(c.len());
        }
        chunks
    }

    /// The memory the output holds (every chunk's capacity).
    pub fn allocated(&self) -> usize {
        self.chunks.iter().map(BytesMut::capacity).sum()
    }

    /// The buffer to append to (encoders write here): the last one, or a
    /// new one if that already holds a chunk's worth.
    pub fn tail(&mut self) -> &mut BytesMut {
        self.tail_for(0)
    }

    fn tail_for(&mut self, additional: usize) -> &mut BytesMut {
        let len = self.chunks.back().map(BytesMut::len);
        match len {
            None => self.chunks.push_back(BytesMut::new()),
            Some(len) if len > 0 && len + additional > CHUNK => {
                self.sealed += len;
                self.chunks.push_back(BytesMut::with_capacity(CHUNK.max(additional)));
            }
            Some(_) => {}
        }
        self.chunks.back_mut().expect("a tail chunk")
    }

    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.tail_for(data.len()).extend_from_slice(data);
    }

    /// The oldest unwritten bytes that may be written now (empty if none,
    /// or if the rest is held back).
    pub fn front(&self) -> &[u8] {
        let front = self.chunks.front().map_or(&[][..], |c| &c[..]);
        let mut writable = match self.hold {
            Some(hold) => front.len().min(hold.writable),
            None => front.len(),
        };
        if !self.disk_waits.is_empty() {
            writable = writable.min(self.released.saturating_sub(self.sent) as usize);
        }
        &front[..writable]
    }

    /// Output waits for the disk (see [`super::durable`]): the waits that
    /// the file's syncs have ended go, and what was queued since the last
    /// wait waits for everything the effect stream has recorded so far,
    /// if that is not on disk yet. Returns what the oldest wait left waits
    /// for (nothing may be written past it before then).
    pub fn gate(&mut self, durability: &super::durable::Durability) -> Option<u64> {
        while let Some(wait) = self.disk_waits.front() {
            if !durability.is_synced(wait.upto) {
                break;
            }
            self.released = wait.end;
            self.disk_waits.pop_front();
        }
        let queued_end = self.sent + self.len() as u64;
        let waited_end = self.disk_waits.back().map_or(self.sent, |w| w.end);
        if queued_end > waited_end
            && let Some(upto) = durability.needed()
        {
            if self.disk_waits.is_empty() {
                // What is queued before this may go.
                self.released = self.sent;
            }
            self.disk_waits.push_back(DiskWait { end: queued_end, upto });
        }
        self.disk_waits.front().map(|w| w.upto)
    }

    /// Holds back everything queued from now on until `until` (a DELAY
    /// fault on the reply about to be queued); what is queued already may
    /// still be written. Holds that overlap end at the later instant.
    pub fn hold(&mut self, until: Instant) {
        let queued = self.len();
        self.hold = Some(match self.hold {
            Some(h) => Hold {
                writable: h.writable.min(queued),
                until: h.until.max(until),
            },
            None => Hold { writable: queued, until },
        });
    }

    /// When output is held back and nothing before the hold is left to
    /// write: the instant the rest may go. Ends a hold that is due.
    pub fn held_until(&mut self) -> Option<Instant> {
        self.held_until_at(Instant::now())
    }

    fn held_until_at(&mut self, now: Instant) -> Option<Instant> {
        let hold = self.hold?;
        if now >= hold.until {
            self.hold = None;
            return None;
        }
        (hold.writable == 0).then_some(hold.until)
    }

    /// `n` bytes of [`front`](Self::front) were written: a chunk written
    /// in full is freed, unless it is the only one.
    pub fn advance(&mut self, n: usize) {
        if let Some(hold) = self.hold.as_mut() {
            hold.writable -= n;
        }
        self.sent += n as u64;
        self.note_peak();
        self.split = self.split().written(n);
        let several = self.chunks.len() > 1;
        let Some(front) = self.chunks.front_mut() else { return };
        front.advance(n);
        if several {
            self.sealed -= n;
            if front.is_empty() {
                self.chunks.pop_front();
            }
        }
    }

    /// Everything was written: keeps the buffer for the next replies
    /// unless it grew larger than the reply buffer (see [`ReplyBuffer`]).
    pub fn written(&mut self) {
        let size = self.reply_buffer.size;
        let keep = match self.chunks.len() {
            0 => return,
            1 => {
                let front = &mut self.chunks[0];
                front.clear();
                // The written bytes were consumed from the allocation's
                // front: reclaiming them (no copy, the buffer is empty)
                // shows its whole size.
                let _ = front.try_reclaim(front.capacity() + 1);
                front.capacity() <= size
            }
            _ => false,
        };
        if keep {
            self.split = ReplySplit::default();
        } else {
            self.clear();
        }
    }

    /// Drops the output (its memory goes back at once); the reply
    /// buffer's size and peak stay.
    pub fn clear(&mut self) {
        let reply_buffer = self.reply_buffer;
        *self = OutputBuffer {
            reply_buffer,
            ..OutputBuffer::default()
        };
    }

    /// Exchanges the output with `out` (for callers with no connection):
    /// what was queued ends in `out` as one buffer.
    pub fn swap(&mut self, out: &mut BytesMut) {
        if self.chunks.len() > 1 {
            let mut all = BytesMut::with_capacity(self.len());
            for c in self.chunks.drain(..) {
                all.extend_from_slice(&c);
            }
            self.chunks.push_back(all);
        }
        self.sealed = 0;
        // One buffer changes hands: no allocation (an embedding caller
        // swaps twice per batch).
        match self.chunks.back_mut() {
            Some(only) => std::mem::swap(only, out),
            None if out.capacity() > 0 => self.chunks.push_back(std::mem::take(out)),
            None => {}
        }
        // What comes back is placed afresh, as one reply.
        self.split = ReplySplit::default();
        self.hold = None;
    }
}

/// The classes of `client-output-buffer-limit` (Redis's client types).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientClass {
    #[default]
    Normal,
    Replica,
    Pubsub,
}

/// One class of `client-output-buffer-limit` (0: no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimit {
    pub hard: usize,
    pub soft: usize,
    pub soft_seconds: u64,
}

/// `client-output-buffer-limit`, every class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: OutputLimit,
    pub replica: OutputLimit,
    pub pubsub: OutputLimit,
}

impl OutputLimits {
    /// The limits in the parameter's text as CONFIG GET shows it
    /// (`normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60`).
    pub fn parse(param: &str) -> OutputLimits {
        let mut limits = OutputLimits::default();
        let words: Vec<&str> = param.split(' ').collect();
        for group in words.chunks(4) {
            if let [name, hard, soft, seconds] = group {
                let limit = OutputLimit {
                    hard: hard.parse().unwrap_or(0),
                    soft: soft.parse().unwrap_or(0),
                    soft_seconds: seconds.parse().unwrap_or(0),
                };
                match *name {
                    "normal" => limits.normal = limit,
                    "slave" => limits.replica = limit,
                    "pubsub" => limits.pubsub = limit,
                    _ => {}
                }
            }
        }
        limits
    }

    pub fn of(&self, class: ClientClass) -> OutputLimit {
        match class {
            ClientClass::Normal => self.normal,
            ClientClass::Replica => self.replica,
            ClientClass::Pubsub => self.pubsub,
        }
    }

    /// Redis's `checkClientOutputBufferLimits` for an authenticated client
    /// of `class` with `obuf` bytes beyond its reply buffer, at `now_secs`:
    /// true if the hard limit is reached, or the soft limit has been for
    /// more than its seconds. `soft_since` keeps when the soft limit was
    /// first reached.
    pub fn reached(&self, class: ClientClass, obuf: usize, soft_since: &Cell<Option<u64>>, now_secs: u64) -> bool {
        let limit = self.of(class);
        let hard = limit.hard > 0 && obuf >= limit.hard;
        let mut soft = limit.soft > 0 && obuf >= limit.soft;
        if soft {
            match soft_since.get() {
                None => {
                    soft_since.set(Some(now_secs));
                    soft = false;
                }
                Some(since) => soft = now_secs.saturating_sub(since) > limit.soft_seconds,
            }
        } else {
            soft_since.set(None);
        }
        hard || soft
    }
}

impl OutputLimits {
    /// The reply-list size at which a check now would close a client of
    /// `class` (None: no limit would): the hard limit, and the soft limit
    /// once it has held for more than its seconds.
    pub fn closing_at(&self, class: ClientClass, soft_since: Option<u64>, now_secs: u64) -> Option<usize> {
        let limit = self.of(class);
        let hard = (limit.hard > 0).then_some(limit.hard);
        let soft_expired = soft_since.is_some_and(|since| now_secs.saturating_sub(since) > limit.soft_seconds);
        let soft = (limit.soft > 0 && soft_expired).then_some(limit.soft);
        match (hard, soft) {
            (Some(h), Some(s)) => Some(h.min(s)),
            (h, s) => h.or(s),
        }
    }
}

/// Measures a reply as a command builds it, against the room its client
/// has before its output limits close it (see the module doc).
#[derive(Debug)]
pub struct ReplyGauge {
    /// The client's outbox, marked when the reply is cut short.
    outbox: Outbox,
    /// Bytes of reply the client may be owed before its limits close it;
    /// None where no limit applies.
    room: Option<usize>,
    used: usize,
    resp: u8,
}

impl ReplyGauge {
    /// A gauge for a reply to a client with `room` bytes before its limits
    /// close it (None: no limit), encoded for protocol `resp`.
    pub fn new(outbox: Outbox, room: Option<usize>, resp: u8) -> ReplyGauge {
        ReplyGauge {
            outbox,
            room,
            used: 0,
            resp,
        }
    }

    /// True where no output limit can stop the reply.
    pub fn unlimited(&self) -> bool {
        self.room.is_none()
    }

    /// Counts `item` into the reply. False once the reply has reached the
    /// client's limits with it: the command adds `item` and no more, and
    /// the client is closed as the limit closes it, without its reply.
    pub fn admit(&mut self, item: &Reply) -> bool {
        let Some(room) = self.room else { return true };
        self.used += item.encoded_len(self.resp);
        if self.used >= room {
            self.outbox.cut_at_limit();
            return false;
        }
        true
    }
}

/// Whether a connection is to close, as the engine asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseRequest {
    Open,
    /// Write what is owed, then close (CLIENT KILL, timeout, shutdown).
    AfterWrite,
    /// Close without writing: over its output limits. What it was owed has
    /// been dropped already.
    Now,
}

/// The sending side of a connection: its unwritten output and how the
/// engine wakes the connection's task. Cloning shares it.
#[derive(Clone, Debug)]
pub struct Outbox {
    inner: Rc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Replies and pushes the socket has not taken yet, front first.
    buffer: RefCell<OutputBuffer>,
    wake: Notify,
    close: Cell<CloseRequest>,
    /// The server second at which the soft output limit was first reached.
    soft_since: Cell<Option<u64>>,
    /// The client's class, as of its last command.
    class: Cell<ClientClass>,
    /// A reply was cut short at the client's output limits (see
    /// [`ReplyGauge`]): the client is over them.
    cut: Cell<bool>,
    /// The connection's read buffer as last reported: bytes in it, and
    /// free room.
    query_buffer: Cell<(usize, usize)>,
    /// The arguments parsed so far of a request not complete yet: how
    /// many, and their bytes.
    partial_request: Cell<(usize, usize)>,
    /// Blocked by a blocking command: until when (None inside: no
    /// timeout). Its connection runs nothing meanwhile.
    blocked: Cell<Option<Option<Instant>>>,
    /// The connection's socket belongs to a forked debugging session now.
    handed_over: Cell<bool>,
    /// The connection's socket while its task has it open, and the
    /// process it was opened in: a connection closed from outside its
    /// task is shut down at once (never from a forked child, with which
    /// the socket is shared).
    socket: Cell<Option<(std::os::fd::RawFd, u32)>>,
}

impl Default for Outbox {
    fn default() -> Outbox {
        Outbox::new()
    }
}

impl Outbox {
    pub fn new() -> Outbox {
        Outbox {
            inner: Rc::new(Inner {
                // Allocated when first written: an idle connection holds none.
                buffer: RefCell::new(OutputBuffer::default()),
                wake: Notify::new(),
                close: Cell::new(CloseRequest::Open),
                soft_since: Cell::new(None),
                class: Cell::new(ClientClass::Normal),
                cut: Cell::new(false),
                query_buffer: Cell::new((0, 0)),
                partial_request: Cell::new((0, 0)),
                blocked: Cell::new(None),
                handed_over: Cell::new(false),
                socket: Cell::new(None),
            }),
        }
    }

    /// The unwritten output. Borrows are never held across an engine call
    /// or an `.await`.
    pub fn buffer(&self) -> &RefCell<OutputBuffer> {
        &self.inner.buffer
    }

    /// Bytes owed to the client and not yet written.
    pub fn unwritten(&self) -> usize {
        self.inner.buffer.borrow().len()
    }

    /// Unwritten bytes in Redis's reply list, not its reply buffer: what
    /// the output limits count, and CLIENT LIST's `omem`.
    pub fn obuf_bytes(&self) -> usize {
        self.inner.buffer.borrow().split().in_list
    }

    /// Where Redis would hold the unwritten output.
    pub fn split(&self) -> ReplySplit {
        self.inner.buffer.borrow().split()
    }

    /// The size of the client's reply buffer (CLIENT LIST's `rbs`).
    pub fn reply_buffer_size(&self) -> usize {
        self.inner.buffer.borrow().reply_buffer.size
    }

    /// The bytes of reply the client may still be sent before an output
    /// limit reached at `limit_at` bytes of reply list closes it; the
    /// reply buffer's room counts unless the reply's length is sent last
    /// (`list_only`).
    pub fn room_before(&self, limit_at: usize, list_only: bool) -> usize {
        let buffer = self.inner.buffer.borrow();
        let split = buffer.split();
        let buffer_room = if list_only || split.in_list > 0 {
            0
        } else {
            buffer.reply_buffer.size.saturating_sub(split.buffer_fill)
        };
        limit_at.saturating_sub(split.in_list).saturating_add(buffer_room)
    }

    /// A reply was cut short at the output limits: the client is to close.
    pub fn cut_at_limit(&self) {
        self.inner.cut.set(true);
    }

    pub fn was_cut(&self) -> bool {
        self.inner.cut.get()
    }

    /// The connection reports its read buffer: `len` bytes not yet
    /// parsed, `free` bytes of room after them.
    pub fn report_query_buffer(&self, len: usize, free: usize) {
        self.inner.query_buffer.set((len, free));
    }

    /// The connection reports the arguments it has parsed of a request
    /// not complete yet: how many, and their bytes.
    pub fn report_partial_request(&self, count: usize, bytes: usize) {
        self.inner.partial_request.set((count, bytes));
    }

    /// The partial request as last reported: (arguments, bytes).
    pub fn partial_request(&self) -> (usize, usize) {
        self.inner.partial_request.get()
    }

    /// The read buffer as last reported: (bytes in it, free room).
    pub fn query_buffer(&self) -> (usize, usize) {
        self.inner.query_buffer.get()
    }

    /// Queues a push (a pub/sub message, a MONITOR line) and wakes the
    /// connection; nothing is queued for a client that is closing.
    pub fn push(&self, data: &[u8]) {
        if self.inner.close.get() != CloseRequest::Open {
            return;
        }
        self.inner.buffer.borrow_mut().extend_from_slice(data);
        self.inner.wake.notify_one();
    }

    /// The output buffer for appending replies, unless the client is closing.
    pub fn writable(&self) -> Option<RefMut<'_, OutputBuffer>> {
        match self.inner.close.get() {
            CloseRequest::Open => Some(self.inner.buffer.borrow_mut()),
            _ => None,
        }
    }

    /// Closes the connection once what it is owed is written.
    pub fn close(&self) {
        if self.inner.close.get() == CloseRequest::Open {
            self.inner.close.set(CloseRequest::AfterWrite);
        }
        self.inner.wake.notify_one();
    }

    /// Closes the connection without writing what it is owed, which is
    /// dropped now (its memory goes back at once).
    ///
    /// The socket is shut down here, not when the connection's task next
    /// runs: whoever closed it (CLIENT KILL, a master dropping a replica)
    /// gets its reply after the peer saw the connection end, as Redis's
    /// `freeClient` closes it before the reply is written.
    pub fn close_now(&self) {
        self.inner.close.set(CloseRequest::Now);
        self.inner.buffer.borrow_mut().clear();
        let open = self
            .inner
            .socket
            .take()
            .filter(|&(_, pid)| !self.inner.handed_over.get() && pid == std::process::id());
        if let Some((fd, _)) = open {
            // SAFETY: the descriptor is open: its task detaches it before
            // closing it, on this thread. Shutting down a socket needs no
            // ownership of its descriptor.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
        self.inner.wake.notify_one();
    }

    /// The connection's task has its socket `fd` open from now on (see
    /// [`Outbox::close_now`]).
    pub fn attach_socket(&self, fd: std::os::fd::RawFd) {
        self.inner.socket.set(Some((fd, std::process::id())));
    }

    /// The connection's task is about to close its socket.
    pub fn detach_socket(&self) {
        self.inner.socket.set(None);
    }

    /// Closes the connection here for good, its output dropped, while the
    /// socket lives on in the process of a forked Lua debugging session
    /// (SCRIPT DEBUG YES), which answers the client from now on: the
    /// connection's task closes its descriptor without shutting the socket
    /// down.
    pub fn hand_over(&self) {
        self.inner.handed_over.set(true);
        self.close_now();
    }

    pub fn handed_over(&self) -> bool {
        self.inner.handed_over.get()
    }

    pub fn close_request(&self) -> CloseRequest {
        self.inner.close.get()
    }

    /// Whether the client is blocked, and until when (see
    /// `engine::blocking`).
    pub fn blocked(&self) -> Option<Option<Instant>> {
        self.inner.blocked.get()
    }

    pub fn set_blocked(&self, blocked: Option<Option<Instant>>) {
        self.inner.blocked.set(blocked);
    }

    /// Wakes the connection's task to write its output and run what input
    /// it holds.
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// Resolves once the engine queued output, asked for a close, or woke
    /// the connection since the last time this resolved.
    pub async fn woken(&self) {
        self.inner.wake.notified().await
    }

    /// When the soft output limit was first reached, for [`OutputLimits::reached`].
    pub fn soft_since(&self) -> &Cell<Option<u64>> {
        &self.inner.soft_since
    }

    pub fn class(&self) -> ClientClass {
        self.inner.class.get()
    }

    pub fn set_class(&self, class: ClientClass) {
        self.inner.class.set(class);
    }
}

/// Redis's `client_recent_max_output_buffer`: the largest output beyond
/// the reply buffer any client had, sampled by the cron, over the last
/// seconds (one slot per second of eight, the next one cleared as time
/// moves on).
#[derive(Debug, Default)]
pub struct RecentPeaks {
    slots: [usize; 8],
}

impl RecentPeaks {
    /// Starts a cron pass at `now_secs`: the slot after this second's is cleared.
    pub fn begin(&mut self, now_secs: u64) -> usize {
        let slot = (now_secs % 8) as usize;
        self.slots[(slot + 1) % 8] = 0;
        slot
    }

    pub fn sample(&mut self, slot: usize, obuf: usize) {
        self.slots[slot] = self.slots[slot].max(obuf);
    }

    pub fn max(&self) -> usize {
        self.slots.iter().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_now_shuts_an_attached_socket_down_at_once_unless_detached_or_handed_over() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let read_now = |peer: &mut std::os::unix::net::UnixStream| {
            peer.set_nonblocking(true).unwrap();
            let mut byte = [0u8; 1];
            peer.read(&mut byte).map_err(|e| e.kind())
        };
        // Attached: the peer sees the end before close_now returns.
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let outbox = Outbox::new();
        outbox.attach_socket(ours.as_raw_fd());
        outbox.close_now();
        assert_eq!(read_now(&mut peer), Ok(0));
        // Detached, or handed over to a debugging session: left alone.
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let outbox = Outbox::new();
        outbox.attach_socket(ours.as_raw_fd());
        outbox.detach_socket();
        outbox.close_now();
        assert_eq!(read_now(&mut peer), Err(std::io::ErrorKind::WouldBlock));
        let outbox = Outbox::new();
        outbox.attach_socket(ours.as_raw_fd());
        outbox.hand_over();
        assert_eq!(read_now(&mut peer), Err(std::io::ErrorKind::WouldBlock));
    }

    const DEFAULT: &str = "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

    #[test]
    fn the_parameter_text_gives_every_class() {
        let limits = OutputLimits::parse(DEFAULT);
        assert_eq!(limits.normal, OutputLimit::default());
        assert_eq!(
            limits.replica,
            OutputLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60
            }
        );
        assert_eq!(
            limits.of(ClientClass::Pubsub),
            OutputLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60
            }
        );
    }

    #[test]
    fn the_hard_limit_is_reached_at_its_byte() {
        let limits = OutputLimits::parse("normal 1000 0 0 slave 0 0 0 pubsub 0 0 0");
        let since = Cell::new(None);
        assert!(!limits.reached(ClientClass::Normal, 999, &since, 0));
        assert!(limits.reached(ClientClass::Normal, 1000, &since, 0));
        assert!(!limits.reached(ClientClass::Pubsub, 1 << 30, &since, 0));
    }

    #[test]
    fn the_soft_limit_fires_once_held_for_more_than_its_seconds() {
        let limits = OutputLimits::parse("normal 0 0 0 slave 0 0 0 pubsub 0 100 2");
        let since = Cell::new(None);
        assert!(!limits.reached(ClientClass::Pubsub, 100, &since, 10));
        assert_eq!(since.get(), Some(10));
        assert!(!limits.reached(ClientClass::Pubsub, 100, &since, 12));
        assert!(limits.reached(ClientClass::Pubsub, 100, &since, 13));
        // A check below the limit forgets when it was reached.
        assert!(!limits.reached(ClientClass::Pubsub, 99, &since, 13));
        assert_eq!(since.get(), None);
    }

    #[test]
    fn a_closing_outbox_drops_its_output_and_takes_no_more() {
        let outbox = Outbox::new();
        outbox.push(&[b'x'; REPLY_BUFFER + 10]);
        assert_eq!(outbox.obuf_bytes(), 10);
        outbox.close_now();
        assert_eq!(outbox.unwritten(), 0);
        outbox.push(b"more");
        assert_eq!(outbox.unwritten(), 0);
        assert!(outbox.writable().is_none());
    }

    fn placed(out: &mut OutputBuffer, bytes: usize, list_only: bool) -> ReplySplit {
        out.extend_from_slice(&vec![b'r'; bytes]);
        out.place(list_only);
        out.split()
    }

    #[test]
    fn a_reply_fills_the_reply_buffer_and_the_rest_goes_to_the_list() {
        let mut out = OutputBuffer::default();
        let split = placed(&mut out, 10_000, false);
        assert_eq!((split.buffer_fill, split.in_buffer, split.in_list), (10_000, 10_000, 0));
        let split = placed(&mut out, 10_000, false);
        assert_eq!((split.in_buffer, split.in_list), (REPLY_BUFFER, 20_000 - REPLY_BUFFER));
        // Nothing goes to the buffer while the list holds anything.
        out.advance(REPLY_BUFFER);
        assert_eq!(out.split().buffer_fill, 0);
        let split = placed(&mut out, 10, false);
        assert_eq!((split.in_buffer, split.in_list), (0, 20_000 - REPLY_BUFFER + 10));
    }

    #[test]
    fn a_reply_whose_length_is_sent_last_goes_to_the_list_whole() {
        let mut out = OutputBuffer::default();
        placed(&mut out, 5, false);
        let split = placed(&mut out, 110_000, true);
        assert_eq!((split.in_buffer, split.in_list), (5, 110_000));
        // Bytes not yet placed count as one reply the buffer may take.
        let mut pushes = OutputBuffer::default();
        pushes.extend_from_slice(&[b'm'; 20_000]);
        assert_eq!(pushes.split().in_list, 20_000 - REPLY_BUFFER);
    }

    #[test]
    fn the_reply_buffer_takes_replies_again_once_written_out() {
        let mut out = OutputBuffer::default();
        placed(&mut out, REPLY_BUFFER - 100, false);
        out.advance(REPLY_BUFFER - 200);
        // Redis's buffer has room only after its end until it is emptied.
        assert_eq!(placed(&mut out, 150, false).in_list, 50);
        out.advance(200);
        let split = out.split();
        assert_eq!((split.buffer_fill, split.in_buffer, split.in_list), (0, 0, 50));
    }

    #[test]
    fn the_gauge_stops_a_reply_at_the_limit_and_marks_its_client() {
        let outbox = Outbox::new();
        let limits = OutputLimits::parse("normal 1000 0 0 slave 0 0 0 pubsub 0 0 0");
        let at = limits.closing_at(ClientClass::Normal, None, 0).unwrap();
        let mut gauge = ReplyGauge::new(outbox.clone(), Some(outbox.room_before(at, true)), 2);
        let item = Reply::bulk_static("abc"); // 9 bytes
        let admitted = (0..1000).take_while(|_| gauge.admit(&item)).count();
        assert_eq!(admitted, 111);
        assert!(outbox.was_cut());
        // The reply buffer's room counts for a reply that may use it.
        assert_eq!(outbox.room_before(at, false), 1000 + REPLY_BUFFER);
        assert!(ReplyGauge::new(Outbox::new(), None, 2).admit(&item));
    }

    #[test]
    fn a_backlog_goes_on_in_new_chunks_and_is_freed_as_written() {
        let mut out = OutputBuffer::default();
        out.tail().extend_from_slice(b"+OK\r\n");
        assert_eq!(out.chunks.len(), 1);
        let message = vec![b'm'; 300 * 1024];
        for _ in 0..4 {
            out.extend_from_slice(&message);
        }
        // 5 + 3 x 300 KB fit in the first chunk; the fourth starts another.
        assert_eq!(out.chunks.len(), 2);
        assert_eq!(out.len(), 5 + 4 * message.len());
        let first = out.front().len();
        out.advance(first - 1);
        assert_eq!(out.len(), 1 + message.len());
        out.advance(1);
        assert_eq!(out.chunks.len(), 1);
        assert_eq!(out.front().len(), message.len());
        out.advance(message.len());
        assert!(out.is_empty());
        out.written();
        assert!(out.chunks.is_empty());
    }

    #[test]
    fn the_reply_buffer_shrinks_to_its_peak_and_doubles_when_filled() {
        let mut out = OutputBuffer::default();
        // The first visit starts the peak over (from 16 KB, the size).
        assert_eq!(out.resize_reply_buffer(1000, Some(100)), None);
        placed(&mut out, 300, false);
        out.advance(300);
        assert_eq!(out.resize_reply_buffer(1050, Some(100)), Some(Resized::Shrunk));
        assert_eq!(out.reply_buffer().size, REPLY_BUFFER_SHRUNK);
        // A reply larger than the buffer fills it, and the rest is listed.
        let split = placed(&mut out, 5000, false);
        assert_eq!((split.in_buffer, split.in_list), (1024, 5000 - 1024));
        out.advance(5000);
        for size in [2048, 4096, 8192, 16384] {
            placed(&mut out, 20_000, false);
            out.advance(20_000);
            assert_eq!(out.resize_reply_buffer(1060, None), Some(Resized::Expanded));
            assert_eq!(out.reply_buffer().size, size);
        }
        assert_eq!(out.resize_reply_buffer(1070, None), None);
        // A peak of 3000 bytes: jemalloc's size for 3001.
        out.resize_reply_buffer(2000, Some(100));
        placed(&mut out, 3000, false);
        assert_eq!(out.resize_reply_buffer(2001, Some(100)), Some(Resized::Shrunk));
        assert_eq!(out.reply_buffer().size, 3072);
    }

    #[test]
    fn unwritten_pushes_count_in_the_peak_and_a_shrink_frees_a_larger_idle_buffer() {
        let mut out = OutputBuffer::default();
        out.resize_reply_buffer(1000, Some(100));
        out.extend_from_slice(&[b'm'; 5000]);
        assert_eq!(out.resize_reply_buffer(1001, Some(100)), Some(Resized::Shrunk));
        assert_eq!(out.reply_buffer().size, 5120);
        assert_eq!(out.split().in_list, 0);
        out.advance(5000);
        out.written();
        assert_eq!(out.chunks.len(), 1, "kept: no larger than the reply buffer");
        assert!(out.allocated() >= 5000, "the whole allocation shows");
        // Idle, it shrinks to 1 KB, and the kept allocation goes with it.
        out.resize_reply_buffer(1200, Some(100));
        assert_eq!(out.resize_reply_buffer(1300, Some(100)), Some(Resized::Shrunk));
        assert_eq!(out.reply_buffer().size, REPLY_BUFFER_SHRUNK);
        assert!(out.chunks.is_empty());
    }

    #[test]
    fn written_output_keeps_a_buffer_no_larger_than_the_reply_buffer() {
        let mut out = OutputBuffer::default();
        out.extend_from_slice(&[b'x'; 100]);
        out.advance(100);
        out.written();
        assert_eq!(out.chunks.len(), 1, "a small buffer stays for the next replies");
        out.extend_from_slice(&[b'x'; REPLY_BUFFER + 1]);
        out.advance(REPLY_BUFFER + 1);
        out.written();
        assert!(out.chunks.is_empty(), "a larger one goes");
        assert_eq!(out.reply_buffer().size, REPLY_BUFFER, "its size stays");
    }

    #[test]
    fn held_output_waits_behind_what_was_queued_before_the_hold() {
        let mut out = OutputBuffer::default();
        out.extend_from_slice(b"+first\r\n");
        let now = Instant::now();
        out.hold(now + std::time::Duration::from_millis(50));
        out.extend_from_slice(b"+held\r\n");
        assert_eq!(out.held_until_at(now), None, "the bytes before the hold are writable");
        assert_eq!(out.front(), b"+first\r\n");
        out.advance(8);
        assert_eq!(out.front(), b"");
        assert!(!out.is_empty());
        assert_eq!(out.held_until_at(now), Some(now + std::time::Duration::from_millis(50)));
        assert_eq!(out.held_until_at(now + std::time::Duration::from_millis(50)), None);
        assert_eq!(out.front(), b"+held\r\n");
    }

    #[test]
    fn swapping_hands_over_the_output_as_one_buffer() {
        let mut out = OutputBuffer::default();
        out.extend_from_slice(&vec![b'a'; CHUNK]);
        out.extend_from_slice(b"b");
        let mut mine = BytesMut::from(&b"old"[..]);
        out.swap(&mut mine);
        assert_eq!(mine.len(), CHUNK + 1);
        assert_eq!(out.front(), b"old");
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn recent_peaks_cover_eight_seconds() {
        let mut peaks = RecentPeaks::default();
        let slot = peaks.begin(100);
        peaks.sample(slot, 500);
        for s in 101..107 {
            let slot = peaks.begin(s);
            peaks.sample(slot, 1);
        }
        assert_eq!(peaks.max(), 500);
        peaks.begin(107);
        assert_eq!(peaks.max(), 1);
    }
}
