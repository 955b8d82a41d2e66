//! The load generator's hot path: client connections driving a workload's
//! operations, on one thread per `--threads`, each a tokio current-thread
//! runtime running its share of the clients as local tasks.
//!
//! Pipelined driver: each client has `--pipeline` slots; each slot runs one
//! operation at a time (a Redisson thread, for the lock workloads). A round
//! renders every slot's next command into one reused buffer, writes it in
//! one call, then scans the replies in place and hands each to its slot.
//! Nothing on that path allocates once buffers have grown to size: request
//! templates render into reused buffers, replies are borrowed from the read
//! buffer, and latencies go into a fixed-size histogram shared by the
//! thread's clients. The clock is read once per write and once per read.
//!
//! Waiting driver (`lock-contended`): Redisson's `lock()` — on a TTL reply,
//! SUBSCRIBE on a second connection, retry, and wait for the unlock message
//! or the TTL between retries; UNSUBSCRIBE once acquired. It is one
//! command at a time by nature, so it allows no pipelining.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::conn::{Conn, Handshake, describe};
use super::resp::Reply;
use super::template::Vars;
use super::workload::{Plan, Verdict};
use super::{BenchError, KeyOrder};

/// Longest latency the histograms hold (longer ones are recorded as this).
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// The longest a waiter sleeps between retries (a TTL reply of -1, a lock
/// without expiry, waits this long): Redisson's default lease.
const LONGEST_WAIT_MS: i64 = 30_000;

/// What all threads share: the run's budget and progress.
pub struct Shared {
    /// `--requests`: operations to start, in all.
    pub limit: Option<u64>,
    pub duration: Option<Duration>,
    /// Operations started so far (tickets taken against `limit`).
    pub issued: AtomicU64,
    /// The next key for `--key-order seq`.
    pub next_key: AtomicU64,
    /// Operations finished, for the progress display.
    pub completed: AtomicU64,
    /// When clients began (after all connected).
    pub start: OnceLock<Instant>,
    /// A client failed for good: the others start nothing new.
    pub failed: AtomicBool,
}

impl Shared {
    pub fn new(limit: Option<u64>, duration: Option<Duration>) -> Shared {
        Shared {
            limit,
            duration,
            issued: AtomicU64::new(0),
            next_key: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            start: OnceLock::new(),
            failed: AtomicBool::new(false),
        }
    }

    /// May one more operation start at `now`?
    fn claim(&self, now: Instant) -> bool {
        if self.failed.load(Ordering::Relaxed) {
            return false;
        }
        if let (Some(duration), Some(start)) = (self.duration, self.start.get())
            && now.duration_since(*start) >= duration
        {
            return false;
        }
        match self.limit {
            Some(limit) => self.issued.fetch_add(1, Ordering::Relaxed) < limit,
            None => true,
        }
    }
}

/// One thread's counts, merged into the summary at the end.
pub struct Stats {
    /// Operation latencies in nanoseconds (errors not included).
    pub latency: Histogram<u64>,
    /// Operations finished without an error reply (contended ones included).
    pub ops: u64,
    /// Operations that found the lock or the permits taken.
    pub contended: u64,
    /// Error replies.
    pub errors: u64,
    pub first_error: Option<String>,
    /// Replies a correct run never gets (an unlock answering "not owner").
    pub unexpected: u64,
    pub first_unexpected: Option<String>,
    /// NOSCRIPT replies answered by SCRIPT LOAD and a retry.
    pub noscript_reloads: u64,
    /// Commands sent (and answered).
    pub commands: u64,
    /// Operations each client started: how evenly the server served them.
    pub client_ops: Vec<u64>,
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("valid histogram bounds"),
            ops: 0,
            contended: 0,
            errors: 0,
            first_error: None,
            unexpected: 0,
            first_unexpected: None,
            noscript_reloads: 0,
            commands: 0,
            client_ops: Vec::new(),
        }
    }

    pub fn merge(&mut self, other: Stats) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&other.latency);
        self.ops += other.ops;
        self.contended += other.contended;
        self.errors += other.errors;
        self.first_error = self.first_error.take().or(other.first_error);
        self.unexpected += other.unexpected;
        self.first_unexpected = self.first_unexpected.take().or(other.first_unexpected);
        self.noscript_reloads += other.noscript_reloads;
        self.commands += other.commands;
        self.client_ops.extend(other.client_ops);
    }

    fn error(&mut self, text: &[u8]) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(String::from_utf8_lossy(text).into_owned());
        }
    }

    fn unexpected(&mut self, describe: impl FnOnce() -> String) {
        self.unexpected += 1;
        if self.first_unexpected.is_none() {
            self.first_unexpected = Some(describe());
        }
    }

    fn finished(&mut self, started: Instant, now: Instant, contended: bool) {
        self.ops += 1;
        self.contended += u64::from(contended);
        self.latency.saturating_record(now.duration_since(started).as_nanos() as u64);
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

/// What every client of a run shares, besides [`Shared`].
pub struct RunSpec {
    pub target: String,
    pub handshake: Handshake,
    pub plan: Plan,
    pub pipeline: usize,
    pub keys: u64,
    pub key_order: KeyOrder,
    pub evalsha: bool,
    pub seed: u64,
    /// `--wait`: the replicas WAIT must report, and the WAIT command sent
    /// after every step.
    pub wait: Option<(u64, Vec<u8>)>,
}

/// A client's own state outside its slots.
struct ClientEnv {
    id: u64,
    rng: fastrand::Rng,
    seq: u64,
    scratch: Vec<u8>,
}

impl ClientEnv {
    fn new(id: u64, seed: u64) -> ClientEnv {
        ClientEnv {
            id,
            rng: fastrand::Rng::with_seed(seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            seq: 0,
            scratch: Vec::with_capacity(256),
        }
    }

    /// The variables of a new operation by Redisson thread `thread`.
    fn start_op(&mut self, thread: u64, spec: &RunSpec, shared: &Shared) -> Vars {
        let key = match spec.key_order {
            KeyOrder::Rand => self.rng.u64(..spec.keys),
            KeyOrder::Seq => shared.next_key.fetch_add(1, Ordering::Relaxed) % spec.keys,
        };
        let seq = self.seq;
        self.seq += 1;
        Vars {
            client: self.id,
            thread,
            seq,
            key,
        }
    }
}

/// Runs clients `ids` on the calling thread until the run ends. Every
/// thread of a run must call this: it waits at `barrier` for the others
/// to connect, so that the clock starts with all clients ready.
pub fn run_thread(ids: std::ops::Range<u64>, spec: Arc<RunSpec>, shared: Arc<Shared>, barrier: &Barrier) -> Result<Stats, BenchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError(format!("cannot start a runtime: {e}")))?;
    let local = tokio::task::LocalSet::new();
    let connected = local.block_on(&runtime, async {
        let mut conns = Vec::new();
        for _ in ids.clone() {
            conns.push(Conn::open(&spec.target, &spec.handshake).await?);
        }
        Ok::<_, BenchError>(conns)
    });
    if connected.is_err() {
        shared.failed.store(true, Ordering::Relaxed);
    }
    barrier.wait();
    let conns = connected?;
    if shared.failed.load(Ordering::Relaxed) {
        return Err(BenchError("another thread's clients could not connect".into()));
    }
    shared.start.get_or_init(Instant::now);
    let stats = Rc::new(RefCell::new(Stats::new()));
    let outcome = local.block_on(&runtime, async {
        let tasks: Vec<_> = ids
            .zip(conns)
            .map(|(id, conn)| {
                let stats = Rc::clone(&stats);
                let spec = Arc::clone(&spec);
                let shared = Arc::clone(&shared);
                tokio::task::spawn_local(async move {
                    let mut env = ClientEnv::new(id, spec.seed);
                    let result = if spec.plan.wait.is_some() {
                        run_waiting(conn, &mut env, &spec, &shared, &stats).await
                    } else {
                        run_pipelined(conn, &mut env, &spec, &shared, &stats).await
                    };
                    stats.borrow_mut().client_ops.push(env.seq);
                    if result.is_err() {
                        shared.failed.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        let mut first_error = None;
        for task in tasks {
            let result = task.await.unwrap_or_else(|e| Err(BenchError(format!("client task failed: {e}"))));
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    });
    outcome?;
    drop(local);
    let stats = Rc::try_unwrap(stats).map_or_else(|_| Stats::new(), RefCell::into_inner);
    Ok(stats)
}

/// One pipeline slot: a Redisson thread running one operation at a time.
struct Slot {
    thread: u64,
    /// The operation's current step; None between operations.
    step: Option<usize>,
    vars: Vars,
    started: Instant,
    /// The script to SCRIPT LOAD before the step is sent again (NOSCRIPT).
    reload: Option<usize>,
    /// The step was just sent again after a reload: a second NOSCRIPT in a
    /// row is an error, not a loop.
    reloaded: bool,
    /// A fire-and-forget step to send first, with its operation's variables.
    after: Option<(usize, Vars)>,
    /// The operation ended (contended or not) and its time is taken when
    /// the WAIT sent after its last step answers.
    finish: Option<bool>,
    /// The run's budget is spent: no more operations here.
    done: bool,
}

impl Slot {
    fn new(thread: u64, now: Instant) -> Slot {
        Slot {
            thread,
            step: None,
            vars: Vars::default(),
            started: now,
            reload: None,
            reloaded: false,
            after: None,
            finish: None,
            done: false,
        }
    }

    /// Takes the reply to this slot's step; true when it ended the operation.
    fn answer(&mut self, reply: &Reply<'_>, now: Instant, spec: &RunSpec, stats: &mut Stats) -> bool {
        let plan = &spec.plan;
        let Some(step_id) = self.step else { return false };
        let step = &plan.steps[step_id];
        if let Reply::Error(text) = *reply {
            if spec.evalsha
                && !self.reloaded
                && text.starts_with(b"NOSCRIPT")
                && let Some(script) = step.script
            {
                self.reload = Some(script);
                self.reloaded = true;
                stats.noscript_reloads += 1;
                return false;
            }
            self.reloaded = false;
            stats.error(text);
            self.step = None;
            return true;
        }
        self.reloaded = false;
        match step.judge(reply) {
            Verdict::Next(next) => {
                self.step = Some(next);
                return false;
            }
            Verdict::Done => {
                self.end(false, now, spec, stats);
                self.after = step.after.map(|after| (after, self.vars));
            }
            Verdict::Contended => self.end(true, now, spec, stats),
            Verdict::Unexpected => {
                let what = step.script.map_or("command", |s| plan.scripts[s].name.as_str());
                stats.unexpected(|| format!("reply to {what}: {}", describe(reply)));
            }
        }
        self.step = None;
        true
    }

    /// The operation ended: its time is taken now, or with `--wait` when
    /// the WAIT after this reply answers.
    fn end(&mut self, contended: bool, now: Instant, spec: &RunSpec, stats: &mut Stats) {
        if spec.wait.is_some() {
            self.finish = Some(contended);
        } else {
            stats.finished(self.started, now, contended);
        }
    }

    /// The reply to the WAIT sent after this slot's step.
    fn synced(&mut self, reply: &Reply<'_>, now: Instant, spec: &RunSpec, stats: &mut Stats) {
        let wanted = spec.wait.as_ref().map_or(0, |(n, _)| *n);
        match *reply {
            Reply::Integer(n) if n >= 0 && n as u64 >= wanted => {}
            Reply::Error(text) => stats.error(text),
            _ => stats.unexpected(|| format!("reply to WAIT {wanted}: {}", describe(reply))),
        }
        if let Some(contended) = self.finish.take() {
            stats.finished(self.started, now, contended);
        }
    }
}

/// Whose reply is which, in a round's order.
#[derive(Debug, Clone, Copy)]
struct Role {
    slot: u32,
    kind: ReplyTo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplyTo {
    /// The operation's step.
    Step,
    /// A SCRIPT LOAD or fire-and-forget command: only errors count.
    Ack,
    /// The `--wait` WAIT after the step.
    Wait,
}

async fn run_pipelined(
    mut conn: Conn,
    env: &mut ClientEnv,
    spec: &RunSpec,
    shared: &Shared,
    stats: &RefCell<Stats>,
) -> Result<(), BenchError> {
    let plan = &spec.plan;
    let now = Instant::now();
    let mut slots: Vec<Slot> = (0..spec.pipeline as u64)
        .map(|slot| Slot::new(env.id * spec.pipeline as u64 + slot, now))
        .collect();
    let mut out = Vec::with_capacity(16 * 1024);
    let mut roles: Vec<Role> = Vec::with_capacity(spec.pipeline * 3);
    loop {
        let sent = Instant::now();
        out.clear();
        roles.clear();
        for (i, slot) in slots.iter_mut().enumerate() {
            let role = |kind| Role { slot: i as u32, kind };
            if let Some((step, vars)) = slot.after.take() {
                plan.steps[step].command.render(&vars, &mut env.rng, &mut env.scratch, &mut out);
                roles.push(role(ReplyTo::Ack));
            }
            let step = match slot.step {
                Some(step) => step,
                None if slot.done || !shared.claim(sent) => {
                    slot.done = true;
                    continue;
                }
                None => {
                    slot.vars = env.start_op(slot.thread, spec, shared);
                    slot.started = sent;
                    let first = plan.first_step(&mut env.rng);
                    slot.step = Some(first);
                    first
                }
            };
            if let Some(script) = slot.reload.take() {
                out.extend_from_slice(&plan.scripts[script].load);
                roles.push(role(ReplyTo::Ack));
            }
            plan.steps[step]
                .command
                .render(&slot.vars, &mut env.rng, &mut env.scratch, &mut out);
            roles.push(role(ReplyTo::Step));
            if let Some((_, wait)) = &spec.wait {
                out.extend_from_slice(wait);
                roles.push(role(ReplyTo::Wait));
            }
        }
        if roles.is_empty() {
            return Ok(());
        }
        conn.write(&out).await?;
        let mut received = sent;
        let mut answered = 0;
        let mut ended = 0;
        while answered < roles.len() {
            let Some(reply) = conn.next_reply()? else {
                conn.fill().await?;
                received = Instant::now();
                continue;
            };
            if matches!(reply, Reply::Push { .. }) {
                continue;
            }
            let role = roles[answered];
            answered += 1;
            let mut stats = stats.borrow_mut();
            let slot = &mut slots[role.slot as usize];
            match role.kind {
                ReplyTo::Ack => {
                    if let Reply::Error(text) = reply {
                        stats.error(text);
                    }
                }
                ReplyTo::Step => ended += u64::from(slot.answer(&reply, received, spec, &mut stats)),
                ReplyTo::Wait => slot.synced(&reply, received, spec, &mut stats),
            }
        }
        stats.borrow_mut().commands += roles.len() as u64;
        shared.completed.fetch_add(ended, Ordering::Relaxed);
        // One round per turn: a server that answers before this task's
        // next read would otherwise let it go round after round (up to
        // tokio's budget) while the other clients' replies wait unread.
        tokio::task::yield_now().await;
    }
}

/// `lock-contended`: Redisson's `lock()` then `unlock()`, one client at a time.
async fn run_waiting(
    mut conn: Conn,
    env: &mut ClientEnv,
    spec: &RunSpec,
    shared: &Shared,
    stats: &RefCell<Stats>,
) -> Result<(), BenchError> {
    let plan = &spec.plan;
    let Some(wait) = &plan.wait else { return Ok(()) };
    let mut sub: Option<Conn> = None;
    let mut out = Vec::with_capacity(1024);
    loop {
        let started = Instant::now();
        if !shared.claim(started) {
            return Ok(());
        }
        let vars = env.start_op(env.id, spec, shared);
        let acquire = plan.first_step(&mut env.rng);
        let mut answer = call(&mut conn, env, spec, acquire, &vars, &mut out, stats).await?;
        let contended = answer.integer.is_some();
        if contended {
            let sub = match &mut sub {
                Some(sub) => sub,
                None => sub.insert(Conn::open(&spec.target, &spec.handshake).await?),
            };
            pubsub(sub, &wait.subscribe, b"subscribe", &vars, env, &mut out).await?;
            // As Redisson: retry once subscribed, then between retries wait
            // for the unlock message, or the holder's TTL at most.
            loop {
                answer = call(&mut conn, env, spec, acquire, &vars, &mut out, stats).await?;
                let Some(ttl) = answer.integer else { break };
                let longest = Duration::from_millis(if ttl > 0 { ttl.min(LONGEST_WAIT_MS) } else { LONGEST_WAIT_MS } as u64);
                if let Ok(Err(e)) = tokio::time::timeout(longest, wait_message(sub)).await {
                    return Err(e);
                }
            }
            pubsub(sub, &wait.unsubscribe, b"unsubscribe", &vars, env, &mut out).await?;
        }
        shared.completed.fetch_add(1, Ordering::Relaxed);
        if answer.error.is_some() {
            continue;
        }
        if !answer.nil {
            stats.borrow_mut().unexpected(|| format!("reply to lock-acquire: {answer:?}"));
            continue;
        }
        let Some(unlock) = plan.steps[acquire].next else { continue };
        let released = call(&mut conn, env, spec, unlock, &vars, &mut out, stats).await?;
        if released.error.is_some() {
            continue;
        }
        if !matches!(released.integer, Some(0 | 1)) {
            stats.borrow_mut().unexpected(|| format!("reply to lock-unlock: {released:?}"));
            continue;
        }
        if let Some(after) = plan.steps[unlock].after {
            call(&mut conn, env, spec, after, &vars, &mut out, stats).await?;
        }
        stats.borrow_mut().finished(started, Instant::now(), contended);
    }
}

/// Sends one step, answering NOSCRIPT with SCRIPT LOAD and a retry; an
/// error reply is counted and returned.
async fn call(
    conn: &mut Conn,
    env: &mut ClientEnv,
    spec: &RunSpec,
    step: usize,
    vars: &Vars,
    out: &mut Vec<u8>,
    stats: &RefCell<Stats>,
) -> Result<super::conn::Answer, BenchError> {
    let step = &spec.plan.steps[step];
    out.clear();
    step.command.render(vars, &mut env.rng, &mut env.scratch, out);
    conn.write(out).await?;
    let mut answer = conn.reply().await?;
    stats.borrow_mut().commands += 1;
    if spec.evalsha
        && let Some(script) = step.script
        && answer.error.as_deref().is_some_and(|e| e.starts_with("NOSCRIPT"))
    {
        stats.borrow_mut().noscript_reloads += 1;
        conn.write(&spec.plan.scripts[script].load).await?;
        if let Some(error) = conn.reply().await?.error {
            stats.borrow_mut().error(error.as_bytes());
        }
        conn.write(out).await?;
        answer = conn.reply().await?;
        stats.borrow_mut().commands += 2;
    }
    if let Some(error) = &answer.error {
        stats.borrow_mut().error(error.as_bytes());
    }
    Ok(answer)
}

/// SUBSCRIBE or UNSUBSCRIBE, reading until its confirmation (`kind`);
/// messages before it are dropped.
async fn pubsub(
    sub: &mut Conn,
    command: &super::template::CommandTemplate,
    kind: &[u8],
    vars: &Vars,
    env: &mut ClientEnv,
    out: &mut Vec<u8>,
) -> Result<(), BenchError> {
    out.clear();
    command.render(vars, &mut env.rng, &mut env.scratch, out);
    sub.write(out).await?;
    loop {
        let answer = sub.reply().await?;
        if let Some(error) = answer.error {
            return Err(BenchError(format!("{}: {error}", String::from_utf8_lossy(kind).to_uppercase())));
        }
        if answer.first.as_deref() == Some(kind) {
            return Ok(());
        }
    }
}

/// Waits for the next pub/sub message on `sub`.
async fn wait_message(sub: &mut Conn) -> Result<(), BenchError> {
    loop {
        if sub.reply().await?.first.as_deref() == Some(b"message") {
            return Ok(());
        }
    }
}
