//! A cluster of Raft-replicated shards (`cluster-enabled yes` with
//! `replication raft`): three shards of three keylock processes each, on
//! loopback. `redis-cli --cluster create` makes the shards' leaders the
//! cluster's masters; their fellow members join the cluster by
//! themselves as the leaders' replicas; followers redirect writes to
//! their leader with `MOVED`; the `redis` crate's cluster client writes
//! across the shards; and when a shard's leader is killed, the member
//! elected in its place takes its slots, once the other shards' leaders
//! voted for it, with a newer configuration epoch,
//! the client follows, every acknowledged write is there, and the killed
//! member, restarted, is a replica of the new leader.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

struct Member {
    port: u16,
    args: Vec<String>,
    dir: tempfile::TempDir,
    child: Option<Killed>,
}

impl Member {
    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn start(&mut self) {
        assert!(self.try_start(), "the member did not start");
    }

    /// Starts the member; false if it exited without listening (a port
    /// of its taken meanwhile, e.g. as the source port of a connection).
    fn try_start(&mut self) -> bool {
        let child = Command::new(env!("CARGO_BIN_EXE_keylock"))
            .args(&self.args)
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--logfile", "keylock.log"])
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(Killed(child));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            if let Some(c) = self.child.as_mut()
                && c.0.try_wait().is_ok_and(|status| status.is_some())
            {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the member did not listen within 10 s");
    }

    fn conn(&self) -> Option<redis::Connection> {
        let client = redis::Client::open(self.url()).ok()?;
        let c = client.get_connection_with_timeout(Duration::from_secs(2)).ok()?;
        c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        Some(c)
    }

    /// A command's reply as text (an error's text too), or "" when the
    /// member does not answer.
    fn call(&self, args: &[&str]) -> String {
        let Some(mut c) = self.conn() else { return String::new() };
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        match cmd.query::<redis::Value>(&mut c) {
            Ok(redis::Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
            Ok(redis::Value::SimpleString(s)) => s,
            Ok(redis::Value::VerbatimString { text, .. }) => text,
            Ok(redis::Value::Int(n)) => n.to_string(),
            Ok(redis::Value::Okay) => "OK".into(),
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
        }
    }

    /// A field of INFO `section`, or of CLUSTER INFO for "cluster".
    fn field(&self, section: &str, name: &str) -> String {
        let text = if section == "cluster" {
            self.call(&["CLUSTER", "INFO"])
        } else {
            self.call(&["INFO", section])
        };
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or("")
            .trim()
            .to_string()
    }

    fn node_id(&self) -> String {
        self.call(&["CLUSTER", "MYID"])
    }

    fn value(&self, args: &[&str]) -> redis::Value {
        let mut c = self.conn().expect("the member answers");
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c).unwrap()
    }
}

/// Every string and integer in a reply, depth first, as text.
fn flat(v: &redis::Value) -> Vec<String> {
    match v {
        redis::Value::BulkString(b) => vec![String::from_utf8_lossy(b).into_owned()],
        redis::Value::SimpleString(s) => vec![s.clone()],
        redis::Value::Int(n) => vec![n.to_string()],
        redis::Value::Array(items) | redis::Value::Set(items) => items.iter().flat_map(flat).collect(),
        redis::Value::Map(pairs) => pairs.iter().flat_map(|(k, v)| [flat(k), flat(v)].concat()).collect(),
        _ => Vec::new(),
    }
}

/// The node that serves `slot` in `m`'s CLUSTER NODES.
fn owner_of(m: &Member, slot: u16) -> Option<String> {
    nodes_of(m).into_iter().find_map(|(id, (_, _, slots))| {
        slots
            .split(' ')
            .any(|r| match r.split_once('-') {
                Some((a, b)) => a.parse::<u16>().is_ok_and(|a| a <= slot) && b.parse::<u16>().is_ok_and(|b| slot <= b),
                None => r.parse::<u16>() == Ok(slot),
            })
            .then_some(id)
    })
}

fn slot_of(m: &Member, key: &str) -> u16 {
    m.call(&["CLUSTER", "KEYSLOT", key]).parse().unwrap()
}

/// The CLUSTER NODES lines of `m`, by node id: (flags, master, slots).
fn nodes_of(m: &Member) -> BTreeMap<String, (String, String, String)> {
    m.call(&["CLUSTER", "NODES"])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() >= 8).then(|| (f[0].to_string(), (f[2].to_string(), f[3].to_string(), f[8..].join(" "))))
        })
        .collect()
}

struct Cluster {
    shards: Vec<Vec<Member>>,
}

impl Cluster {
    fn start() -> Cluster {
        let mut shards = Vec::new();
        let mut attempts = 0;
        while shards.len() < 3 {
            // Ports are picked free, then bound by the members: one may be
            // taken in between; the shard then starts again on other ports.
            let ports: Vec<(u16, u16, u16)> = (0..3).map(|_| (free_port(), free_port(), free_port())).collect();
            let list: Vec<String> = ports
                .iter()
                .enumerate()
                .map(|(i, (p, _, r))| format!("{}=127.0.0.1:{p}:{r}", i + 1))
                .collect();
            let list = list.join(" ");
            let mut members: Vec<Member> = ports
                .iter()
                .enumerate()
                .map(|(i, &(port, cport, _))| Member {
                    port,
                    args: [
                        "--port",
                        &port.to_string(),
                        "--cluster-enabled",
                        "yes",
                        "--cluster-port",
                        &cport.to_string(),
                        "--cluster-node-timeout",
                        "3000",
                        "--replication",
                        "raft",
                        "--raft-id",
                        &(i + 1).to_string(),
                        "--raft-members",
                        &list,
                    ]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                    dir: tempfile::tempdir().unwrap(),
                    child: None,
                })
                .collect();
            if members.iter_mut().all(Member::try_start) {
                shards.push(members);
            } else {
                attempts += 1;
                assert!(attempts < 3, "a shard did not start on three sets of ports");
                eprintln!("a member exited at start, starting its shard again");
            }
        }
        Cluster { shards }
    }

    /// The index of the member of shard `s` that leads, once every
    /// running member agrees on one.
    fn leader(&self, s: usize) -> usize {
        let mut found = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut one_leader = || {
            let shard = &self.shards[s];
            let running: Vec<usize> = (0..3).filter(|&i| shard[i].child.is_some()).collect();
            let leaders: Vec<usize> = running
                .iter()
                .copied()
                .filter(|&i| shard[i].field("replication", "raft_role") == "leader")
                .collect();
            let [l] = leaders[..] else { return false };
            let named = shard[l].field("replication", "raft_leader");
            found = l;
            running.iter().all(|&i| shard[i].field("replication", "raft_leader") == named)
        };
        while !one_leader() {
            if Instant::now() > deadline {
                let logs: Vec<String> = self.shards[s]
                    .iter()
                    .map(|m| std::fs::read_to_string(m.dir.path().join("keylock.log")).unwrap_or_default())
                    .collect();
                panic!(
                    "no single leader in shard {s} within 30 s; the members' logs:\n{}",
                    logs.join("\n----\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        found
    }

    fn members(&self) -> impl Iterator<Item = &Member> {
        self.shards.iter().flatten().filter(|m| m.child.is_some())
    }

    /// Waits until every running member sees every shard's leader as the
    /// master of its slots and the other members as its replicas, and
    /// the cluster is ok.
    fn wait_converged(&self, what: &str) {
        let expected: Vec<(String, Vec<String>)> = (0..3)
            .map(|s| {
                let l = self.leader(s);
                let leader = self.shards[s][l].node_id();
                let followers = (0..3)
                    .filter(|&i| i != l && self.shards[s][i].child.is_some())
                    .map(|i| self.shards[s][i].node_id())
                    .collect();
                (leader, followers)
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.members().all(|m| {
            let nodes = nodes_of(m);
            m.field("cluster", "cluster_state") == "ok"
                && nodes.len() == 9
                && expected.iter().all(|(leader, followers)| {
                    nodes
                        .get(leader)
                        .is_some_and(|(flags, _, slots)| flags.contains("master") && !slots.is_empty())
                        && followers.iter().all(|f| {
                            nodes
                                .get(f)
                                .is_some_and(|(flags, master, slots)| flags.contains("slave") && master == leader && slots.is_empty())
                        })
                })
        }) {
            if Instant::now() > deadline {
                let views: Vec<String> = self
                    .members()
                    .map(|m| {
                        format!(
                            "{}:\n{}{}",
                            m.port,
                            m.call(&["CLUSTER", "NODES"]),
                            m.field("cluster", "cluster_state")
                        )
                    })
                    .collect();
                panic!("{what}: expected {expected:?}\n{}", views.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn redis_cli(args: &[String]) -> String {
    let out = Command::new("redis-cli").args(args).output().expect("redis-cli runs");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn redis_cli_found() -> bool {
    let found = Command::new("redis-cli").arg("--version").output().is_ok();
    if !found && std::env::var("KEYLOCK_REQUIRE_REDIS").is_ok_and(|v| v == "1") {
        panic!("redis-cli is required (KEYLOCK_REQUIRE_REDIS=1) but not on PATH");
    }
    found
}

#[test]
fn raft_shards_form_a_cluster_whose_failover_keeps_every_acknowledged_write() {
    if !redis_cli_found() {
        return;
    }
    let mut cluster = Cluster::start();
    let leaders: Vec<usize> = (0..3).map(|s| cluster.leader(s)).collect();

    // The leaders are made a cluster as three plain nodes would be.
    let mut args = vec!["--cluster".to_string(), "create".into()];
    args.extend((0..3).map(|s| format!("127.0.0.1:{}", cluster.shards[s][leaders[s]].port)));
    args.extend(["--cluster-replicas".into(), "0".into(), "--cluster-yes".into()]);
    let out = redis_cli(&args);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    // Their fellow members join as their replicas by themselves.
    cluster.wait_converged("every member to join the cluster as its leader's replica");

    let first = &cluster.shards[0][leaders[0]];
    let check = redis_cli(&["--cluster".into(), "check".into(), format!("127.0.0.1:{}", first.port)]);
    assert!(check.contains("[OK] All nodes agree about slots configuration."), "{check}");
    assert!(check.contains("[OK] All 16384 slots covered."), "{check}");
    assert_eq!(check.matches("2 additional replica(s)").count(), 3, "{check}");

    // CLUSTER SLOTS lists each range's master, then its two replicas;
    // SHARDS each shard's three nodes with their roles.
    let redis::Value::Array(ranges) = first.value(&["CLUSTER", "SLOTS"]) else {
        panic!()
    };
    assert_eq!(ranges.len(), 3);
    for range in &ranges {
        let redis::Value::Array(items) = range else { panic!() };
        assert_eq!(items.len(), 5, "{range:?}");
        let ports: Vec<String> = items[2..].iter().map(|n| flat(n)[1].clone()).collect();
        let shard = cluster
            .shards
            .iter()
            .position(|s| s.iter().any(|m| m.port.to_string() == ports[0]))
            .unwrap();
        let mut expected: Vec<String> = cluster.shards[shard].iter().map(|m| m.port.to_string()).collect();
        let mut got = ports.clone();
        expected.sort();
        got.sort();
        assert_eq!(got, expected);
        assert_eq!(ports[0], cluster.shards[shard][leaders[shard]].port.to_string());
    }
    let shards = flat(&first.value(&["CLUSTER", "SHARDS"]));
    assert_eq!(shards.iter().filter(|s| *s == "replica").count(), 6, "{shards:?}");
    assert_eq!(shards.iter().filter(|s| *s == "master").count(), 3, "{shards:?}");

    // A follower sends writes, and reads unless READONLY, to its leader.
    let (leader0, follower0) = (&cluster.shards[0][leaders[0]], &cluster.shards[0][(leaders[0] + 1) % 3]);
    let leader0_id = leader0.node_id();
    let key = (0..)
        .map(|i| format!("key:{i}"))
        .find(|k| owner_of(first, slot_of(first, k)).as_deref() == Some(leader0_id.as_str()))
        .unwrap();
    let slot = slot_of(first, &key);
    assert_eq!(
        follower0.call(&["SET", &key, "v"]),
        format!("MOVED {slot} 127.0.0.1:{}", leader0.port)
    );
    assert_eq!(leader0.call(&["SET", &key, "v"]), "OK");
    assert_eq!(follower0.call(&["GET", &key]), format!("MOVED {slot} 127.0.0.1:{}", leader0.port));
    {
        let mut c = follower0.conn().unwrap();
        let _: () = redis::cmd("READONLY").query(&mut c).unwrap();
        wait_until(5, "the follower to apply the write", || {
            redis::cmd("GET")
                .arg(&key)
                .query::<Option<String>>(&mut c)
                .ok()
                .flatten()
                .as_deref()
                == Some("v")
        });
        let e = redis::cmd("SET").arg(&key).arg("w").query::<()>(&mut c).unwrap_err();
        assert_eq!(e.code(), Some("MOVED"), "{e}");
    }
    // It replicates the leader its shard elected, and no other node.
    assert_eq!(follower0.call(&["CLUSTER", "REPLICATE", &leader0_id]), "OK");
    let other = cluster.shards[1][leaders[1]].node_id();
    assert!(
        follower0
            .call(&["CLUSTER", "REPLICATE", &other])
            .starts_with("ERR This node is a member of a Raft shard")
    );

    // The cluster client writes across the shards.
    let urls: Vec<String> = cluster.members().map(|m| m.url()).collect();
    let client = redis::cluster::ClusterClientBuilder::new(urls)
        .retries(0)
        .connection_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let mut acked: Vec<String> = Vec::new();
    let mut conn = client.get_connection().unwrap();
    for i in 0..300 {
        let k = format!("w:{i}");
        let _: () = redis::cmd("SET").arg(&k).arg(i).query(&mut conn).unwrap();
        acked.push(k);
    }

    // A slot of shard 1 taken by shard 2's leader with a newer epoch (an
    // operator's SETSLOT NODE and BUMPEPOCH, no migration): shard 1's
    // leader drops the slot's keys as Redis does, through the log, so
    // that its followers drop them too.
    let (leader1, leader2) = (&cluster.shards[1][leaders[1]], &cluster.shards[2][leaders[2]]);
    let (leader1_id, leader2_id) = (leader1.node_id(), leader2.node_id());
    let taken = acked
        .iter()
        .map(|k| slot_of(first, k))
        .find(|&s| owner_of(first, s).as_deref() == Some(leader1_id.as_str()))
        .unwrap();
    let in_taken = |m: &Member| m.call(&["CLUSTER", "COUNTKEYSINSLOT", &taken.to_string()]);
    for m in &cluster.shards[1] {
        wait_until(5, "shard 1's members to hold the slot's keys", || in_taken(m) != "0");
    }
    // Its epoch is made the greatest first (`STILL` when it already was):
    // a claim with a lesser epoch than the owner's would be taken back by
    // the owner's next ping, as in Redis.
    let bumped = leader2.call(&["CLUSTER", "BUMPEPOCH"]);
    assert!(bumped.starts_with("BUMPED") || bumped.starts_with("STILL"), "{bumped}");
    let epoch = |m: &Member| m.field("cluster", "cluster_my_epoch").parse::<u64>().unwrap();
    assert!(epoch(leader2) > epoch(leader1));
    assert_eq!(leader2.call(&["CLUSTER", "SETSLOT", &taken.to_string(), "NODE", &leader2_id]), "OK");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(owner_of(leader1, taken).as_deref() == Some(leader2_id.as_str()) && cluster.shards[1].iter().all(|m| in_taken(m) == "0")) {
        // Keys of a slot lost just as the shard's leader changed stay
        // behind by design (a machine this loaded can see an election).
        if cluster.shards[1][leaders[1]].field("replication", "raft_role") != "leader" {
            eprintln!("shard 1's leader changed during the claim: its keys stay, as documented");
            break;
        }
        if Instant::now() >= deadline {
            for m in &cluster.shards[1] {
                let log = std::fs::read_to_string(m.dir.path().join("keylock.log")).unwrap_or_default();
                eprintln!(
                    "member {}: role {}, owner {:?}, keys {}, epoch {}\n{}",
                    m.port,
                    m.field("replication", "raft_role"),
                    owner_of(m, taken),
                    in_taken(m),
                    epoch(m),
                    log
                );
            }
            panic!("shard 1's members did not drop the keys of the slot they lost");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    acked.retain(|k| slot_of(first, k) != taken);

    // The leader of shard 0 dies; writes go on, retried by the client's
    // caller until they are acknowledged.
    let old_epoch: u64 = leader0.field("cluster", "cluster_my_epoch").parse().unwrap();
    let killed = leaders[0];
    cluster.shards[0][killed].child = None;
    let died = Instant::now();
    let mut longest = Duration::ZERO;
    let mut i = 300;
    while died.elapsed() < Duration::from_secs(8) || i < 600 {
        let k = format!("w:{i}");
        let started = Instant::now();
        loop {
            let done = redis::cmd("SET").arg(&k).arg(i).query::<()>(&mut conn);
            if done.is_ok() {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "writes did not resume: {done:?}");
            std::thread::sleep(Duration::from_millis(20));
            if let Ok(c) = client.get_connection() {
                conn = c;
            }
        }
        longest = longest.max(started.elapsed());
        acked.push(k);
        i += 1;
    }
    eprintln!("longest wait of a write across the leader's death: {longest:?}");

    // Another member leads shard 0 and masters its slots, with a newer
    // epoch; every node agrees; nothing acknowledged is missing.
    cluster.wait_converged("the new leader to master the shard's slots everywhere");
    let new_leader = cluster.leader(0);
    assert_ne!(new_leader, killed);
    let new = &cluster.shards[0][new_leader];
    let new_epoch: u64 = new.field("cluster", "cluster_my_epoch").parse().unwrap();
    assert!(new_epoch > old_epoch, "{new_epoch} > {old_epoch}");
    // It took them once the other shards' leaders voted for it.
    let log_of = |m: &Member| std::fs::read_to_string(m.dir.path().join("keylock.log")).unwrap_or_default();
    assert!(log_of(new).contains("Failover election won"), "{}", log_of(new));
    let granted = (1..3)
        .flat_map(|s| cluster.shards[s].iter())
        .filter(|m| log_of(m).contains(&format!("Failover auth granted to {}", new.node_id())))
        .count();
    assert!(granted >= 1, "no master granted a vote");
    for k in &acked {
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut conn).unwrap();
        assert_eq!(v.as_deref(), Some(&k[2..]), "{k}");
    }

    // The killed member comes back as a replica of the new leader, with
    // every write of its shard.
    let new_id = new.node_id();
    cluster.shards[0][killed].start();
    cluster.wait_converged("the restarted member to be a replica of the new leader");
    let back = &cluster.shards[0][killed];
    let mut c = back.conn().unwrap();
    let _: () = redis::cmd("READONLY").query(&mut c).unwrap();
    let nodes = nodes_of(back);
    assert_eq!(nodes[&back.node_id()].1, new_id);
    let mine: Vec<&String> = acked
        .iter()
        .filter(|k| owner_of(back, slot_of(back, k)).as_deref() == Some(new_id.as_str()))
        .collect();
    assert!(mine.len() > 100, "{}", mine.len());
    wait_until(10, "the restarted member to hold its shard's writes", || {
        mine.iter().all(|k| {
            redis::cmd("GET")
                .arg(k.as_str())
                .query::<Option<String>>(&mut c)
                .ok()
                .flatten()
                .is_some()
        })
    });
}
