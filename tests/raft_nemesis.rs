//! Lock safety and linearizability of a Raft-replicated shard under
//! faults: three members on loopback, 16 clients running lock cycles
//! (Redisson 4.7.0's acquire script, retried when its reply is lost, and
//! a release of the owner's hold) and, under the lock, a read-modify-write
//! of a fencing counter (GET then SET, which loses updates unless the lock
//! excludes); beside them, four clients writing and reading registers.
//! Meanwhile a nemesis, every few seconds, SIGKILLs and restarts the
//! leader, stops a member, every other time the leader (SIGSTOP /
//! SIGCONT), and cuts one off the others (a proxy in front of its Raft
//! port that drops every connection).
//!
//! Afterwards: no two clients held the lock at once (each hold runs from
//! the acquire's acknowledgement to when the release was sent; a hold
//! taken by an acquire whose reply was lost has no known start and is
//! left to the counter), the counter holds every acknowledged increment
//! (a lost update would show) and no more than were tried, every member
//! has the same counter, and each register's history is linearizable
//! (todc-utils' WGL checker). The run lasts `KEYLOCK_NEMESIS_SECS`
//! seconds (default 40; the README's figures are from 300).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

// ---------------------------------------------------------------- a fallible RESP client

/// A reply, as much as the test needs of it.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Value>>),
}

fn read_value(r: &mut BufReader<TcpStream>) -> std::io::Result<Value> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed"));
    }
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1);
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "bad reply");
    Ok(match kind {
        "+" => Value::Status(rest.to_string()),
        "-" => Value::Error(rest.to_string()),
        ":" => Value::Int(rest.parse().map_err(|_| bad())?),
        "$" => {
            let n: i64 = rest.parse().map_err(|_| bad())?;
            if n < 0 {
                Value::Bulk(None)
            } else {
                let mut buf = vec![0u8; n as usize + 2];
                r.read_exact(&mut buf)?;
                buf.truncate(n as usize);
                Value::Bulk(Some(buf))
            }
        }
        "*" => {
            let n: i64 = rest.parse().map_err(|_| bad())?;
            if n < 0 {
                Value::Array(None)
            } else {
                let mut items = Vec::new();
                for _ in 0..n {
                    items.push(read_value(r)?);
                }
                Value::Array(Some(items))
            }
        }
        _ => return Err(bad()),
    })
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Value> {
        self.writer.write_all(&encode(args))?;
        read_value(&mut self.reader)
    }
}

// ---------------------------------------------------------------- the partition proxy

/// A TCP proxy in front of a member's Raft port; `cut` drops every
/// connection through it and refuses new ones until it is healed.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (c, l) = (cut.clone(), live.clone());
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { continue };
                if c.load(Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                {
                    let mut live = l.lock().unwrap();
                    live.push(inbound.try_clone().unwrap());
                    live.push(outbound.try_clone().unwrap());
                }
                for (mut from, mut to) in [(inbound.try_clone().unwrap(), outbound.try_clone().unwrap()), (outbound, inbound)] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, cut, live }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        if cut {
            for s in self.live.lock().unwrap().drain(..) {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

// ---------------------------------------------------------------- the shard

struct Member {
    id: u64,
    port: u16,
    raft_port: u16,
    dir: tempfile::TempDir,
    members: String,
    child: Option<Killed>,
}

impl Member {
    fn start(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_keylock"))
            .args(["--port", &self.port.to_string(), "--replication", "raft"])
            .args(["--raft-id", &self.id.to_string(), "--raft-members", &self.members])
            .args(["--raft-port", &self.raft_port.to_string()])
            .args(["--raft-snapshot-entries", "2000"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(Killed(child));
        let addr = self.addr();
        wait_until(10, "the member to listen", || TcpStream::connect(addr).is_ok());
    }

    fn addr(&self) -> SocketAddr {
        format!("127.0.0.1:{}", self.port).parse().unwrap()
    }

    fn kill(&mut self) {
        self.child = None;
    }

    fn signal(&self, signal: i32) {
        if let Some(c) = &self.child {
            c.signal(signal);
        }
    }
}

/// The member that says it leads, if one answers.
fn find_leader(addrs: &[SocketAddr]) -> Option<usize> {
    addrs.iter().position(|a| {
        Conn::open(*a)
            .and_then(|mut c| {
                // A paused member does not hold the search up.
                c.writer.set_read_timeout(Some(Duration::from_millis(300)))?;
                c.call(&[b"ROLE"])
            })
            .is_ok_and(|v| matches!(v, Value::Array(Some(ref items)) if items.first() == Some(&Value::Bulk(Some(b"master".to_vec())))))
    })
}

// ---------------------------------------------------------------- the clients

#[derive(Debug, Clone, Copy)]
struct Hold {
    client: usize,
    from: Instant,
    to: Instant,
    /// The acquire that took the lock is known: its reply came. A hold
    /// taken by an acquire whose reply was lost has no known start; the
    /// counter checks it.
    known: bool,
}

#[derive(Default)]
struct Outcome {
    holds: Vec<Hold>,
    /// Fencing increments acknowledged, and tried.
    acked: u64,
    tried: u64,
    /// When writes were acknowledged (for the unavailability windows).
    acks: Vec<Instant>,
}

const LEASE_MS: &str = "10000";

/// Releases the owner's hold, whatever its count (Redisson's unlock
/// takes one count off; a retried acquire may have added two).
const RELEASE: &str = "if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then redis.call('del', KEYS[1]); return 1 end; return 0";

fn client(index: usize, addrs: Vec<SocketAddr>, until: Instant, acquire: String) -> Outcome {
    let owner = format!("6f0c-nemesis:{index}");
    let mut out = Outcome::default();
    let mut conn: Option<Conn> = None;
    let connect = |conn: &mut Option<Conn>| -> bool {
        if conn.is_some() {
            return true;
        }
        if let Some(l) = find_leader(&addrs) {
            *conn = Conn::open(addrs[l]).ok();
        }
        if conn.is_none() {
            std::thread::sleep(Duration::from_millis(50));
        }
        conn.is_some()
    };
    'cycles: while Instant::now() < until {
        // Acquire, until granted. A reply that is lost leaves the outcome
        // open: the acquire is sent again (it is reentrant, so it answers
        // nil if the first one took the lock), and the hold counts from
        // the first sending. Reads do not settle it: the member reached
        // next may be a follower that has not applied the write yet.
        let mut first_unanswered: Option<Instant> = None;
        let (held_since, known) = loop {
            if Instant::now() >= until && first_unanswered.is_none() {
                break 'cycles;
            }
            if Instant::now() >= until + Duration::from_secs(20) {
                break 'cycles;
            }
            if !connect(&mut conn) {
                continue;
            }
            let c = conn.as_mut().unwrap();
            let sent = Instant::now();
            match c.call(&[
                b"EVAL",
                acquire.as_bytes(),
                b"1",
                b"nemesis-lock",
                LEASE_MS.as_bytes(),
                owner.as_bytes(),
            ]) {
                Ok(Value::Bulk(None)) => {
                    out.acks.push(Instant::now());
                    break (Instant::now(), first_unanswered.is_none());
                }
                // Another owner holds it (so the unanswered one did not
                // take it, or took it and it expired).
                Ok(Value::Int(_)) => {
                    first_unanswered = None;
                    std::thread::sleep(Duration::from_millis(2));
                }
                Ok(_) | Err(_) => {
                    conn = None;
                    first_unanswered.get_or_insert(sent);
                }
            }
        };
        // The critical section: read the counter, write it plus one.
        out.tried += 1;
        let mut fenced = false;
        if let Some(c) = conn.as_mut() {
            if let Ok(Value::Bulk(v)) = c.call(&[b"GET", b"fence"]) {
                let n: u64 = v.map_or(0, |b| String::from_utf8_lossy(&b).parse().unwrap_or(0));
                match c.call(&[b"SET", b"fence", (n + 1).to_string().as_bytes()]) {
                    Ok(Value::Status(_)) => {
                        out.acked += 1;
                        out.acks.push(Instant::now());
                        fenced = true;
                    }
                    _ => conn = None,
                }
            } else {
                conn = None;
            }
        }
        let _ = fenced;
        // Release, until acknowledged: the owner's hold is deleted whatever
        // its count (a retried acquire may have counted twice), so a
        // retry is safe.
        let released = Instant::now();
        out.holds.push(Hold {
            client: index,
            from: held_since,
            to: released,
            known,
        });
        loop {
            if Instant::now() >= until + Duration::from_secs(20) {
                break 'cycles;
            }
            if !connect(&mut conn) {
                continue;
            }
            let c = conn.as_mut().unwrap();
            match c.call(&[b"EVAL", RELEASE.as_bytes(), b"1", b"nemesis-lock", owner.as_bytes()]) {
                Ok(Value::Int(_)) | Ok(Value::Bulk(None)) => break,
                _ => conn = None,
            }
        }
    }
    out
}

// ---------------------------------------------------------------- registers, for the linearizability check

/// Registers the register clients write and read.
const REGISTERS: usize = 8;

/// A read that only a writable leader runs: a script without `no-writes`
/// is refused by a member that does not lead (READONLY), and by a
/// leader whose read lease lapsed (MASTERDOWN).
const LEADER_READ: &str = "#!lua\nreturn redis.call('get', KEYS[1])";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum RegisterOp {
    /// What the read returned (None: no such key).
    Read(Option<u64>),
    Write(u64),
}

/// A register's sequential behaviour, for the WGL checker.
struct RegisterSpec;

impl todc_utils::Specification for RegisterSpec {
    type State = Option<u64>;
    type Operation = RegisterOp;

    fn init() -> Option<u64> {
        None
    }

    fn apply(op: &RegisterOp, state: &Option<u64>) -> (bool, Option<u64>) {
        match op {
            RegisterOp::Read(v) => (v == state, *state),
            RegisterOp::Write(v) => (true, Some(*v)),
        }
    }
}

/// One register operation as a client saw it.
#[derive(Debug, Clone, Copy)]
struct Recorded {
    client: usize,
    register: usize,
    called: Instant,
    op: RegisterOp,
    /// When the reply came; None: the outcome is unknown (a write whose
    /// reply was lost may or may not have been made).
    returned: Option<Instant>,
}

/// Writes unique values to and reads the registers, one operation at a
/// time, recording each with its call and reply times. A read or a write
/// refused (READONLY, MASTERDOWN…) had no effect and is not recorded; a
/// write whose reply was lost is recorded with an unknown outcome.
///
/// Each waits 300 ms for a reply. A sticky client (`sticky`), as one
/// configured with one server's address, then connects to the same
/// member again, and leaves it only when told it does not lead (or it
/// does not accept): a paused leader that wakes up deposed has its
/// requests waiting, sent after writes the new leader acknowledged.
fn register_client(index: usize, addrs: Vec<SocketAddr>, until: Instant, sticky: bool) -> Vec<Recorded> {
    let mut out = Vec::new();
    let mut conn: Option<Conn> = None;
    let mut member: Option<usize> = None;
    let mut seq = 0u64;
    let mut rng = fastrand::Rng::with_seed(index as u64);
    while Instant::now() < until {
        if conn.is_none() {
            if !sticky || member.is_none() {
                member = find_leader(&addrs);
            }
            conn = member.and_then(|m| Conn::open(addrs[m]).ok());
            match conn.as_ref() {
                Some(c) => c.writer.set_read_timeout(Some(Duration::from_millis(300))).unwrap(),
                None => {
                    member = None;
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            }
        }
        let c = conn.as_mut().unwrap();
        let register = rng.usize(..REGISTERS);
        let key = format!("reg:{register}");
        let called = Instant::now();
        let write = rng.bool().then(|| {
            seq += 1;
            (index as u64 + 1) * 1_000_000 + seq
        });
        let reply = match write {
            Some(value) => c.call(&[b"SET", key.as_bytes(), value.to_string().as_bytes()]),
            None => c.call(&[b"EVAL", LEADER_READ.as_bytes(), b"1", key.as_bytes()]),
        };
        let returned = Instant::now();
        let (op, returned) = match (write, reply) {
            // Refused before it ran: by a member that does not lead, or
            // a leader whose lease lapsed.
            (_, Ok(Value::Error(e))) if e.starts_with("READONLY") || e.starts_with("MASTERDOWN") => {
                conn = None;
                member = None;
                continue;
            }
            (Some(value), Ok(Value::Status(_))) => (RegisterOp::Write(value), Some(returned)),
            // Lost: it may have been made.
            (Some(value), _) => {
                conn = None;
                (RegisterOp::Write(value), None)
            }
            (None, Ok(Value::Bulk(v))) => {
                let v = v.map(|b| String::from_utf8_lossy(&b).parse().unwrap());
                (RegisterOp::Read(v), Some(returned))
            }
            // A read lost has no effect.
            (None, _) => {
                conn = None;
                continue;
            }
        };
        out.push(Recorded {
            client: index,
            register,
            called,
            op,
            returned,
        });
        std::thread::sleep(Duration::from_millis(4));
    }
    out
}

/// Whether one register's history is linearizable. A client whose
/// operation's outcome is unknown goes on as a new process (its
/// operation's reply is placed after everything: it may take effect at
/// any point after its call, or never be seen).
fn register_linearizable(ops: &[Recorded]) -> bool {
    use todc_utils::Action::{Call, Response};
    let mut ops: Vec<Recorded> = ops.to_vec();
    ops.sort_by_key(|r| r.called);
    let mut process_of: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let mut next_process = 0;
    let end = ops
        .iter()
        .filter_map(|r| r.returned)
        .chain(ops.iter().map(|r| r.called))
        .max()
        .unwrap()
        + Duration::from_secs(1);
    // (time, calls before replies at the same instant, process, action)
    let mut events: Vec<(Instant, u8, usize, todc_utils::Action<RegisterOp>)> = Vec::new();
    for r in &ops {
        let process = *process_of.entry(r.client).or_insert_with(|| {
            next_process += 1;
            next_process - 1
        });
        let call = match r.op {
            RegisterOp::Read(_) => RegisterOp::Read(None),
            w => w,
        };
        events.push((r.called, 0, process, Call(call)));
        events.push((r.returned.unwrap_or(end), 1, process, Response(r.op)));
        if r.returned.is_none() {
            process_of.remove(&r.client);
        }
    }
    events.sort_by_key(|e| (e.0, e.1));
    let history = todc_utils::History::from_actions(events.into_iter().map(|(_, _, p, a)| (p, a)).collect());
    todc_utils::WGLChecker::<RegisterSpec>::is_linearizable(history)
}

#[test]
fn the_register_check_finds_a_stale_read() {
    let t = Instant::now();
    let at = |ms: u64| t + Duration::from_millis(ms);
    let op = |client, called, returned: Option<u64>, op| Recorded {
        client,
        register: 0,
        called: at(called),
        op,
        returned: returned.map(at),
    };
    // A write acknowledged, then a read that misses it: not linearizable.
    let stale = [
        op(0, 0, Some(10), RegisterOp::Write(1)),
        op(1, 20, Some(30), RegisterOp::Read(None)),
    ];
    assert!(!register_linearizable(&stale));
    // Overlapping, the read may come first.
    let overlapping = [op(0, 0, Some(10), RegisterOp::Write(1)), op(1, 5, Some(30), RegisterOp::Read(None))];
    assert!(register_linearizable(&overlapping));
    // A write whose reply was lost may have been made, or not; the
    // client goes on.
    let lost = [
        op(0, 0, None, RegisterOp::Write(1)),
        op(0, 20, Some(30), RegisterOp::Write(2)),
        op(1, 40, Some(50), RegisterOp::Read(Some(2))),
        op(1, 60, Some(70), RegisterOp::Read(Some(1))),
    ];
    assert!(register_linearizable(&lost));
    let lost_then_read_back = [
        op(0, 0, None, RegisterOp::Write(1)),
        op(1, 40, Some(50), RegisterOp::Read(Some(1))),
        op(1, 60, Some(70), RegisterOp::Read(None)),
    ];
    assert!(!register_linearizable(&lost_then_read_back));
}

#[test]
fn locks_stay_exclusive_and_acknowledged_writes_stay_under_a_nemesis() {
    let secs: u64 = std::env::var("KEYLOCK_NEMESIS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let proxies: Vec<Proxy> = ports.iter().map(|(_, raft)| Proxy::start(*raft)).collect();
    let list = (0..3)
        .map(|i| format!("{}=127.0.0.1:{}:{}", i + 1, ports[i].0, proxies[i].port))
        .collect::<Vec<_>>()
        .join(" ");
    let mut members: Vec<Member> = dirs
        .into_iter()
        .enumerate()
        .map(|(i, dir)| Member {
            id: i as u64 + 1,
            port: ports[i].0,
            raft_port: ports[i].1,
            dir,
            members: list.clone(),
            child: None,
        })
        .collect();
    for m in &mut members {
        m.start();
    }
    let addrs: Vec<SocketAddr> = members.iter().map(Member::addr).collect();
    wait_until(15, "a leader", || find_leader(&addrs).is_some());
    let root = env!("CARGO_MANIFEST_DIR");
    let acquire = std::fs::read_to_string(format!("{root}/lua/redisson/4.7.0/lock-acquire.lua")).unwrap();
    let until = Instant::now() + Duration::from_secs(secs);
    let clients: Vec<_> = (0..16)
        .map(|i| {
            let (addrs, acquire) = (addrs.clone(), acquire.clone());
            std::thread::spawn(move || client(i, addrs, until, acquire))
        })
        .collect();
    let register_clients: Vec<_> = (0..4)
        .map(|i| {
            let addrs = addrs.clone();
            std::thread::spawn(move || register_client(i, addrs, until, i % 2 == 0))
        })
        .collect();
    // The nemesis.
    let mut kills = Vec::new();
    let mut faults = Vec::new();
    let mut round = 0;
    while Instant::now() + Duration::from_secs(5) < until {
        std::thread::sleep(Duration::from_secs(2));
        round += 1;
        match round % 3 {
            1 => {
                if let Some(l) = find_leader(&addrs) {
                    faults.push(format!("kill {}", l + 1));
                    kills.push(Instant::now());
                    members[l].kill();
                    std::thread::sleep(Duration::from_secs(1));
                    members[l].start();
                }
            }
            2 => {
                // Every other time the leader: a leader paused (as by a
                // long GC pause) wakes up deposed, with clients' reads
                // waiting for it.
                let victim = match find_leader(&addrs) {
                    Some(l) if (round / 3) % 2 == 0 => l,
                    _ => (round / 3) % members.len(),
                };
                faults.push(format!("stop {}", victim + 1));
                members[victim].signal(libc::SIGSTOP);
                std::thread::sleep(Duration::from_millis(1500));
                members[victim].signal(libc::SIGCONT);
            }
            _ => {
                let victim = (round / 3 + 1) % members.len();
                faults.push(format!("partition {}", victim + 1));
                proxies[victim].set_cut(true);
                std::thread::sleep(Duration::from_millis(2000));
                proxies[victim].set_cut(false);
            }
        }
    }
    let outcomes: Vec<Outcome> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    // Mutual exclusion.
    let all_holds: usize = outcomes.iter().map(|o| o.holds.len()).sum();
    let mut holds: Vec<Hold> = outcomes.iter().flat_map(|o| o.holds.iter().copied()).filter(|h| h.known).collect();
    holds.sort_by_key(|h| h.from);
    for pair in holds.windows(2) {
        assert!(
            pair[1].from >= pair[0].to,
            "client {} held the lock from {:?} while client {} held it until {:?}",
            pair[1].client,
            pair[1].from,
            pair[0].client,
            pair[0].to
        );
    }
    // The counter: every acknowledged increment, no more than tried.
    let acked: u64 = outcomes.iter().map(|o| o.acked).sum();
    let tried: u64 = outcomes.iter().map(|o| o.tried).sum();
    wait_until(20, "a leader after the run", || find_leader(&addrs).is_some());
    let l = find_leader(&addrs).unwrap();
    let fence = |i: usize| -> Option<u64> {
        match Conn::open(addrs[i]).ok()?.call(&[b"GET", b"fence"]).ok()? {
            Value::Bulk(Some(b)) => String::from_utf8_lossy(&b).parse().ok(),
            Value::Bulk(None) => Some(0),
            _ => None,
        }
    };
    let counter = fence(l).unwrap();
    assert!(
        counter >= acked && counter <= tried,
        "counter {counter}, acknowledged {acked}, tried {tried}"
    );
    // Every member holds every acknowledged write.
    let deadline = Instant::now() + Duration::from_secs(20);
    while (0..3).any(|i| fence(i) != Some(counter)) {
        if Instant::now() > deadline {
            // What each member holds and knows of the shard, to tell a
            // member behind from one that answers wrongly.
            let views: Vec<String> = (0..3)
                .map(|i| {
                    let raft = Conn::open(addrs[i])
                        .ok()
                        .and_then(|mut c| c.call(&[b"INFO", b"replication"]).ok())
                        .map(|v| format!("{v:?}"))
                        .unwrap_or_default();
                    format!("member {i}: fence {:?}; {raft}", fence(i))
                })
                .collect();
            panic!("not every member has the counter {counter} after 20 s:\n{}", views.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // The unavailability after each leader kill: until the next
    // acknowledged write.
    let mut acks: Vec<Instant> = outcomes.iter().flat_map(|o| o.acks.iter().copied()).collect();
    acks.sort();
    let windows: Vec<u128> = kills
        .iter()
        .filter_map(|k| acks.iter().find(|a| *a > k).map(|a| a.duration_since(*k).as_millis()))
        .collect();
    eprintln!(
        "nemesis {secs} s: faults {faults:?}; {all_holds} holds ({} with a known start), {acked} increments acknowledged of {tried} tried, counter {counter}; unavailable after leader kills (ms): {windows:?}",
        holds.len()
    );
    assert!(holds.len() > 50, "the clients made progress: {} holds", holds.len());
    // Every register's history, writes and leader reads, is linearizable.
    let recorded: Vec<Recorded> = register_clients.into_iter().flat_map(|c| c.join().unwrap()).collect();
    let unknown = recorded.iter().filter(|r| r.returned.is_none()).count();
    let checked = Instant::now();
    for register in 0..REGISTERS {
        let ops: Vec<Recorded> = recorded.iter().filter(|r| r.register == register).copied().collect();
        assert!(!ops.is_empty());
        assert!(
            register_linearizable(&ops),
            "register {register}'s history is not linearizable: {ops:?}"
        );
    }
    eprintln!(
        "registers: {} operations ({unknown} with an unknown outcome) linearizable, checked in {:?}",
        recorded.len(),
        checked.elapsed()
    );
    assert!(recorded.len() > 500, "the register clients made progress: {}", recorded.len());
}
