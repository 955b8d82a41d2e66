//! Differential proof that native scripts are indistinguishable from Lua.
//!
//! Two in-process servers share one manual clock: `native` (the default,
//! `native-scripts yes`) and `lua` (`native-scripts no`, every script in
//! the VM). For each recognized script, proptest generates states (absent
//! keys, own lock with hold counts, foreign owners, malformed counts,
//! wrong types at every key, keys with TTLs some of which the clock then
//! passes, unlock latches holding numbers and non-numbers) and arguments
//! (good, missing, malformed, command names in any case, unknown or
//! refused commands), sent by EVALSHA, EVAL and their _RO forms in a
//! random database, from a RESP2 or a RESP3 client. Both servers get the same case, and these must be
//! equal byte for byte:
//! - the script's raw reply;
//! - a full keyspace dump: SCAN, then TYPE, PTTL and the type's read for
//!   every key;
//! - every pub/sub message a `PSUBSCRIBE *` + `SSUBSCRIBE` client got;
//! - every MONITOR line (timestamps dropped, client addresses named);
//! - the EXEC reply of a client that WATCHed one of the keys;
//!   and once per test, INFO commandstats (without timings), errorstats,
//!   total_commands_processed and keyspace hits/misses. INFO keylock proves the native side really
//!   ran natively and the Lua side in the VM.
//!
//! Servers and connections are reused across cases (FLUSHALL between);
//! `PROPTEST_CASES` overrides the 2,000 cases per script.
//! `families.rs` holds the lock and read-write lock strategies that several
//! test files share.

#![allow(dead_code)]

mod families;

pub use crate::common::*;
#[allow(unused_imports)]
pub use families::*;

pub use keylock::Clock;
pub use proptest::prelude::*;
pub use proptest::sample::Index;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};

pub const START_MS: u64 = 1_700_000_000_000;
pub const CASES: u32 = 2000;

pub const OWN: &str = "5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:1";
pub const OWN_OTHER_THREAD: &str = "5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:2";
pub const FOREIGN: &str = "8e2d1c0b-7a6f-4e5d-8c4b-3a2918070605:57";
pub const LOCK: &str = "lk";
pub const LOCK2: &str = "{lk}:2";
pub const LOCK3: &str = "other";
pub const CHANNEL: &str = "redisson_lock__channel:{lk}";
pub const LATCH: &str = "redisson_unlock_latch:{lk}:7a3e";
/// Channels the subscriber also SSUBSCRIBEs to (`PSUBSCRIBE *` sees
/// only PUBLISH): every channel a case may SPUBLISH to.
pub const SHARD_CHANNELS: &[&str] = &[
    CHANNEL,
    LOCK,
    LOCK2,
    RW_CHANNEL,
    "redisson_lock__channel:{fl}:5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:1",
    "redisson_lock__channel:{fl}:5f0c7a5e-4d1b-4c8e-9a3f-0a1b2c3d4e5f:2",
    "redisson_lock__channel:{fl}:8e2d1c0b-7a6f-4e5d-8c4b-3a2918070605:57",
    "redisson_lock__channel:{fl}:c0ffee00-1111-4222-8333-444455556666:3",
    "redisson_lock__channel:{fl}:",
    "redisson_sc:{sem}",
    "redisson_countdownlatch__channel__{cdl}",
];
pub const CASE_END: &str = "__case_end__";
pub const RW: &str = "rw";
pub const RW2: &str = "rw2";
pub const RW_CHANNEL: &str = "redisson_rwlock:{rw}";
pub const RW_PREFIX: &str = "{rw}";
pub const RW2_PREFIX: &str = "{rw2}";
pub const RW_LATCH: &str = "redisson_unlock_latch:{rw}:9f1c";

// ---------------------------------------------------------------------------
// Bytes that print readably when a comparison fails.

#[derive(Clone, PartialEq, Eq)]
pub struct B(pub Vec<u8>);

impl std::fmt::Debug for B {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s: String = self.0.iter().flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect();
        write!(f, "\"{s}\"")
    }
}

/// A minimal RESP2 reading of a raw reply, for the dump's SCAN and TYPE.
pub fn parse(raw: &[u8]) -> (Vec<Vec<u8>>, usize) {
    // Returns the bulk strings of a (possibly nested) array and bytes used.
    let line_end = raw.windows(2).position(|w| w == b"\r\n").unwrap();
    let head = std::str::from_utf8(&raw[1..line_end]).unwrap();
    let mut used = line_end + 2;
    match raw[0] {
        b'$' => {
            let n: i64 = head.parse().unwrap();
            if n < 0 {
                return (vec![], used);
            }
            let n = n as usize;
            let s = raw[used..used + n].to_vec();
            (vec![s], used + n + 2)
        }
        b'*' => {
            let n: i64 = head.parse().unwrap();
            let mut out = Vec::new();
            for _ in 0..n.max(0) {
                let (items, len) = parse(&raw[used..]);
                out.extend(items);
                used += len;
            }
            (out, used)
        }
        _ => (vec![raw[1..line_end].to_vec()], used),
    }
}

// ---------------------------------------------------------------------------
// One server with its clients.

pub struct Node {
    pub server: ServerHandle,
    pub cmd: Raw,
    /// Runs the script for cases that call it from a RESP3 client.
    pub resp3: Raw,
    pub watcher: Raw,
    pub monitor: Raw,
    pub sub: Raw,
    /// Client addresses as MONITOR shows them, and the role to print instead.
    pub roles: Vec<(String, &'static str)>,
}

pub fn encode_all(cmds: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(|a| a.as_slice()).collect();
        out.extend(encode(&args));
    }
    out
}

pub fn cmd(args: &[&[u8]]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.to_vec()).collect()
}

impl Node {
    pub fn start(clock: &Clock, native: bool) -> Node {
        let clock = clock.clone();
        let server = start_with(move |c| {
            c.clock = clock;
            if !native {
                c.directives.push(("native-scripts".into(), vec!["no".into()]));
            }
        });
        let mut sub = Raw::connect(server.addr());
        sub.send_cmd(&[b"PSUBSCRIBE", b"*"]);
        sub.reply();
        let mut ssubscribe: Vec<&[u8]> = vec![b"SSUBSCRIBE"];
        ssubscribe.extend(SHARD_CHANNELS.iter().map(|c| c.as_bytes()));
        sub.send_cmd(&ssubscribe);
        for _ in SHARD_CHANNELS {
            sub.reply();
        }
        let mut monitor = Raw::connect(server.addr());
        assert_eq!(monitor.call(&["MONITOR"]), b"+OK\r\n");
        let cmd = Raw::connect(server.addr());
        let mut resp3 = Raw::connect(server.addr());
        resp3.call(&["HELLO", "3"]);
        let watcher = Raw::connect(server.addr());
        for c in [&cmd, &resp3, &watcher, &monitor, &sub] {
            c.writer.set_nodelay(true).unwrap();
        }
        let roles = vec![
            (cmd.writer.local_addr().unwrap().to_string(), "cmd"),
            (resp3.writer.local_addr().unwrap().to_string(), "resp3"),
            (watcher.writer.local_addr().unwrap().to_string(), "watcher"),
        ];
        Node {
            server,
            cmd,
            resp3,
            watcher,
            monitor,
            sub,
            roles,
        }
    }

    pub fn replies(conn: &mut Raw, n: usize) -> Vec<B> {
        (0..n).map(|_| B(conn.reply())).collect()
    }

    /// A MONITOR line without its timestamp, with the client named by role.
    pub fn monitor_line(&self, raw: &[u8]) -> B {
        let text = String::from_utf8_lossy(raw).into_owned();
        let rest = text.split_once(' ').map(|(_, r)| r).unwrap_or(&text);
        let (origin, args) = rest.split_once("] ").unwrap_or((rest, ""));
        let mut origin = origin.to_string();
        for (addr, role) in &self.roles {
            origin = origin.replace(addr.as_str(), role);
        }
        // The argument bytes stay raw: the line is ASCII by construction.
        let mut out = origin.into_bytes();
        out.extend_from_slice(b"] ");
        out.extend_from_slice(args.as_bytes());
        B(out)
    }
}

/// What one case showed on one server.
#[derive(Debug, PartialEq, Eq)]
pub struct Seen {
    pub setup: Vec<B>,
    pub watch: Vec<B>,
    pub reply: B,
    pub exec: Vec<B>,
    pub dump: Vec<B>,
    pub messages: Vec<B>,
    pub monitor: Vec<B>,
}

#[derive(Debug, Clone, Copy)]
pub enum Mode {
    EvalSha,
    Eval,
    EvalShaRo,
    EvalRo,
}

/// A value to create at a key before the script runs.
#[derive(Debug, Clone)]
pub enum Val {
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(i64, Vec<u8>)>),
}

#[derive(Debug, Clone)]
pub struct KeySpec {
    pub key: String,
    pub val: Option<Val>,
    pub ttl_ms: Option<u64>,
}

#[derive(Clone)]
pub struct Case {
    pub db: u8,
    pub state: Vec<KeySpec>,
    /// Time that passes between setting the state up and the script.
    pub advance_ms: u64,
    pub mode: Mode,
    /// The script is called by a client that said HELLO 3.
    pub resp3: bool,
    pub keys: Vec<Vec<u8>>,
    pub args: Vec<Vec<u8>>,
    pub watch: Index,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = |c: &Vec<Vec<u8>>| c.iter().map(|a| format!("{:?}", B(a.clone()))).collect::<Vec<_>>().join(" ");
        writeln!(f, "Case {{")?;
        for c in self.setup() {
            writeln!(f, "  {}", line(&c))?;
        }
        writeln!(f, "  (clock +{} ms, WATCH index {:?})", self.advance_ms, self.watch)?;
        let protocol = if self.resp3 { " (RESP3)" } else { "" };
        writeln!(f, "  {:?}{protocol} KEYS {} ARGV {}", self.mode, line(&self.keys), line(&self.args))?;
        write!(f, "}}")
    }
}

impl Case {
    pub fn setup(&self) -> Vec<Vec<Vec<u8>>> {
        let mut cmds = vec![cmd(&[b"FLUSHALL"]), cmd(&[b"SELECT", self.db.to_string().as_bytes()])];
        for spec in &self.state {
            let k = spec.key.clone().into_bytes();
            let Some(val) = &spec.val else { continue };
            let mut c = match val {
                Val::Hash(pairs) => {
                    let mut c = vec![b"HSET".to_vec(), k.clone()];
                    for (f, v) in pairs {
                        c.push(f.clone());
                        c.push(v.clone());
                    }
                    c
                }
                Val::Str(v) => vec![b"SET".to_vec(), k.clone(), v.clone()],
                Val::List(items) => [vec![b"RPUSH".to_vec(), k.clone()], items.clone()].concat(),
                Val::Set(items) => [vec![b"SADD".to_vec(), k.clone()], items.clone()].concat(),
                Val::ZSet(items) => {
                    let mut c = vec![b"ZADD".to_vec(), k.clone()];
                    for (s, m) in items {
                        c.push(s.to_string().into_bytes());
                        c.push(m.clone());
                    }
                    c
                }
            };
            cmds.push(std::mem::take(&mut c));
            if let Some(ttl) = spec.ttl_ms {
                cmds.push(vec![b"PEXPIRE".to_vec(), k, ttl.to_string().into_bytes()]);
            }
        }
        cmds
    }

    /// Keys whose WATCH cannot be disturbed by the active expiry cycle:
    /// absent, or alive after the clock moved.
    pub fn watchable(&self) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = self.keys.clone();
        keys.push(s("{lk}:never-set"));
        keys.extend(self.state.iter().map(|s| s.key.as_bytes().to_vec()));
        keys.sort();
        keys.dedup();
        keys.retain(|k| {
            self.state
                .iter()
                .filter(|s| s.key.as_bytes() == k.as_slice() && s.val.is_some())
                .all(|s| s.ttl_ms.is_none_or(|t| t > self.advance_ms))
        });
        keys
    }
}

pub struct Pair {
    pub clock: Clock,
    pub native: Node,
    pub lua: Node,
    pub body: Vec<u8>,
    pub sha: String,
    pub case_no: u64,
}

impl Pair {
    pub fn new(script: &str) -> Pair {
        let clock = Clock::manual(START_MS);
        let body = std::fs::read(format!("{}/lua/redisson/{script}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let sha = sha1_smol::Sha1::from(&body).digest().to_string();
        let mut pair = Pair {
            native: Node::start(&clock, true),
            lua: Node::start(&clock, false),
            clock,
            body,
            sha,
            case_no: 0,
        };
        for node in [&mut pair.native, &mut pair.lua] {
            node.cmd.send_cmd(&[b"SCRIPT", b"LOAD", &pair.body]);
            assert_eq!(node.cmd.reply(), format!("${}\r\n{}\r\n", pair.sha.len(), pair.sha).into_bytes());
        }
        pair
    }

    pub fn script_argv(&self, case: &Case) -> Vec<Vec<u8>> {
        let (name, script): (&[u8], &[u8]) = match case.mode {
            Mode::EvalSha => (b"EVALSHA", self.sha.as_bytes()),
            Mode::Eval => (b"EVAL", &self.body),
            Mode::EvalShaRo => (b"EVALSHA_RO", self.sha.as_bytes()),
            Mode::EvalRo => (b"EVAL_RO", &self.body),
        };
        let mut argv = vec![name.to_vec(), script.to_vec(), case.keys.len().to_string().into_bytes()];
        argv.extend(case.keys.iter().cloned());
        argv.extend(case.args.iter().cloned());
        argv
    }

    /// Runs a case on both servers in lock step and returns what each saw.
    pub fn run(&mut self, case: &Case) -> (Seen, Seen) {
        self.case_no += 1;
        let setup = case.setup();
        let setup_bytes = encode_all(&setup);
        for n in [&mut self.native, &mut self.lua] {
            n.cmd.send(&setup_bytes);
        }
        let setup_seen = [&mut self.native, &mut self.lua].map(|n| Node::replies(&mut n.cmd, setup.len()));
        self.clock.advance(case.advance_ms);

        let watchable = case.watchable();
        let watch_key = case.watch.get(&watchable).clone();
        let watch = encode_all(&[cmd(&[b"SELECT", case.db.to_string().as_bytes()]), cmd(&[b"WATCH", &watch_key])]);
        for n in [&mut self.native, &mut self.lua] {
            n.watcher.send(&watch);
        }
        let watch_seen = [&mut self.native, &mut self.lua].map(|n| Node::replies(&mut n.watcher, 2));

        let reply_seen = if case.resp3 {
            let script = encode_all(&[cmd(&[b"SELECT", case.db.to_string().as_bytes()]), self.script_argv(case)]);
            for n in [&mut self.native, &mut self.lua] {
                n.resp3.send(&script);
            }
            [&mut self.native, &mut self.lua].map(|n| {
                n.resp3.reply();
                B(n.resp3.reply())
            })
        } else {
            let script = encode_all(&[self.script_argv(case)]);
            for n in [&mut self.native, &mut self.lua] {
                n.cmd.send(&script);
            }
            [&mut self.native, &mut self.lua].map(|n| B(n.cmd.reply()))
        };

        let exec = encode_all(&[cmd(&[b"MULTI"]), cmd(&[b"PING"]), cmd(&[b"EXEC"])]);
        for n in [&mut self.native, &mut self.lua] {
            n.watcher.send(&exec);
        }
        let exec_seen = [&mut self.native, &mut self.lua].map(|n| Node::replies(&mut n.watcher, 3));

        let dumps = [&mut self.native, &mut self.lua].map(|n| dump(&mut n.cmd));

        let end = self.case_no.to_string();
        let marker = encode_all(&[
            cmd(&[b"PUBLISH", CASE_END.as_bytes(), end.as_bytes()]),
            cmd(&[b"ECHO", end.as_bytes()]),
        ]);
        let mut seen = Vec::new();
        for (i, n) in [&mut self.native, &mut self.lua].into_iter().enumerate() {
            n.cmd.send(&marker);
            Node::replies(&mut n.cmd, 2);
            let mut messages = Vec::new();
            loop {
                let m = n.sub.reply();
                let (parts, _) = parse(&m);
                if parts.get(2).is_some_and(|c| c == CASE_END.as_bytes()) && parts.get(3).is_some_and(|c| c == end.as_bytes()) {
                    break;
                }
                messages.push(B(m));
            }
            let echo_line = format!("\"ECHO\" \"{end}\"");
            let mut monitor = Vec::new();
            loop {
                let raw = n.monitor.reply();
                let line = n.monitor_line(&raw);
                let done = String::from_utf8_lossy(&line.0).contains(&echo_line);
                monitor.push(line);
                if done {
                    break;
                }
            }
            seen.push(Seen {
                setup: setup_seen[i].clone(),
                watch: watch_seen[i].clone(),
                reply: reply_seen[i].clone(),
                exec: exec_seen[i].clone(),
                dump: dumps[i].clone(),
                messages,
                monitor,
            });
        }
        let lua = seen.pop().unwrap();
        let native = seen.pop().unwrap();
        (native, lua)
    }

    /// The counters both servers must agree on, and each one's script runs.
    pub fn stats(node: &mut Node) -> (Vec<String>, String) {
        let info = |c: &mut Raw, section: &str| -> String {
            let (parts, _) = parse(&c.call(&["INFO", section]));
            String::from_utf8(parts.concat()).unwrap()
        };
        let mut shared = Vec::new();
        for line in info(&mut node.cmd, "commandstats").lines() {
            // cmdstat_x:calls=N,usec=U,usec_per_call=P,rejected_calls=R,failed_calls=F
            shared.push(line.split(',').filter(|f| !f.starts_with("usec")).collect::<Vec<_>>().join(","));
        }
        shared.extend(info(&mut node.cmd, "errorstats").lines().map(str::to_string));
        shared.extend(
            info(&mut node.cmd, "stats")
                .lines()
                .filter(|l| l.starts_with("keyspace_") || l.starts_with("total_error_replies") || l.starts_with("total_commands_processed"))
                .map(str::to_string),
        );
        (shared, info(&mut node.cmd, "keylock"))
    }

    pub fn finish(mut self, script_name: &str) {
        let (native_stats, native_runs) = Pair::stats(&mut self.native);
        let (lua_stats, lua_runs) = Pair::stats(&mut self.lua);
        assert_eq!(native_stats, lua_stats, "INFO counters differ");
        let line = |runs: &str| -> String {
            runs.lines()
                .find(|l| l.starts_with(&format!("script_{script_name}")))
                .unwrap_or_else(|| panic!("no run counter for {script_name} in {runs}"))
                .to_string()
        };
        let (n, l) = (line(&native_runs), line(&lua_runs));
        assert!(n.ends_with(",lua=0") && !n.contains(":native=0,"), "native server: {n}");
        assert!(l.contains(":native=0,") && !l.ends_with(",lua=0"), "lua server: {l}");
        self.native.server.shutdown();
        self.lua.server.shutdown();
    }
}

/// Every key (by SCAN), then TYPE + PTTL of each, then each one's content.
pub fn dump(c: &mut Raw) -> Vec<B> {
    let mut out = Vec::new();
    let mut keys = Vec::new();
    let mut cursor = b"0".to_vec();
    loop {
        c.send_cmd(&[b"SCAN", &cursor, b"COUNT", b"1000"]);
        let raw = c.reply();
        let (parts, _) = parse(&raw);
        cursor = parts[0].clone();
        keys.extend(parts[1..].iter().cloned());
        if cursor == b"0" {
            break;
        }
    }
    // Sorted: SCAN's order depends on when the active expiry cycle removed
    // expired keys, which differs between the two servers.
    keys.sort();
    out.extend(keys.iter().map(|k| B(k.clone())));
    let mut batch = Vec::new();
    for k in &keys {
        batch.push(vec![b"TYPE".to_vec(), k.clone()]);
        batch.push(vec![b"PTTL".to_vec(), k.clone()]);
    }
    c.send(&encode_all(&batch));
    let mut reads = Vec::new();
    for k in &keys {
        let t = c.reply();
        let p = c.reply();
        let read: Vec<&[u8]> = match t.as_slice() {
            b"+string\r\n" => vec![b"GET"],
            b"+hash\r\n" => vec![b"HGETALL"],
            b"+list\r\n" => vec![b"LRANGE", b"0", b"-1"],
            b"+set\r\n" => vec![b"SMEMBERS"],
            b"+zset\r\n" => vec![b"ZRANGE", b"0", b"-1", b"WITHSCORES"],
            _ => vec![b"EXISTS"],
        };
        let mut r: Vec<Vec<u8>> = read.iter().map(|a| a.to_vec()).collect();
        r.insert(1, k.clone());
        reads.push(r);
        out.push(B(t));
        out.push(B(p));
    }
    c.send(&encode_all(&reads));
    for _ in &reads {
        out.push(B(c.reply()));
    }
    out
}

/// Runs `cases` generated cases of `script` through both servers.
pub fn differential(script: &str, strategy: impl Strategy<Value = Case>) {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let pair = std::cell::RefCell::new(Pair::new(script));
    let outcomes = std::cell::RefCell::new(std::collections::BTreeMap::<String, u32>::new());
    let result = runner.run(&strategy, |case| {
        let (native, lua) = pair.borrow_mut().run(&case);
        *outcomes.borrow_mut().entry(outcome(&native.reply.0)).or_default() += 1;
        if native != lua {
            return Err(TestCaseError::fail(format!(
                "native and Lua runs differ\nnative: {native:#?}\nlua:    {lua:#?}"
            )));
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{script}: {e}");
    }
    // What the cases exercised (shown with --nocapture).
    eprintln!("{script}: {cases} cases");
    for (outcome, n) in outcomes.into_inner() {
        eprintln!("  {n:5}  {outcome}");
    }
    let name = script.rsplit('/').next().unwrap().trim_end_matches(".lua");
    let version = script.split('/').next().unwrap();
    pair.into_inner().finish(&format!("{name}@{version}"));
}

/// A reply's kind for the summary: errors without the script's SHA.
pub fn outcome(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    let text = text.split(" script: ").next().unwrap_or_default().trim_end();
    match reply.first() {
        Some(b':') => format!("integer {}", if text == ":0" || text == ":1" { text } else { "other" }),
        Some(b'*') => "array".into(),
        // Bulk strings by length once they are long (ids, timestamps).
        Some(b'$') if text.len() > 16 => format!("{} …", text.lines().next().unwrap_or_default()),
        _ => text.replace("\r\n", " ").chars().take(90).collect(),
    }
}

// ---------------------------------------------------------------------------
// Strategies: states and arguments.

pub fn s(v: &str) -> Vec<u8> {
    v.as_bytes().to_vec()
}

pub fn pick(items: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::sample::select(items).prop_map(s)
}

pub fn owner() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        6 => Just(s(OWN)),
        3 => Just(s(FOREIGN)),
        1 => Just(s(OWN_OTHER_THREAD)),
        1 => Just(s("")),
        1 => proptest::collection::vec(any::<u8>(), 0..5),
    ]
}

pub fn hold_count() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        12 => (1i64..6).prop_map(|n| n.to_string().into_bytes()),
        1 => pick(&["0", "-2", "abc", "1.5", " 3", "9223372036854775807", "-9223372036854775808", ""]),
    ]
}

pub fn lock_hash() -> impl Strategy<Value = Val> + Clone {
    proptest::collection::vec((owner(), hold_count()), 1..4).prop_map(Val::Hash)
}

pub fn wrong_type() -> impl Strategy<Value = Val> + Clone {
    prop_oneof![
        Just(Val::Str(s("x"))),
        Just(Val::Str(s("12"))),
        Just(Val::List(vec![s("a"), s("b")])),
        Just(Val::Set(vec![s("a")])),
        Just(Val::ZSet(vec![(1, s("a"))])),
    ]
}

pub fn ttl() -> impl Strategy<Value = Option<u64>> + Clone {
    prop_oneof![
        3 => Just(None),
        4 => (1u64..120_000).prop_map(Some),
        1 => (1u64..1_000).prop_map(Some),
        // A PTTL past 2^53: a script returning it rounds it through a double.
        1 => Just(Some(9_000_000_000_000_000_123)),
    ]
}

pub fn advance() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![3 => Just(0u64), 2 => 0u64..150_000]
}

pub fn lock_state(key: &'static str) -> impl Strategy<Value = KeySpec> + Clone {
    let val = prop_oneof![
        3 => Just(None),
        6 => lock_hash().prop_map(Some),
        2 => wrong_type().prop_map(Some),
    ];
    (val, ttl()).prop_map(move |(val, ttl_ms)| KeySpec {
        key: key.into(),
        val,
        ttl_ms,
    })
}

/// Numbers as Redis and Lua read them, and strings that are almost numbers.
pub const NUMERIC_TEXTS: &[&str] = &[
    "",
    " 12 ",
    "0x1A",
    "0X",
    "0x",
    "1e3",
    "1e",
    "inf",
    "-inf",
    "infinity",
    "nan",
    "-nan",
    "abc",
    "12\0x",
    "-0",
    "9.9e18",
    "1e400",
    "9223372036854775807",
    "-9223372036854775808",
    "3.99",
    "-3.99",
    "  ",
    "0x1p4",
    "\t7\n",
    "7\x0b",
    "1_000",
    "+5",
    "0b1",
    ".5",
    "5.",
];

pub fn latch_state(key: &'static str) -> impl Strategy<Value = KeySpec> + Clone {
    let val = prop_oneof![
        6 => Just(None),
        2 => pick(&["0", "1"]).prop_map(|v| Some(Val::Str(v))),
        3 => pick(NUMERIC_TEXTS).prop_map(|v| Some(Val::Str(v))),
        1 => Just(Some(Val::Hash(vec![(s("f"), s("1"))]))),
        1 => Just(Some(Val::List(vec![s("1")]))),
    ];
    (val, ttl()).prop_map(move |(val, ttl_ms)| KeySpec {
        key: key.into(),
        val,
        ttl_ms,
    })
}

pub fn lease() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        8 => Just(s("30000")),
        3 => (1u64..200_000).prop_map(|n| n.to_string().into_bytes()),
        1 => pick(&["0", "-5", "abc", "", "9223372036854775807", "9000000000000000000", "1.5", " 100", "100 "]),
    ]
}

pub fn publish_command() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        8 => Just(s("PUBLISH")),
        2 => pick(&["publish", "PuBlIsH"]),
        2 => pick(&["SPUBLISH", "spublish"]),
        2 => pick(&["get", "set", "del", "", "nosuchcommand", "subscribe", "eval", "ping", "hset", "script", "client", "echo", "exists"]),
    ]
}

pub fn mode() -> impl Strategy<Value = Mode> + Clone {
    prop_oneof![
        6 => Just(Mode::EvalSha),
        2 => Just(Mode::Eval),
        1 => Just(Mode::EvalShaRo),
        1 => Just(Mode::EvalRo),
    ]
}

pub fn db() -> impl Strategy<Value = u8> + Clone {
    prop_oneof![4 => Just(0u8), 1 => Just(9u8)]
}

/// Mostly the layout the client sends; sometimes KEYS or ARGV cut short
/// (the script then indexes past the end and passes nil) or extended.
pub fn reshape(mut items: Vec<Vec<u8>>, how: u8) -> Vec<Vec<u8>> {
    match how {
        0 => items.truncate(items.len().saturating_sub(1)),
        1 => items.clear(),
        2 => items.push(s("extra")),
        _ => {}
    }
    items
}

pub fn shape() -> impl Strategy<Value = u8> + Clone {
    prop_oneof![20 => Just(3u8), 1 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)]
}

/// The parts every case has; `f` builds KEYS, ARGV and the state.
#[allow(clippy::type_complexity)]
pub fn case<S: Strategy + Clone>(
    specific: S,
    f: impl Fn(S::Value) -> (Vec<KeySpec>, Vec<Vec<u8>>, Vec<Vec<u8>>) + Clone,
) -> impl Strategy<Value = Case> {
    let protocol = prop_oneof![4 => Just(false), 1 => Just(true)];
    (specific, db(), advance(), mode(), protocol, shape(), shape(), any::<Index>()).prop_map(
        move |(sp, db, advance_ms, mode, resp3, ks, as_, watch)| {
            let (state, keys, args) = f(sp);
            Case {
                db,
                state,
                advance_ms,
                mode,
                resp3,
                keys: reshape(keys, ks),
                args: reshape(args, as_),
                watch,
            }
        },
    )
}
