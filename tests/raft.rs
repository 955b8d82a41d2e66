//! Raft-replicated shards (`--replication raft`), three keylock
//! processes on loopback: writes reach every member, a write's reply
//! waits until a majority holds it, members that do not lead are
//! read-only replicas, and when the leader is killed a new one is elected
//! that has every acknowledged write — a Redisson lock with its remaining
//! lease among them — while the killed member, restarted, rebuilds its
//! dataset from its own log and catches up.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Member {
    id: u64,
    port: u16,
    dir: std::path::PathBuf,
    members: String,
    child: Option<Child>,
}

impl Member {
    fn addr(&self) -> SocketAddr {
        format!("127.0.0.1:{}", self.port).parse().unwrap()
    }

    fn start(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_keylock"))
            .args(["--port", &self.port.to_string(), "--replication", "raft"])
            .args(["--raft-id", &self.id.to_string(), "--raft-members", &self.members])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--logfile", "keylock.log"])
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let addr = self.addr();
        wait_until(10, "the member to listen", || std::net::TcpStream::connect(addr).is_ok());
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn signal(&self, signal: i32) {
        if let Some(c) = &self.child {
            // SAFETY: signals the child this member owns.
            unsafe { libc::kill(c.id() as i32, signal) };
        }
    }

    fn call(&self, args: &[&str]) -> String {
        text(Raw::connect(self.addr()).call(args))
    }

    fn info(&self, field: &str) -> String {
        let info = self.call(&["INFO", "replication"]);
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .unwrap_or("")
            .trim()
            .to_string()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Shard {
    members: Vec<Member>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Shard {
    fn start() -> Shard {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let list: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (p, r))| format!("{}=127.0.0.1:{p}:{r}", i + 1))
            .collect();
        let list = list.join(" ");
        let mut members: Vec<Member> = (0..3)
            .map(|i| Member {
                id: i as u64 + 1,
                port: ports[i].0,
                dir: dirs[i].path().to_path_buf(),
                members: list.clone(),
                child: None,
            })
            .collect();
        for m in &mut members {
            m.start();
        }
        Shard { members, _dirs: dirs }
    }

    /// The member that leads, once one does, every running member agrees,
    /// and that stays so for half a second.
    fn leader(&self) -> usize {
        let agreed = || -> Option<usize> {
            let running: Vec<usize> = (0..self.members.len()).filter(|&i| self.members[i].child.is_some()).collect();
            let leaders: Vec<usize> = running
                .iter()
                .copied()
                .filter(|&i| self.members[i].info("raft_role") == "leader")
                .collect();
            let [l] = leaders[..] else { return None };
            let named = self.members[l].info("raft_leader");
            running.iter().all(|&i| self.members[i].info("raft_leader") == named).then_some(l)
        };
        let mut found = None;
        wait_until(20, "a leader every member agrees on", || {
            let Some(l) = agreed() else { return false };
            std::thread::sleep(Duration::from_millis(500));
            found = Some(l);
            agreed() == Some(l)
        });
        found.unwrap()
    }
}

#[test]
fn writes_reach_every_member_and_followers_are_read_only_replicas() {
    let shard = Shard::start();
    let l = shard.leader();
    let leader = &shard.members[l];
    assert_eq!(leader.info("role"), "master");
    assert_eq!(leader.call(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(leader.call(&["INCRBY", "n", "5"]), ":5\r\n");
    assert_eq!(leader.call(&["SET", "lease", "x", "PX", "60000"]), "+OK\r\n");
    for (i, m) in shard.members.iter().enumerate() {
        wait_until(5, "the member to apply the writes", || m.call(&["GET", "n"]) == "$1\r\n5\r\n");
        assert_eq!(m.call(&["GET", "k"]), "$1\r\nv\r\n");
        let ttl: i64 = m.call(&["PTTL", "lease"]).trim_start_matches(':').trim().parse().unwrap();
        assert!((50_000..=60_000).contains(&ttl), "{ttl}");
        if i != l {
            assert_eq!(m.info("role"), "slave");
            assert_eq!(
                m.call(&["SET", "k", "w"]),
                "-READONLY You can't write against a read only replica.\r\n"
            );
            // A script's write is refused where it is made.
            let reply = m.call(&["EVAL", "return redis.call('set', KEYS[1], 'w')", "1", "k"]);
            assert!(
                reply.starts_with("-READONLY You can't write against a read only replica."),
                "{reply}"
            );
            // Reads are served.
            assert_eq!(m.call(&["EVAL", "return redis.call('get', KEYS[1])", "1", "k"]), "$1\r\nv\r\n");
        }
    }
}

#[test]
fn a_reply_waits_until_a_majority_holds_the_write() {
    let shard = Shard::start();
    let l = shard.leader();
    let leader = &shard.members[l];
    assert_eq!(leader.call(&["SET", "warm", "1"]), "+OK\r\n");
    let followers: Vec<&Member> = (0..3).filter(|&i| i != l).map(|i| &shard.members[i]).collect();
    for f in &followers {
        f.signal(libc::SIGSTOP);
    }
    let mut c = Raw::connect(leader.addr());
    c.send_cmd(&[b"SET", b"held", b"1"]);
    let _ = c.writer.set_read_timeout(Some(Duration::from_millis(700)));
    let mut byte = [0u8; 1];
    let early = std::io::Read::read(c.reader.get_mut(), &mut byte);
    assert!(early.is_err(), "no reply while no follower can take the entry");
    let started = Instant::now();
    followers[0].signal(libc::SIGCONT);
    let _ = c.writer.set_read_timeout(Some(Duration::from_secs(10)));
    assert_eq!(c.reply(), b"+OK\r\n");
    assert!(started.elapsed() < Duration::from_secs(5));
    followers[1].signal(libc::SIGCONT);
}

/// Redisson 4.7.0's lock acquire script (`RedissonLock.tryLockInnerAsync`).
const LOCK_SCRIPT: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";

#[test]
fn a_new_leader_has_every_acknowledged_write_and_a_killed_member_catches_up() {
    let mut shard = Shard::start();
    let l = shard.leader();
    let lock_body = std::fs::read_to_string(format!("{}/lua/redisson/4.7.0/lock-acquire.lua", env!("CARGO_MANIFEST_DIR"))).unwrap();
    assert_eq!(lock_body.trim_end(), LOCK_SCRIPT);
    {
        let leader = &shard.members[l];
        let mut c = Raw::connect(leader.addr());
        for _ in 0..200 {
            assert_eq!(text(c.call(&["INCR", "acked"])).chars().next(), Some(':'));
        }
        let reply = text(c.call(&["EVAL", &lock_body, "1", "myLock", "30000", "uuid:1"]));
        assert_eq!(reply, "$-1\r\n", "the lock is granted");
    }
    let granted_at = Instant::now();
    shard.members[l].kill();
    let killed_at = Instant::now();
    let n = shard.leader();
    let elected_in = killed_at.elapsed();
    assert_ne!(n, l);
    assert!(elected_in < Duration::from_secs(5), "{elected_in:?}");
    let leader = &shard.members[n];
    assert_eq!(leader.call(&["GET", "acked"]), "$3\r\n200\r\n");
    assert_eq!(leader.call(&["HGET", "myLock", "uuid:1"]), "$1\r\n1\r\n");
    // The lease goes on from when it was granted.
    let pttl: u64 = leader.call(&["PTTL", "myLock"]).trim_start_matches(':').trim().parse().unwrap();
    let held = granted_at.elapsed().as_millis() as u64;
    assert!(
        pttl <= 30_000 - held + 50 && pttl + 2_000 >= 30_000 - held,
        "pttl {pttl}, held {held}"
    );
    // Another client does not get it.
    let reply = leader.call(&["EVAL", &lock_body, "1", "myLock", "30000", "uuid:2"]);
    assert!(reply.starts_with(':'), "{reply}");
    assert_eq!(leader.call(&["INCR", "acked"]), ":201\r\n");
    // The killed member comes back with its log and catches up.
    shard.members[l].start();
    let back = &shard.members[l];
    wait_until(10, "the restarted member to catch up", || {
        back.call(&["GET", "acked"]) == "$3\r\n201\r\n"
    });
    assert_eq!(back.call(&["HGET", "myLock", "uuid:1"]), "$1\r\n1\r\n");
    assert_eq!(back.info("raft_role"), "follower");
}
