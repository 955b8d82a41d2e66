//! Redisson's fair lock, semaphore, permit-expirable semaphore and
//! count-down latch over real TCP, with real pub/sub wake-ups.
//!
//! Each client here behaves as Redisson 4.7.0 does on the wire: the exact
//! script bodies from `lua/redisson/4.7.0/` by EVALSHA (SCRIPT LOAD on
//! NOSCRIPT, then again), the KEYS and ARGV Redisson sends, "now" taken from
//! the client's clock, and waiting as Redisson waits: SUBSCRIBE to the
//! object's wake-up channel on one pub/sub connection per client, then retry
//! on each message or when the wait the script returned runs out.
//!
//! Channel and key names follow Redisson's `prefixName` / `suffixName`
//! (checked against its sources): fair lock queue `redisson_lock_queue:{n}`,
//! timeouts `redisson_lock_timeout:{n}`, a waiter's own channel
//! `redisson_lock__channel:{n}:<uuid>:<thread>`; semaphores (both kinds)
//! `redisson_sc:{n}`, the permit-expirable semaphore's leases in the zset
//! `{n}:timeout`; the latch `redisson_countdownlatch__channel__{n}`.
//!
//! Every flow runs twice, on a server with native scripts (the default) and
//! on one started with `native-scripts no`, and checks from INFO which path
//! each script took. Timing checks are one-sided and generous, for a loaded
//! two-core machine: "woken by the message" means within a few seconds of
//! it while the fallback wait (a lease, a wait budget) is 30 s or more, and
//! "blocked" is checked over half a second in which progress is impossible
//! unless the server is wrong.

mod common;
use common::*;

use std::io::BufRead;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use keylock::scripting::native::NativeTable;

/// Longest single wait of a client; only a broken server makes one run out.
const WAIT_CAP: Duration = Duration::from_secs(35);
/// A wake-up message must arrive well within this, where the fallback
/// wait is 30 s or more.
const WOKEN_WITHIN: Duration = Duration::from_secs(5);
/// How long a blocked client is watched for (impossible) progress.
const STILL_BLOCKED: Duration = Duration::from_millis(500);
/// Redisson's `nonExpirableTimeout`: the score of a permit without a lease.
const NON_EXPIRABLE: u64 = 922_337_203_685_477;

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Which path the server runs recognized scripts on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    Native,
    Lua,
}

fn server(path: Path) -> ServerHandle {
    match path {
        Path::Native => start(),
        Path::Lua => start_with(|c| c.directives.push(("native-scripts".into(), vec!["no".into()]))),
    }
}

/// A Redisson 4.7.0 script body and its SHA1.
struct Script {
    body: Vec<u8>,
    sha: String,
}

fn script(name: &str) -> Script {
    let body = std::fs::read(format!("{}/lua/redisson/4.7.0/{name}.lua", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let sha = sha1_smol::Sha1::from(&body).digest().to_string();
    Script { body, sha }
}

/// Checks from INFO that each script ran, and on the expected path: with
/// `native-scripts no` all in Lua; otherwise natively when keylock has a
/// native twin for the body, in Lua when it has none.
fn assert_path(s: &ServerHandle, path: Path, scripts: &[&str]) {
    let mut c = Raw::connect(s.addr());
    let info = String::from_utf8_lossy(&c.call(&["INFO", "keylock"])).into_owned();
    let expect = if path == Path::Native {
        "native_scripts:yes"
    } else {
        "native_scripts:no"
    };
    assert!(info.contains(expect), "{info}");
    for name in scripts {
        let sha = script(name).sha;
        let known = NativeTable::get().recognize(&sha).expect("a recognized body");
        let prefix = format!("script_{}:", known.name);
        let line = info
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("{name} never ran: {info}"));
        let count = |what: &str| -> u64 {
            let at = line.find(&format!("{what}=")).unwrap() + what.len() + 1;
            line[at..].split(',').next().unwrap().parse().unwrap()
        };
        let (native, lua) = (count("native"), count("lua"));
        if path == Path::Native && known.native.is_some() {
            assert!(native > 0 && lua == 0, "{line}");
        } else {
            assert!(native == 0 && lua > 0, "{line}");
        }
    }
}

/// The parts of a RESP array of bulk strings and integers.
fn parts(reply: &[u8]) -> Vec<Vec<u8>> {
    let text = reply;
    let mut lines = Vec::new();
    let mut at = 0;
    let line = |at: &mut usize| -> Vec<u8> {
        let end = *at + text[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let l = text[*at..end].to_vec();
        *at = end + 2;
        l
    };
    let head = line(&mut at);
    assert_eq!(head[0], b'*', "{:?}", String::from_utf8_lossy(reply));
    let n: usize = std::str::from_utf8(&head[1..]).unwrap().parse().unwrap();
    for _ in 0..n {
        let h = line(&mut at);
        match h[0] {
            b'$' => {
                let len: usize = std::str::from_utf8(&h[1..]).unwrap().parse().unwrap();
                lines.push(text[at..at + len].to_vec());
                at += len + 2;
            }
            b':' => lines.push(h[1..].to_vec()),
            _ => panic!("{:?}", String::from_utf8_lossy(reply)),
        }
    }
    lines
}

fn int(reply: &[u8]) -> i64 {
    assert_eq!(reply[0], b':', "{:?}", String::from_utf8_lossy(reply));
    std::str::from_utf8(&reply[1..reply.len() - 2]).unwrap().parse().unwrap()
}

fn bulk(reply: &[u8]) -> Option<Vec<u8>> {
    if reply == b"$-1\r\n" {
        return None;
    }
    assert_eq!(reply[0], b'$', "{:?}", String::from_utf8_lossy(reply));
    let start = reply.iter().position(|&b| b == b'\n').unwrap() + 1;
    Some(reply[start..reply.len() - 2].to_vec())
}

/// One connection of a Redisson client's command pool.
struct Redisson {
    conn: Raw,
}

impl Redisson {
    fn connect(addr: SocketAddr) -> Redisson {
        Redisson { conn: Raw::connect(addr) }
    }

    /// EVALSHA; on NOSCRIPT, SCRIPT LOAD on the same connection and again.
    fn evalsha(&mut self, script: &Script, keys: &[&[u8]], args: &[&[u8]]) -> Vec<u8> {
        let numkeys = keys.len().to_string();
        let mut argv: Vec<&[u8]> = vec![b"EVALSHA", script.sha.as_bytes(), numkeys.as_bytes()];
        argv.extend(keys);
        argv.extend(args);
        self.conn.send_cmd(&argv);
        let reply = self.conn.reply();
        if !reply.starts_with(b"-NOSCRIPT") {
            return reply;
        }
        self.conn.send_cmd(&[b"SCRIPT", b"LOAD", &script.body]);
        assert_eq!(self.conn.reply(), format!("$40\r\n{}\r\n", script.sha).into_bytes());
        self.conn.send_cmd(&argv);
        self.conn.reply()
    }

    fn call(&mut self, args: &[&str]) -> Vec<u8> {
        self.conn.call(args)
    }
}

/// A client's pub/sub connection: SUBSCRIBE while waiting, UNSUBSCRIBE
/// after, as Redisson's pub/sub service does.
struct Subscription {
    conn: Raw,
    channel: Option<String>,
    /// Payloads of the messages this client was woken by.
    received: Vec<Vec<u8>>,
}

impl Subscription {
    fn connect(addr: SocketAddr) -> Subscription {
        Subscription {
            conn: Raw::connect(addr),
            channel: None,
            received: Vec::new(),
        }
    }

    fn subscribe(&mut self, channel: &str) {
        assert!(self.channel.is_none());
        self.conn.send_cmd(&[b"SUBSCRIBE", channel.as_bytes()]);
        let confirm = parts(&self.conn.reply());
        assert_eq!(confirm[0], b"subscribe");
        self.channel = Some(channel.to_string());
    }

    /// Unsubscribes, dropping messages that were on their way.
    fn unsubscribe(&mut self) {
        let channel = self.channel.take().expect("subscribed");
        self.conn.send_cmd(&[b"UNSUBSCRIBE", channel.as_bytes()]);
        while parts(&self.conn.reply())[0] != b"unsubscribe" {}
    }

    /// The next message's payload, if one comes within `wait`.
    fn message_within(&mut self, wait: Duration) -> Option<Vec<u8>> {
        let channel = self.channel.clone().expect("subscribed");
        let wait = wait.clamp(Duration::from_millis(1), WAIT_CAP);
        self.conn.reader.get_ref().set_read_timeout(Some(wait)).unwrap();
        let ready = matches!(self.conn.reader.fill_buf(), Ok(buf) if !buf.is_empty());
        self.conn.reader.get_ref().set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        if !ready {
            return None;
        }
        let message = parts(&self.conn.reply());
        assert_eq!(message[0], b"message");
        assert_eq!(message[1], channel.as_bytes());
        self.received.push(message[2].clone());
        Some(message[2].clone())
    }
}

/// Subscribers of `channel`, by PUBSUB NUMSUB.
fn subscribers(addr: SocketAddr, channel: &str) -> i64 {
    let mut c = Raw::connect(addr);
    let reply = parts(&c.call(&["PUBSUB", "NUMSUB", channel]));
    std::str::from_utf8(&reply[1]).unwrap().parse().unwrap()
}

fn wait_for_subscribers(addr: SocketAddr, channel: &str, n: i64) {
    wait_until(30, &format!("{n} subscribers on {channel}"), || subscribers(addr, channel) == n);
}

// ---------------------------------------------------------------------------
// Fair lock
// ---------------------------------------------------------------------------

const FAIR_SCRIPTS: &[&str] = &["fairlock-acquire", "fairlock-unlock"];

/// Redisson's `fairLockWaitTimeout` default: how long a queued thread's
/// place is kept beyond the wait of the one before it.
const THREAD_WAIT_MS: u64 = 300_000;

/// One thread's `RFairLock`.
struct FairLock {
    redisson: Redisson,
    sub: Subscription,
    name: String,
    owner: String,
    lease_ms: u64,
    /// The `wait` ARGV: `threadWaitTime`, or tryLock's wait time.
    wait_ms: u64,
    requests: u64,
    acquire: Script,
    unlock: Script,
    failed: Script,
}

impl FairLock {
    fn new(addr: SocketAddr, name: &str, uuid: &str, thread: u64) -> FairLock {
        FairLock {
            redisson: Redisson::connect(addr),
            sub: Subscription::connect(addr),
            name: name.to_string(),
            owner: format!("{uuid}:{thread}"),
            lease_ms: 30_000,
            wait_ms: THREAD_WAIT_MS,
            requests: 0,
            acquire: script("fairlock-acquire"),
            unlock: script("fairlock-unlock"),
            failed: script("fairlock-acquire-failed"),
        }
    }

    fn queue(&self) -> String {
        format!("redisson_lock_queue:{{{}}}", self.name)
    }

    fn timeouts(&self) -> String {
        format!("redisson_lock_timeout:{{{}}}", self.name)
    }

    fn channel(&self) -> String {
        format!("redisson_lock__channel:{{{}}}", self.name)
    }

    /// The channel the unlock of the thread before this one publishes to.
    fn own_channel(&self) -> String {
        format!("{}:{}", self.channel(), self.owner)
    }

    /// None when acquired, else how long to wait before asking again.
    fn try_acquire(&mut self) -> Option<i64> {
        let (lease, wait, now) = (self.lease_ms.to_string(), self.wait_ms.to_string(), now_ms().to_string());
        let (queue, timeouts) = (self.queue(), self.timeouts());
        let reply = self.redisson.evalsha(
            &self.acquire,
            &[self.name.as_bytes(), queue.as_bytes(), timeouts.as_bytes()],
            &[lease.as_bytes(), self.owner.as_bytes(), wait.as_bytes(), now.as_bytes()],
        );
        if reply == b"$-1\r\n" { None } else { Some(int(&reply)) }
    }

    /// The rest of `lock()` after a first refused `try_acquire` that
    /// returned `ttl`: subscribed to its own channel, retry on each message
    /// or when the wait runs out; unsubscribe once it holds the lock.
    fn wait_for_turn(&mut self, mut ttl: i64) {
        let channel = self.own_channel();
        if self.sub.channel.is_none() {
            self.sub.subscribe(&channel);
        }
        loop {
            self.sub.message_within(Duration::from_millis(ttl.max(0) as u64));
            match self.try_acquire() {
                None => break,
                Some(t) => ttl = t,
            }
        }
        self.sub.unsubscribe();
    }

    /// `tryLock(waitTime)` after a first refused `try_acquire`: false, with
    /// the thread taken out of the queue by `fairlock-acquire-failed`, when
    /// the wait runs out first.
    fn try_wait_for_turn(&mut self, mut ttl: i64, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let channel = self.own_channel();
        self.sub.subscribe(&channel);
        let acquired = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            self.sub.message_within(left.min(Duration::from_millis(ttl.max(0) as u64)));
            match self.try_acquire() {
                None => break true,
                Some(t) => ttl = t,
            }
        };
        self.sub.unsubscribe();
        if !acquired {
            let (queue, timeouts, wait) = (self.queue(), self.timeouts(), self.wait_ms.to_string());
            let reply = self.redisson.evalsha(
                &self.failed,
                &[queue.as_bytes(), timeouts.as_bytes()],
                &[self.owner.as_bytes(), wait.as_bytes()],
            );
            assert_eq!(reply, b"$-1\r\n");
        }
        acquired
    }

    /// `unlock()`: 1 released (and the next in line told), 0 still held.
    fn unlock(&mut self) -> i64 {
        self.requests += 1;
        let latch = format!("redisson_unlock_latch:{{{}}}:{}-{}", self.name, self.owner, self.requests);
        let (lease, now) = (self.lease_ms.to_string(), now_ms().to_string());
        let (queue, timeouts, channel) = (self.queue(), self.timeouts(), self.channel());
        let reply = self.redisson.evalsha(
            &self.unlock,
            &[
                self.name.as_bytes(),
                queue.as_bytes(),
                timeouts.as_bytes(),
                channel.as_bytes(),
                latch.as_bytes(),
            ],
            &[b"0", lease.as_bytes(), self.owner.as_bytes(), now.as_bytes(), b"PUBLISH", b"8600"],
        );
        self.redisson.call(&["DEL", &latch]);
        int(&reply)
    }
}

fn queue_of(addr: SocketAddr, name: &str) -> Vec<String> {
    let mut c = Raw::connect(addr);
    let reply = c.call(&["LRANGE", &format!("redisson_lock_queue:{{{name}}}"), "0", "-1"]);
    parts(&reply).into_iter().map(|p| String::from_utf8(p).unwrap()).collect()
}

fn timeout_of(addr: SocketAddr, name: &str, owner: &str) -> Option<u64> {
    let mut c = Raw::connect(addr);
    let reply = c.call(&["ZSCORE", &format!("redisson_lock_timeout:{{{name}}}"), owner]);
    bulk(&reply).map(|s| String::from_utf8(s).unwrap().parse().unwrap())
}

/// Eight threads ask for a held fair lock in a known order; each then waits
/// as Redisson does. They get it in the order they asked, each woken by the
/// one message its predecessor's unlock sends to it alone.
fn fair_lock_grants_in_request_order(path: Path) {
    const WAITERS: usize = 8;
    let s = server(path);
    let addr = s.addr();
    let mut holder = FairLock::new(addr, "fair", "holder-uuid", 1);
    assert_eq!(holder.try_acquire(), None);

    let mut waiters = Vec::new();
    for i in 0..WAITERS {
        let mut w = FairLock::new(addr, "fair", &format!("uuid-{i}"), 100 + i as u64);
        let ttl = w.try_acquire().expect("queued behind the holder");
        // The first waits for the lease; each later one for the place of
        // the one before it too.
        assert!(ttl > 25_000 + i as i64 * (THREAD_WAIT_MS as i64 - 5_000), "waiter {i}: {ttl}");
        let channel = w.own_channel();
        w.sub.subscribe(&channel);
        waiters.push((w, ttl));
    }
    let expected: Vec<String> = waiters.iter().map(|(w, _)| w.owner.clone()).collect();
    assert_eq!(queue_of(addr, "fair"), expected);

    let order = Arc::new(Mutex::new(Vec::new()));
    let holding = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = waiters
        .into_iter()
        .enumerate()
        .map(|(i, (mut w, ttl))| {
            let (order, holding) = (order.clone(), holding.clone());
            std::thread::spawn(move || {
                w.wait_for_turn(ttl);
                assert_eq!(holding.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                order.lock().unwrap().push(i);
                std::thread::sleep(Duration::from_millis(5));
                holding.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(w.unlock(), 1);
                w.sub.received
            })
        })
        .collect();

    let unlocked = Instant::now();
    assert_eq!(holder.unlock(), 1);
    let received: Vec<Vec<Vec<u8>>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let elapsed = unlocked.elapsed();

    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
    // One message per waiter: every unlock told the next in line only.
    for (i, messages) in received.iter().enumerate() {
        assert_eq!(messages, &vec![b"0".to_vec()], "waiter {i}");
    }
    // A lost message would have cost a 30 s lease.
    assert!(elapsed < WOKEN_WITHIN * 2, "{WAITERS} hand-overs took {elapsed:?}");
    let mut c = Raw::connect(addr);
    assert_eq!(
        c.call(&["EXISTS", "fair", "redisson_lock_queue:{fair}", "redisson_lock_timeout:{fair}"]),
        b":0\r\n"
    );
    assert_path(&s, path, FAIR_SCRIPTS);
}

/// A waiter whose tryLock wait runs out leaves the queue by
/// `fairlock-acquire-failed`, which also shortens the places of those
/// behind it; the rest still get the lock in order.
fn fair_lock_waiter_that_gives_up_leaves_the_queue(path: Path) {
    let s = server(path);
    let addr = s.addr();
    let mut holder = FairLock::new(addr, "fair", "holder-uuid", 1);
    assert_eq!(holder.try_acquire(), None);
    let mut queued = Vec::new();
    for (i, uuid) in ["uuid-a", "uuid-b", "uuid-c", "uuid-d"].into_iter().enumerate() {
        let mut w = FairLock::new(addr, "fair", uuid, 1);
        if uuid == "uuid-b" {
            // tryLock(1500 ms): the wait time is also its place's length.
            w.wait_ms = 1_500;
        }
        let ttl = w.try_acquire().expect("queued");
        queued.push((i, w, ttl));
    }
    let (_, mut b, b_ttl) = queued.remove(1);
    let c_before = timeout_of(addr, "fair", "uuid-c:1").unwrap();
    let d_before = timeout_of(addr, "fair", "uuid-d:1").unwrap();

    let gave_up = Instant::now();
    assert!(!b.try_wait_for_turn(b_ttl, Duration::from_millis(1_500)));
    assert!(gave_up.elapsed() >= Duration::from_millis(1_400));
    assert_eq!(queue_of(addr, "fair"), vec!["uuid-a:1", "uuid-c:1", "uuid-d:1"]);
    assert_eq!(timeout_of(addr, "fair", "uuid-b:1"), None);
    assert_eq!(timeout_of(addr, "fair", "uuid-c:1"), Some(c_before - 1_500));
    assert_eq!(timeout_of(addr, "fair", "uuid-d:1"), Some(d_before - 1_500));
    assert_eq!(b.sub.received.len(), 0, "nobody unlocked");

    let order = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = queued
        .into_iter()
        .map(|(i, mut w, ttl)| {
            let order = order.clone();
            let channel = w.own_channel();
            w.sub.subscribe(&channel);
            std::thread::spawn(move || {
                w.wait_for_turn(ttl);
                order.lock().unwrap().push(i);
                assert_eq!(w.unlock(), 1);
            })
        })
        .collect();
    let unlocked = Instant::now();
    assert_eq!(holder.unlock(), 1);
    for t in threads {
        t.join().unwrap();
    }
    assert!(unlocked.elapsed() < WOKEN_WITHIN, "{:?}", unlocked.elapsed());
    assert_eq!(*order.lock().unwrap(), vec![0, 2, 3]);
    let mut scripts = FAIR_SCRIPTS.to_vec();
    scripts.push("fairlock-acquire-failed");
    assert_path(&s, path, &scripts);
}

/// A queued thread that vanished (it never asks again nor leaves) keeps its
/// place only until its timeout passes: the next script call drops it, and
/// the unlock message that went to it wakes no one else.
fn fair_lock_drops_a_vanished_waiter_when_its_timeout_passes(path: Path) {
    let s = server(path);
    let addr = s.addr();
    let mut holder = FairLock::new(addr, "fair", "holder-uuid", 1);
    holder.lease_ms = 1_500;
    assert_eq!(holder.try_acquire(), None);
    // It asked with tryLock(1000 ms) and was never heard of again.
    let mut gone = FairLock::new(addr, "fair", "uuid-gone", 1);
    gone.wait_ms = 1_000;
    gone.try_acquire().expect("queued");
    let gone_timeout = timeout_of(addr, "fair", "uuid-gone:1").unwrap();
    assert!(gone_timeout <= now_ms() + 2_500, "lease + wait: {gone_timeout}");

    let mut y = FairLock::new(addr, "fair", "uuid-y", 1);
    let y_ttl = y.try_acquire().expect("queued");
    assert!(y_ttl <= 2_500, "until the vanished one's timeout: {y_ttl}");
    let mut z = FairLock::new(addr, "fair", "uuid-z", 1);
    let z_ttl = z.try_acquire().expect("queued");
    assert!(z_ttl > THREAD_WAIT_MS as i64, "{z_ttl}");
    for w in [&mut y, &mut z] {
        let channel = w.own_channel();
        w.sub.subscribe(&channel);
    }

    // The unlock tells the head of the queue, which is gone.
    assert_eq!(holder.unlock(), 1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = [(y, y_ttl), (z, z_ttl)]
        .into_iter()
        .map(|(mut w, ttl)| {
            let order = order.clone();
            std::thread::spawn(move || {
                w.wait_for_turn(ttl);
                order.lock().unwrap().push((w.owner.clone(), now_ms()));
                assert_eq!(w.unlock(), 1);
                w.sub.received
            })
        })
        .collect();
    let received: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order.iter().map(|(o, _)| o.as_str()).collect::<Vec<_>>(),
        vec!["uuid-y:1", "uuid-z:1"]
    );
    let y_got_it = order[0].1;
    assert!(y_got_it >= gone_timeout, "before the vanished waiter's timeout");
    assert!(y_got_it < gone_timeout + WOKEN_WITHIN.as_millis() as u64);
    assert_eq!(received[0].len(), 0, "the message went to the vanished waiter only");
    assert_eq!(received[1], vec![b"0".to_vec()]);
    assert_eq!(timeout_of(addr, "fair", "uuid-gone:1"), None);
    assert_eq!(queue_of(addr, "fair"), Vec::<String>::new());
    assert_path(&s, path, FAIR_SCRIPTS);
}

// ---------------------------------------------------------------------------
// Semaphore
// ---------------------------------------------------------------------------

const SEMAPHORE_SCRIPTS: &[&str] = &["semaphore-trysetpermits", "semaphore-tryacquire", "semaphore-release"];

/// One client's `RSemaphore`.
struct Semaphore {
    redisson: Redisson,
    sub: Subscription,
    name: String,
    set_permits: Script,
    acquire: Script,
    release: Script,
}

impl Semaphore {
    fn new(addr: SocketAddr, name: &str) -> Semaphore {
        Semaphore {
            redisson: Redisson::connect(addr),
            sub: Subscription::connect(addr),
            name: name.to_string(),
            set_permits: script("semaphore-trysetpermits"),
            acquire: script("semaphore-tryacquire"),
            release: script("semaphore-release"),
        }
    }

    fn channel(&self) -> String {
        format!("redisson_sc:{{{}}}", self.name)
    }

    fn try_set_permits(&mut self, permits: u64) -> bool {
        let (channel, permits) = (self.channel(), permits.to_string());
        let reply = self.redisson.evalsha(
            &self.set_permits,
            &[self.name.as_bytes(), channel.as_bytes()],
            &[permits.as_bytes(), b"PUBLISH"],
        );
        int(&reply) == 1
    }

    fn try_acquire(&mut self) -> bool {
        int(&self.redisson.evalsha(&self.acquire, &[self.name.as_bytes()], &[b"1"])) == 1
    }

    /// `tryAcquire(1, wait)`: subscribe when refused, then retry on each
    /// message until the wait runs out.
    fn acquire(&mut self, wait: Duration) -> bool {
        if self.try_acquire() {
            return true;
        }
        let deadline = Instant::now() + wait;
        let channel = self.channel();
        self.sub.subscribe(&channel);
        let acquired = loop {
            if self.try_acquire() {
                break true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            self.sub.message_within(left);
        };
        self.sub.unsubscribe();
        acquired
    }

    fn release(&mut self) {
        let channel = self.channel();
        let reply = self
            .redisson
            .evalsha(&self.release, &[self.name.as_bytes(), channel.as_bytes()], &[b"1", b"PUBLISH"]);
        assert_eq!(reply, b"$-1\r\n");
    }

    /// `availablePermits()`: a GET.
    fn available(&mut self) -> i64 {
        let name = self.name.clone();
        bulk(&self.redisson.call(&["GET", &name])).map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap())
    }
}

/// With no permit left, acquire waits on the channel; a release wakes it
/// at once, long before its 30 s wait would run out.
fn semaphore_release_wakes_a_blocked_acquire(path: Path) {
    let s = server(path);
    let addr = s.addr();
    let mut a = Semaphore::new(addr, "sem");
    assert!(a.try_set_permits(1));
    assert!(!a.try_set_permits(5), "trySetPermits sets only once");
    assert!(a.acquire(Duration::from_secs(30)));
    assert_eq!(a.available(), 0);

    let mut b = Semaphore::new(addr, "sem");
    let acquired_at = Arc::new(Mutex::new(None));
    let waiter = {
        let acquired_at = acquired_at.clone();
        std::thread::spawn(move || {
            let got = b.acquire(Duration::from_secs(30));
            *acquired_at.lock().unwrap() = Some(Instant::now());
            (got, b)
        })
    };
    wait_for_subscribers(addr, "redisson_sc:{sem}", 1);
    std::thread::sleep(STILL_BLOCKED);
    assert!(acquired_at.lock().unwrap().is_none(), "acquired with no permit");

    let released = Instant::now();
    a.release();
    let (got, mut b) = waiter.join().unwrap();
    assert!(got);
    let woken = acquired_at.lock().unwrap().unwrap() - released;
    assert!(woken < WOKEN_WITHIN, "woken after {woken:?}");
    // The release published the permit count it left.
    assert_eq!(b.sub.received.last(), Some(&b"1".to_vec()));
    assert_eq!(b.available(), 0);
    b.release();
    assert_eq!(a.available(), 1);
    assert_path(&s, path, SEMAPHORE_SCRIPTS);
}

/// Eight clients take and give back one of three permits 200 times each:
/// never more than three holders, and exactly three permits at the end.
fn semaphore_permits_end_exact_under_contention(path: Path) {
    const CLIENTS: usize = 8;
    const CYCLES: usize = 200;
    const PERMITS: usize = 3;
    let s = server(path);
    let addr = s.addr();
    assert!(Semaphore::new(addr, "pool").try_set_permits(PERMITS as u64));
    let holders = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut client = Semaphore::new(addr, "pool");
            let holders = holders.clone();
            std::thread::spawn(move || {
                for _ in 0..CYCLES {
                    assert!(client.acquire(Duration::from_secs(30)), "no permit within 30 s");
                    let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                    assert!(now <= PERMITS, "{now} holders of {PERMITS} permits");
                    std::thread::yield_now();
                    holders.fetch_sub(1, Ordering::SeqCst);
                    client.release();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(Semaphore::new(addr, "pool").available(), PERMITS as i64);
    assert_eq!(subscribers(addr, "redisson_sc:{pool}"), 0);
    assert_path(&s, path, SEMAPHORE_SCRIPTS);
}

// ---------------------------------------------------------------------------
// Permit-expirable semaphore
// ---------------------------------------------------------------------------

const PE_SCRIPTS: &[&str] = &[
    "semaphore-trysetpermits",
    "pesemaphore-tryacquire",
    "pesemaphore-release",
    "pesemaphore-available-permits",
];

/// What `pesemaphore-tryacquire` answered.
#[derive(Debug, PartialEq)]
enum PeAcquire {
    /// "OK": the permit is ours.
    Acquired,
    /// ":<score>": none free; the earliest lease ends then.
    NearestExpiry(u64),
    /// nil: none free, and no lease ends by itself.
    None,
}

/// One client's `RPermitExpirableSemaphore`.
struct PeSemaphore {
    redisson: Redisson,
    sub: Subscription,
    name: String,
    next_id: u8,
    client: u8,
    set_permits: Script,
    acquire: Script,
    release: Script,
    available: Script,
}

impl PeSemaphore {
    fn new(addr: SocketAddr, name: &str, client: u8) -> PeSemaphore {
        PeSemaphore {
            redisson: Redisson::connect(addr),
            sub: Subscription::connect(addr),
            name: name.to_string(),
            next_id: 0,
            client,
            set_permits: script("semaphore-trysetpermits"),
            acquire: script("pesemaphore-tryacquire"),
            release: script("pesemaphore-release"),
            available: script("pesemaphore-available-permits"),
        }
    }

    fn channel(&self) -> String {
        format!("redisson_sc:{{{}}}", self.name)
    }

    fn timeouts(&self) -> String {
        format!("{{{}}}:timeout", self.name)
    }

    /// A new permit id: 16 bytes, not UTF-8, as Redisson 4.7.0 sends.
    fn new_id(&mut self) -> Vec<u8> {
        self.next_id += 1;
        let mut id = vec![0xff, 0xfe, self.client, self.next_id];
        id.extend((0..12u8).map(|i| i.wrapping_mul(37) ^ self.next_id));
        id
    }

    fn try_set_permits(&mut self, permits: u64) -> bool {
        let (channel, permits) = (self.channel(), permits.to_string());
        let reply = self.redisson.evalsha(
            &self.set_permits,
            &[self.name.as_bytes(), channel.as_bytes()],
            &[permits.as_bytes(), b"PUBLISH"],
        );
        int(&reply) == 1
    }

    /// One `pesemaphore-tryacquire` for permit `id`, leased for `lease`.
    fn try_acquire(&mut self, id: &[u8], lease: Option<Duration>) -> PeAcquire {
        let now = now_ms();
        let until = lease.map_or(NON_EXPIRABLE, |l| now + l.as_millis() as u64).to_string();
        let (timeouts, channel, now, never) = (self.timeouts(), self.channel(), now.to_string(), NON_EXPIRABLE.to_string());
        let reply = self.redisson.evalsha(
            &self.acquire,
            &[self.name.as_bytes(), timeouts.as_bytes(), channel.as_bytes()],
            &[b"1", until.as_bytes(), now.as_bytes(), never.as_bytes(), b"PUBLISH", id],
        );
        match bulk(&reply) {
            None => PeAcquire::None,
            Some(ok) if ok == b"OK" => PeAcquire::Acquired,
            Some(score) => {
                let score = std::str::from_utf8(&score).unwrap().strip_prefix(':').expect("':' score");
                PeAcquire::NearestExpiry(score.parse().unwrap())
            }
        }
    }

    /// `tryAcquire(wait, lease)`: the permit id, or None when the wait runs
    /// out. Between tries it waits for a message, or until the nearest
    /// lease ends when the script named one.
    fn acquire(&mut self, wait: Duration, lease: Option<Duration>) -> Option<Vec<u8>> {
        let id = self.new_id();
        if self.try_acquire(&id, lease) == PeAcquire::Acquired {
            return Some(id);
        }
        let deadline = Instant::now() + wait;
        let channel = self.channel();
        self.sub.subscribe(&channel);
        let acquired = loop {
            let nearest = match self.try_acquire(&id, lease) {
                PeAcquire::Acquired => break true,
                PeAcquire::NearestExpiry(at) => Some(Duration::from_millis(at.saturating_sub(now_ms()))),
                PeAcquire::None => None,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            self.sub.message_within(nearest.map_or(left, |n| n.min(left)));
        };
        self.sub.unsubscribe();
        acquired.then_some(id)
    }

    /// `tryRelease(id)`: true when the permit was live and is back.
    fn release(&mut self, id: &[u8]) -> bool {
        let (channel, timeouts, now) = (self.channel(), self.timeouts(), now_ms().to_string());
        let reply = self.redisson.evalsha(
            &self.release,
            &[self.name.as_bytes(), channel.as_bytes(), timeouts.as_bytes()],
            &[id, b"1", now.as_bytes(), b"PUBLISH"],
        );
        int(&reply) == 1
    }

    /// `availablePermits()`, which first takes back expired leases.
    fn available(&mut self) -> i64 {
        let (timeouts, channel, now) = (self.timeouts(), self.channel(), now_ms().to_string());
        let reply = self.redisson.evalsha(
            &self.available,
            &[self.name.as_bytes(), timeouts.as_bytes(), channel.as_bytes()],
            &[now.as_bytes(), b"PUBLISH"],
        );
        // The count comes back as a number, or as the stored string.
        match bulk_or_int(&reply) {
            Ok(n) => n,
            Err(s) => s.parse().unwrap(),
        }
    }

    fn lease_of(&mut self, id: &[u8]) -> Option<u64> {
        let timeouts = self.timeouts();
        self.redisson.conn.send_cmd(&[b"ZSCORE", timeouts.as_bytes(), id]);
        bulk(&self.redisson.conn.reply()).map(|s| String::from_utf8(s).unwrap().parse().unwrap())
    }
}

fn bulk_or_int(reply: &[u8]) -> Result<i64, String> {
    if reply[0] == b':' {
        Ok(int(reply))
    } else {
        Err(String::from_utf8(bulk(reply).unwrap()).unwrap())
    }
}

/// Acquire hands out a permit id and records its lease; once the lease
/// ends the permit goes back to the pool at the next availablePermits or
/// acquire, and releasing it then is refused.
fn pe_semaphore_takes_back_expired_permits(path: Path) {
    let s = server(path);
    let addr = s.addr();
    let mut a = PeSemaphore::new(addr, "pe", 1);
    assert!(a.try_set_permits(2));
    let before = now_ms();
    let short = a.acquire(Duration::ZERO, Some(Duration::from_millis(1_500))).expect("a permit");
    let kept = a.acquire(Duration::ZERO, None).expect("a permit");
    assert_eq!(short.len(), 16);
    let short_lease = a.lease_of(&short).unwrap();
    assert!(short_lease >= before + 1_500 && short_lease <= now_ms() + 1_500, "{short_lease}");
    assert_eq!(a.lease_of(&kept), Some(NON_EXPIRABLE));
    assert_eq!(a.available(), 0);
    // None free: the script names the lease that ends first.
    let probe = a.new_id();
    assert_eq!(a.try_acquire(&probe, None), PeAcquire::NearestExpiry(short_lease));

    while now_ms() <= short_lease {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(a.available(), 1, "the expired lease is back");
    assert_eq!(a.lease_of(&short), None);
    assert!(!a.release(&short), "an expired permit can not be released");

    // Expiry through acquire: the next acquire takes the permit back and
    // hands it on.
    let again = a
        .acquire(Duration::ZERO, Some(Duration::from_millis(1_000)))
        .expect("the free permit");
    assert_eq!(a.available(), 0);
    let again_lease = a.lease_of(&again).unwrap();
    while now_ms() <= again_lease {
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = a.acquire(Duration::ZERO, None).expect("the expired permit, taken back");
    assert_eq!(a.lease_of(&again), None);
    assert_eq!(a.available(), 0);
    assert!(a.release(&after));
    assert!(a.release(&kept));
    assert_eq!(a.available(), 2);
    assert_path(&s, path, PE_SCRIPTS);
}

/// A waiter on a permit held without a lease is woken by the release's
/// message, and a waiter on a leased permit wakes when the lease ends.
fn pe_semaphore_release_or_lease_end_wakes_a_waiter(path: Path) {
    let s = server(path);
    let addr = s.addr();
    let mut a = PeSemaphore::new(addr, "pe", 1);
    assert!(a.try_set_permits(1));
    let held = a.acquire(Duration::ZERO, None).expect("a permit");

    let mut b = PeSemaphore::new(addr, "pe", 2);
    let acquired_at = Arc::new(Mutex::new(None));
    let waiter = {
        let acquired_at = acquired_at.clone();
        std::thread::spawn(move || {
            let id = b.acquire(Duration::from_secs(30), Some(Duration::from_millis(1_000)));
            *acquired_at.lock().unwrap() = Some((Instant::now(), now_ms()));
            (id, b)
        })
    };
    wait_for_subscribers(addr, "redisson_sc:{pe}", 1);
    std::thread::sleep(STILL_BLOCKED);
    assert!(acquired_at.lock().unwrap().is_none(), "acquired with no permit");
    let released = Instant::now();
    assert!(a.release(&held));
    let (id, mut b) = waiter.join().unwrap();
    let b_id = id.expect("woken and acquired");
    let (woken, _) = acquired_at.lock().unwrap().unwrap();
    assert!(woken - released < WOKEN_WITHIN, "woken after {:?}", woken - released);
    assert_eq!(b.sub.received, vec![b"1".to_vec()]);

    // b's permit is leased for a second; a's wait ends with the lease.
    let lease_end = b.lease_of(&b_id).unwrap();
    let id = a.acquire(Duration::from_secs(30), None).expect("the permit, once b's lease ended");
    let got_it = now_ms();
    assert!(got_it >= lease_end, "before the lease ended");
    assert!(
        got_it < lease_end + WOKEN_WITHIN.as_millis() as u64,
        "{} ms late",
        got_it - lease_end
    );
    assert!(!b.release(&b_id), "b's lease ended");
    assert!(a.release(&id));
    assert_eq!(a.available(), 1);
    assert_path(&s, path, PE_SCRIPTS);
}

// ---------------------------------------------------------------------------
// Count-down latch
// ---------------------------------------------------------------------------

const LATCH_SCRIPTS: &[&str] = &["latch-trysetcount", "latch-countdown"];

/// One client's `RCountDownLatch`.
struct Latch {
    redisson: Redisson,
    sub: Subscription,
    name: String,
    set_count: Script,
    count_down: Script,
}

impl Latch {
    fn new(addr: SocketAddr, name: &str) -> Latch {
        Latch {
            redisson: Redisson::connect(addr),
            sub: Subscription::connect(addr),
            name: name.to_string(),
            set_count: script("latch-trysetcount"),
            count_down: script("latch-countdown"),
        }
    }

    /// Braces always, even around a name that has some: Redisson builds
    /// this channel name by hand.
    fn channel(&self) -> String {
        format!("redisson_countdownlatch__channel__{{{}}}", self.name)
    }

    fn try_set_count(&mut self, count: u64) -> bool {
        let (channel, count) = (self.channel(), count.to_string());
        let reply = self.redisson.evalsha(
            &self.set_count,
            &[self.name.as_bytes(), channel.as_bytes()],
            &[b"1", count.as_bytes(), b"PUBLISH"],
        );
        int(&reply) == 1
    }

    fn count_down(&mut self) {
        let channel = self.channel();
        let reply = self
            .redisson
            .evalsha(&self.count_down, &[self.name.as_bytes(), channel.as_bytes()], &[b"0", b"PUBLISH"]);
        assert_eq!(reply, b"$-1\r\n");
    }

    /// `getCount()`: a GET, 0 for a missing key.
    fn count(&mut self) -> i64 {
        let name = self.name.clone();
        bulk(&self.redisson.call(&["GET", &name])).map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap())
    }

    /// `await(wait)`: true once the count is 0, checking again on each
    /// message.
    fn wait(&mut self, wait: Duration) -> bool {
        if self.count() == 0 {
            return true;
        }
        let deadline = Instant::now() + wait;
        let channel = self.channel();
        self.sub.subscribe(&channel);
        let opened = loop {
            if self.count() == 0 {
                break true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            self.sub.message_within(left);
        };
        self.sub.unsubscribe();
        opened
    }
}

/// Six waiters on a latch of three are all woken by the count-down that
/// reaches zero, long before their 30 s wait would run out.
fn latch_count_down_to_zero_wakes_every_waiter(path: Path) {
    const WAITERS: usize = 6;
    let s = server(path);
    let addr = s.addr();
    let mut latch = Latch::new(addr, "gate");
    assert!(latch.try_set_count(3));
    assert!(!latch.try_set_count(9), "trySetCount sets only once");

    let opened = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..WAITERS)
        .map(|_| {
            let mut waiter = Latch::new(addr, "gate");
            let opened = opened.clone();
            std::thread::spawn(move || {
                let ok = waiter.wait(Duration::from_secs(30));
                opened.fetch_add(1, Ordering::SeqCst);
                (ok, Instant::now(), waiter.sub.received)
            })
        })
        .collect();
    wait_for_subscribers(addr, &latch.channel(), WAITERS as i64);
    latch.count_down();
    latch.count_down();
    assert_eq!(latch.count(), 1);
    std::thread::sleep(STILL_BLOCKED);
    assert_eq!(opened.load(Ordering::SeqCst), 0, "opened before zero");

    let zero = Instant::now();
    latch.count_down();
    for t in threads {
        let (ok, at, received) = t.join().unwrap();
        assert!(ok);
        assert!(at - zero < WOKEN_WITHIN, "woken after {:?}", at - zero);
        assert_eq!(received, vec![b"0".to_vec()], "the zero-count message");
    }
    let mut c = Raw::connect(addr);
    assert_eq!(c.call(&["EXISTS", "gate"]), b":0\r\n");
    assert!(latch.try_set_count(2), "a latch at zero can be set again");
    assert_path(&s, path, LATCH_SCRIPTS);
}

macro_rules! on_both_paths {
    ($($flow:ident),* $(,)?) => {
        /// The flows with recognized scripts run natively where keylock can.
        mod native {
            $(#[test]
            fn $flow() {
                super::$flow(super::Path::Native)
            })*
        }
        /// The same flows with `native-scripts no`: every script in Lua.
        mod lua {
            $(#[test]
            fn $flow() {
                super::$flow(super::Path::Lua)
            })*
        }
    };
}

on_both_paths!(
    fair_lock_grants_in_request_order,
    fair_lock_waiter_that_gives_up_leaves_the_queue,
    fair_lock_drops_a_vanished_waiter_when_its_timeout_passes,
    semaphore_release_wakes_a_blocked_acquire,
    semaphore_permits_end_exact_under_contention,
    pe_semaphore_takes_back_expired_permits,
    pe_semaphore_release_or_lease_end_wakes_a_waiter,
    latch_count_down_to_zero_wakes_every_waiter,
);
