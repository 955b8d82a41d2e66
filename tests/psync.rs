//! Partial resynchronization (PSYNC): the master's backlog, a replica's
//! cached master, and the second replication ID after a failover. The
//! master's answers to a hand-made replica are compared with a real
//! redis-server's byte for byte (replication IDs aside); the rest runs
//! keylock with redis-server replicas and masters and checks both sides'
//! counters and data.

mod common;
use common::*;
use std::io::{BufRead, Read};

fn field(r: &mut Raw, section: &str, name: &str) -> String {
    info_value(r, section, name)
}

/// Replication IDs (40 hex digits) replaced by `<id>`.
fn without_ids(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let mut out = String::new();
    let mut run = String::new();
    for ch in text.chars() {
        if ch.is_ascii_hexdigit() && ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            run.push(ch);
            continue;
        }
        out.push_str(if run.len() == 40 { "<id>" } else { &run });
        run.clear();
        out.push(ch);
    }
    out.push_str(if run.len() == 40 { "<id>" } else { &run });
    out
}

/// The first line of a reply (without CRLF).
fn line(r: &mut Raw) -> String {
    let mut l = String::new();
    assert_ne!(r.reader.read_line(&mut l).unwrap(), 0, "the connection closed");
    l.trim_end().to_string()
}

/// A replica made by hand: `PSYNC replid offset` (after `REPLCONF capa
/// psync2` when `psync2`), and the first line of the answer.
fn psync(addr: std::net::SocketAddr, psync2: bool, replid: &str, offset: &str) -> (Raw, String) {
    let mut r = Raw::connect(addr);
    if psync2 {
        assert_eq!(r.call(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
    }
    r.send_cmd(&[b"PSYNC", replid.as_bytes(), offset.as_bytes()]);
    let first = line(&mut r);
    (r, first)
}

/// Reads a snapshot: `$<length>` and the file, or (from a diskless
/// master) `$EOF:<mark>` and the file up to the mark. The newlines a
/// master sends as keep-alives while its snapshot is being made (Redis's
/// replication cron does, once a second) come first and are skipped, as
/// a replica skips them. Returns the header line.
fn skip_snapshot(r: &mut Raw) -> String {
    let mut header = line(r);
    while header.is_empty() {
        header = line(r);
    }
    let size = header.strip_prefix('$').unwrap_or_else(|| panic!("a snapshot, not {header:?}"));
    if let Some(mark) = size.strip_prefix("EOF:") {
        let mut rdb = Vec::new();
        while !rdb.ends_with(mark.as_bytes()) {
            let mut byte = [0];
            r.reader.read_exact(&mut byte).unwrap();
            rdb.push(byte[0]);
        }
        return header;
    }
    let mut rdb = vec![0; size.parse().unwrap()];
    r.reader.read_exact(&mut rdb).unwrap();
    header
}

/// What a master answers a replica made by hand: a full synchronization,
/// the stream, a partial one after the link is lost (with and without
/// the psync2 capability), one past the end, one of another history, one
/// with a bad offset; the counters and backlog fields after them.
fn master_scenario(addr: std::net::SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = Raw::connect(addr);
    c.call(&["SET", "a", "1"]);
    let (mut r1, full) = psync(addr, true, "?", "-1");
    out.push(without_ids(full.as_bytes()));
    let (replid, offset) = {
        let mut words = full.split(' ').skip(1);
        (words.next().unwrap().to_string(), words.next().unwrap().parse::<u64>().unwrap())
    };
    skip_snapshot(&mut r1);
    c.call(&["SET", "b", "2"]);
    c.call(&["SET", "c", "3"]);
    let mut stream = Vec::new();
    for _ in 0..3 {
        stream.extend(r1.reply());
    }
    out.push(without_ids(&stream));
    drop(r1);
    // Written while no replica is connected: the backlog keeps it.
    c.call(&["SET", "d", "4"]);
    let next = (offset + stream.len() as u64 + 1).to_string();
    let (mut r2, cont) = psync(addr, true, &replid, &next);
    out.push(without_ids(cont.as_bytes()));
    out.push(without_ids(&r2.reply()));
    let (mut r3, cont) = psync(addr, false, &replid, &next);
    out.push(cont);
    out.push(without_ids(&r3.reply()));
    let past = (offset + 10_000).to_string();
    out.push(without_ids(psync(addr, true, &replid, &past).1.as_bytes()));
    out.push(without_ids(
        psync(addr, true, "0123456789012345678901234567890123456789", &next).1.as_bytes(),
    ));
    out.push(psync(addr, true, &replid, "x").1);
    for name in ["sync_full", "sync_partial_ok", "sync_partial_err"] {
        out.push(format!("{name}:{}", field(&mut c, "stats", name)));
    }
    for name in ["repl_backlog_active", "repl_backlog_first_byte_offset"] {
        out.push(format!("{name}:{}", field(&mut c, "replication", name)));
    }
    let histlen = field(&mut c, "replication", "repl_backlog_histlen");
    out.push(format!(
        "histlen is the offset: {}",
        histlen == field(&mut c, "replication", "master_repl_offset")
    ));
    out
}

#[test]
fn a_replica_continues_from_the_backlog_as_redis_server_lets_it() {
    let Some(ours) = same_on_both_masters(master_scenario) else {
        return;
    };
    // What the comparison rests on.
    assert_eq!(ours[0], "+FULLRESYNC <id> 0");
    assert_eq!(ours[2], "+CONTINUE <id>");
    assert_eq!(ours[3], text(encode(&[b"SET", b"d", b"4"])));
    assert_eq!(ours[4], "+CONTINUE");
    assert_eq!(ours[5], ours[3]);
    assert!(ours[6].starts_with("+FULLRESYNC") && ours[7].starts_with("+FULLRESYNC"), "{ours:?}");
    assert_eq!(ours[9..12], ["sync_full:3", "sync_partial_ok:2", "sync_partial_err:2"]);
}

#[test]
fn a_redis_server_replica_continues_after_its_link_to_keylock_breaks() {
    let s = start();
    let mut m = Raw::connect(s.addr());
    m.call(&["SET", "a", "1"]);
    let first_id = field(&mut m, "replication", "master_replid");
    let Some(replica) = real_redis_with(&["--replicaof", "127.0.0.1", &s.addr().port().to_string()]) else {
        return;
    };
    let mut r = Raw::connect(replica.addr);
    wait_link_up(&mut r);
    // The backlog came with the first replica, and a new history with it.
    assert_eq!(field(&mut m, "replication", "repl_backlog_active"), "1");
    let replid = field(&mut m, "replication", "master_replid");
    assert_ne!(replid, first_id);
    assert_eq!(field(&mut r, "replication", "master_replid"), replid);
    // The stream's database is 2 when the link breaks, and stays so: what
    // is written meanwhile comes from the backlog with no SELECT before it.
    m.call(&["SELECT", "2"]);
    m.call(&["SET", "in2", "x"]);
    wait_offsets_equal(&mut m, &mut r);
    assert_eq!(m.call(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    m.call(&["SET", "missed", "y"]);
    m.call(&["HSET", "h", "f", "v"]);
    wait_until(20, "the replica continues", || field(&mut m, "stats", "sync_partial_ok") == "1");
    wait_link_up(&mut r);
    wait_offsets_equal(&mut m, &mut r);
    assert_eq!(field(&mut m, "stats", "sync_full"), "1");
    assert_eq!(field(&mut m, "stats", "sync_partial_err"), "0");
    r.call(&["SELECT", "2"]);
    assert_eq!(r.call(&["GET", "missed"]), b"$1\r\ny\r\n");
    assert_eq!(r.call(&["HGET", "h", "f"]), b"$1\r\nv\r\n");
    m.call(&["SET", "after", "z"]);
    wait_offsets_equal(&mut m, &mut r);
    assert_eq!(r.call(&["GET", "after"]), b"$1\r\nz\r\n");
}

#[test]
fn what_the_backlog_no_longer_holds_takes_a_full_resynchronization() {
    let s = start();
    let mut m = Raw::connect(s.addr());
    // Raised to Redis's least, 16 kB.
    assert_eq!(m.call(&["CONFIG", "SET", "repl-backlog-size", "1"]), b"+OK\r\n");
    let Some(replica) = real_redis_with(&["--replicaof", "127.0.0.1", &s.addr().port().to_string()]) else {
        return;
    };
    let mut r = Raw::connect(replica.addr);
    wait_link_up(&mut r);
    let big = "v".repeat(20_000);
    // The replica reconnects from its cron, a second at most later: the
    // writes are in before it asks.
    m.send(
        &[
            encode(&[b"CLIENT", b"KILL", b"TYPE", b"replica"]),
            encode(&[b"SET", b"big1", big.as_bytes()]),
            encode(&[b"SET", b"big2", big.as_bytes()]),
        ]
        .concat(),
    );
    for _ in 0..3 {
        m.reply();
    }
    assert_eq!(field(&mut m, "replication", "repl_backlog_histlen"), "16384");
    wait_until(20, "the replica synchronizes again", || field(&mut m, "stats", "sync_full") == "2");
    assert_eq!(field(&mut m, "stats", "sync_partial_err"), "1");
    assert_eq!(field(&mut m, "stats", "sync_partial_ok"), "0");
    wait_link_up(&mut r);
    wait_offsets_equal(&mut m, &mut r);
    assert_eq!(r.call(&["STRLEN", "big2"]), b":20000\r\n");
}

#[test]
fn after_a_failover_the_other_replica_and_the_old_master_continue_with_the_new_master() {
    // A keylock master, a keylock replica to promote, and a redis-server
    // replica that moves to it.
    let a = start();
    let b = start();
    let mut ca = Raw::connect(a.addr());
    let mut cb = Raw::connect(b.addr());
    let Some(redis) = real_redis_with(&[]) else { return };
    let mut cr = Raw::connect(redis.addr);
    replicaof(&mut cb, a.addr());
    replicaof(&mut cr, a.addr());
    wait_link_up(&mut cb);
    wait_link_up(&mut cr);
    ca.call(&["SET", "k", "1"]);
    wait_offsets_equal(&mut ca, &mut cb);
    wait_offsets_equal(&mut ca, &mut cr);
    let old_id = field(&mut ca, "replication", "master_replid");
    let offset: i64 = field(&mut ca, "replication", "master_repl_offset").parse().unwrap();

    assert_eq!(cb.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(field(&mut cb, "replication", "master_replid2"), old_id);
    assert_eq!(field(&mut cb, "replication", "second_repl_offset"), (offset + 1).to_string());
    let new_id = field(&mut cb, "replication", "master_replid");

    // The redis-server replica continues by the second ID.
    replicaof(&mut cr, b.addr());
    wait_until(20, "the redis-server replica continues", || {
        field(&mut cb, "stats", "sync_partial_ok") == "1"
    });
    wait_link_up(&mut cr);
    assert_eq!(field(&mut cb, "stats", "sync_full"), "0");
    assert_eq!(field(&mut cr, "replication", "master_replid"), new_id);
    assert_eq!(field(&mut cr, "replication", "master_replid2"), old_id);

    // The old master continues with its own history.
    replicaof(&mut ca, b.addr());
    wait_until(20, "the old master continues", || field(&mut cb, "stats", "sync_partial_ok") == "2");
    wait_link_up(&mut ca);
    assert_eq!(field(&mut cb, "stats", "sync_full"), "0");
    assert_eq!(field(&mut ca, "replication", "master_replid"), new_id);
    assert_eq!(field(&mut ca, "replication", "master_replid2"), old_id);

    cb.call(&["SELECT", "4"]);
    cb.call(&["SET", "after", "2"]);
    wait_offsets_equal(&mut cb, &mut ca);
    wait_offsets_equal(&mut cb, &mut cr);
    for c in [&mut ca, &mut cr] {
        assert_eq!(c.call(&["GET", "k"]), b"$1\r\n1\r\n");
        c.call(&["SELECT", "4"]);
        assert_eq!(c.call(&["GET", "after"]), b"$1\r\n2\r\n");
    }
}

#[test]
fn keylock_continues_with_a_promoted_redis_server_replica() {
    let Some(master) = real_redis_with(&[]) else { return };
    let Some(other) = real_redis_with(&[]) else { return };
    let mut m = Raw::connect(master.addr);
    let mut o = Raw::connect(other.addr);
    let s = start();
    let mut k = Raw::connect(s.addr());
    replicaof(&mut k, master.addr);
    replicaof(&mut o, master.addr);
    wait_link_up(&mut k);
    wait_link_up(&mut o);
    m.call(&["SET", "k", "1"]);
    wait_offsets_equal(&mut m, &mut k);
    wait_offsets_equal(&mut m, &mut o);
    let old_id = field(&mut m, "replication", "master_replid");
    assert_eq!(field(&mut k, "replication", "repl_backlog_active"), "1");

    assert_eq!(o.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    let new_id = field(&mut o, "replication", "master_replid");
    replicaof(&mut k, other.addr);
    wait_until(20, "keylock continues", || field(&mut o, "stats", "sync_partial_ok") == "1");
    wait_link_up(&mut k);
    assert_eq!(field(&mut o, "stats", "sync_full"), "0");
    assert_eq!(field(&mut k, "replication", "master_replid"), new_id);
    assert_eq!(field(&mut k, "replication", "master_replid2"), old_id);
    o.call(&["SET", "after", "2"]);
    wait_offsets_equal(&mut o, &mut k);
    assert_eq!(k.call(&["GET", "k"]), b"$1\r\n1\r\n");
    assert_eq!(k.call(&["GET", "after"]), b"$1\r\n2\r\n");
}

#[test]
fn the_backlog_of_a_master_without_replicas_goes_after_repl_backlog_ttl() {
    let s = start();
    let mut m = Raw::connect(s.addr());
    assert_eq!(m.call(&["CONFIG", "SET", "repl-backlog-ttl", "5"]), b"+OK\r\n");
    let (mut r, full) = psync(s.addr(), true, "?", "-1");
    assert!(full.starts_with("+FULLRESYNC"), "{full}");
    skip_snapshot(&mut r);
    let replid = field(&mut m, "replication", "master_replid");
    drop(r);
    wait_until(10, "the replica is gone", || {
        field(&mut m, "replication", "connected_slaves") == "0"
    });
    // Kept while the time to live runs.
    assert_eq!(field(&mut m, "replication", "repl_backlog_active"), "1");
    m.call(&["KEYLOCK", "CLOCK", "ADVANCE", "7000"]);
    wait_until(10, "the backlog is freed", || {
        field(&mut m, "replication", "repl_backlog_active") == "0"
    });
    // With it goes the history: a new replication ID, nothing to continue.
    assert_ne!(field(&mut m, "replication", "master_replid"), replid);
    let (_r, answer) = psync(s.addr(), true, &replid, "1");
    assert!(answer.starts_with("+FULLRESYNC"), "{answer}");
}

/// keylock on `port`, keeping its snapshot in `dir`, killed on drop.
fn keylock_on(dir: &std::path::Path, port: u16) -> Killed {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args(["--port", &port.to_string(), "--dir", dir.to_str().unwrap()])
        .args(["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    wait_until(10, "keylock answers", || answers_ping(addr));
    Killed(child)
}

#[test]
fn a_master_restarted_from_its_snapshot_lets_its_replica_continue() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let k = keylock_on(dir.path(), port);
    let mut m = Raw::connect(addr);
    m.call(&["SET", "a", "1"]);
    let Some(replica) = real_redis_with(&["--replicaof", "127.0.0.1", &port.to_string()]) else {
        return;
    };
    let mut r = Raw::connect(replica.addr);
    wait_link_up(&mut r);
    // Expired by the time the master loads its snapshot again: the
    // replica, which never expires keys itself, is sent its DEL.
    m.call(&["SET", "short", "x", "PX", "300"]);
    // Past its deadline already when the snapshot is written (active
    // expiry off): the file holds it too, as redis-server's does, and the
    // restarted master drops it and sends its DEL as well.
    assert_eq!(m.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    m.call(&["SET", "gone", "x", "PX", "50"]);
    m.call(&["SELECT", "1"]);
    m.call(&["SET", "b", "2"]);
    wait_offsets_equal(&mut m, &mut r);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let id = field(&mut m, "replication", "master_replid");
    let offset: u64 = field(&mut m, "replication", "master_repl_offset").parse().unwrap();
    // The snapshot tells the history it is at.
    assert_eq!(m.call(&["SAVE"]), b"+OK\r\n");
    drop(m);
    drop(k);
    std::thread::sleep(std::time::Duration::from_millis(400));

    let _k = keylock_on(dir.path(), port);
    let mut m = Raw::connect(addr);
    assert_eq!(field(&mut m, "persistence", "rdb_last_load_keys_expired"), "2");
    assert_eq!(field(&mut m, "replication", "master_replid2"), id);
    assert_eq!(field(&mut m, "replication", "second_repl_offset"), (offset + 1).to_string());
    assert_eq!(field(&mut m, "replication", "repl_backlog_active"), "1");
    wait_until(20, "the replica continues", || field(&mut m, "stats", "sync_partial_ok") == "1");
    assert_eq!(field(&mut m, "stats", "sync_full"), "0");
    wait_link_up(&mut r);
    m.call(&["SELECT", "1"]);
    m.call(&["SET", "c", "3"]);
    wait_offsets_equal(&mut m, &mut r);
    r.call(&["SELECT", "1"]);
    assert_eq!(r.call(&["MGET", "b", "c"]), b"*2\r\n$1\r\n2\r\n$1\r\n3\r\n");
    r.call(&["SELECT", "0"]);
    assert_eq!(r.call(&["DBSIZE"]), b":1\r\n");
}

#[test]
fn a_replica_restarted_from_its_snapshot_continues_with_its_master() {
    let Some(master) = real_redis_with(&[]) else { return };
    let mut m = Raw::connect(master.addr);
    let master_port = master.addr.port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let k = keylock_in_dir(dir.path(), &[]);
    let mut c = Raw::connect(k.addr);
    replicaof(&mut c, master.addr);
    wait_link_up(&mut c);
    m.call(&["SELECT", "5"]);
    m.call(&["SET", "x", "1"]);
    wait_offsets_equal(&mut m, &mut c);
    assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    drop(c);
    drop(k);
    // Written while the replica is down, in the stream's database.
    m.call(&["SET", "y", "2"]);

    let k = keylock_in_dir(dir.path(), &["--replicaof", "127.0.0.1", &master_port]);
    let mut c = Raw::connect(k.addr);
    wait_link_up(&mut c);
    assert_eq!(field(&mut m, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut m, "stats", "sync_full"), "1");
    wait_offsets_equal(&mut m, &mut c);
    c.call(&["SELECT", "5"]);
    assert_eq!(c.call(&["MGET", "x", "y"]), b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
}

/// The `state=` of replica `i` in INFO replication.
fn replica_state(c: &mut Raw, i: usize) -> String {
    let line = field(c, "replication", &format!("slave{i}"));
    line.split(',').find_map(|kv| kv.strip_prefix("state=")).unwrap_or("?").to_string()
}

/// Two replicas ask for a full synchronization within
/// `repl-diskless-sync-delay` of each other: what each gets, and what the
/// master shows meanwhile.
fn delayed_sync_scenario(addr: std::net::SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = Raw::connect(addr);
    c.call(&["SET", "a", "1"]);
    assert_eq!(c.call(&["CONFIG", "SET", "repl-diskless-sync-delay", "2"]), b"+OK\r\n");
    let forks: u64 = field(&mut c, "stats", "total_forks").parse().unwrap();
    let mut replicas: Vec<Raw> = (0..2)
        .map(|_| {
            let mut r = Raw::connect(addr);
            assert_eq!(r.call(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
            r.send_cmd(&[b"PSYNC", b"?", b"-1"]);
            r
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Both wait for the child, counted and listed, unanswered.
    out.push(format!("connected_slaves:{}", field(&mut c, "replication", "connected_slaves")));
    out.push(format!("waiting: {} {}", replica_state(&mut c, 0), replica_state(&mut c, 1)));
    out.push(format!(
        "rdb_bgsave_in_progress:{}",
        field(&mut c, "persistence", "rdb_bgsave_in_progress")
    ));
    out.push(format!("sync_full:{}", field(&mut c, "stats", "sync_full")));
    for r in &mut replicas {
        // Kept alive with newlines until the child starts.
        let mut newlines = 0;
        let answer = loop {
            match line(r) {
                l if l.is_empty() => newlines += 1,
                l => break l,
            }
        };
        out.push(format!("newlines first: {}", newlines > 0));
        out.push(without_ids(answer.as_bytes()));
        let header = skip_snapshot(r);
        out.push(header.split(':').next().unwrap().to_string());
    }
    // One child wrote both.
    let forked = field(&mut c, "stats", "total_forks").parse::<u64>().unwrap() - forks;
    out.push(format!("forks: {forked}"));
    // Online once the child is done; the stream starts with the first
    // ACK after that (redis-server takes no earlier one).
    wait_until(10, "both replicas online", || {
        replica_state(&mut c, 0) == "online" && replica_state(&mut c, 1) == "online"
    });
    for r in &mut replicas {
        r.send_cmd(&[b"REPLCONF", b"ACK", b"0"]);
    }
    c.call(&["SET", "b", "2"]);
    for r in &mut replicas {
        let stream = [r.reply(), r.reply()].concat();
        out.push(without_ids(&stream));
    }
    out
}

#[test]
fn replicas_that_ask_within_the_diskless_sync_delay_share_one_child_as_on_redis_server() {
    let s = start_with(|c| c.set("repl-ping-replica-period", &["3600"]).unwrap());
    let ours = delayed_sync_scenario(s.addr());
    assert_eq!(
        ours[..4],
        [
            "connected_slaves:2",
            "waiting: wait_bgsave wait_bgsave",
            "rdb_bgsave_in_progress:0",
            "sync_full:2"
        ]
    );
    assert_eq!(ours[4..7], ["newlines first: true", "+FULLRESYNC <id> 0", "$EOF"]);
    assert_eq!(ours[7..10], ours[4..7]);
    assert_eq!(ours[10], "forks: 1");
    let Some(redis) = real_redis_with(&["--repl-ping-replica-period", "3600"]) else {
        return;
    };
    // Past redis-server's first replication cron (see same_on_both_masters).
    assert_eq!(Raw::connect(redis.addr).call(&["PING"]), b"+PONG\r\n");
    assert_eq!(ours, delayed_sync_scenario(redis.addr));
}

/// Two replicas ask for a full synchronization from a master that syncs
/// from disk (though they take `$EOF:`), the second while the background
/// save made for the first runs: what each gets, and what the master
/// shows meanwhile.
fn shared_save_scenario(addr: std::net::SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = Raw::connect(addr);
    for i in 0..5 {
        c.call(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(c.call(&["CONFIG", "SET", "save", ""]), b"+OK\r\n");
    assert_eq!(c.call(&["CONFIG", "SET", "repl-diskless-sync", "no"]), b"+OK\r\n");
    // Five keys at 200 ms each: the save takes a second.
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "200000"]), b"+OK\r\n");
    let forks: u64 = field(&mut c, "stats", "total_forks").parse().unwrap();
    let mut first = Raw::connect(addr);
    assert_eq!(first.call(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
    first.send_cmd(&[b"PSYNC", b"?", b"-1"]);
    wait_until(5, "the save for the first replica", || {
        field(&mut c, "persistence", "rdb_bgsave_in_progress") == "1"
    });
    // Served while the child saves; the stream since it forked is held.
    assert_eq!(c.call(&["SET", "during", "1"]), b"+OK\r\n");
    // Only a replica with (at least) the first one's capabilities shares
    // its save, as on redis-server.
    let mut second = Raw::connect(addr);
    assert_eq!(second.call(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
    second.send_cmd(&[b"PSYNC", b"?", b"-1"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    out.push(format!("connected_slaves:{}", field(&mut c, "replication", "connected_slaves")));
    out.push(format!("waiting: {} {}", replica_state(&mut c, 0), replica_state(&mut c, 1)));
    out.push(format!(
        "rdb_bgsave_in_progress:{}",
        field(&mut c, "persistence", "rdb_bgsave_in_progress")
    ));
    out.push(format!("sync_full:{}", field(&mut c, "stats", "sync_full")));
    for r in [&mut first, &mut second] {
        // Both told the offset the one save is of.
        out.push(without_ids(line(r).as_bytes()));
    }
    assert_eq!(c.call(&["SET", "after", "2"]), b"+OK\r\n");
    for r in [&mut first, &mut second] {
        // The file, then the stream at once: SELECT, and the writes
        // since the fork.
        let header = skip_snapshot(r);
        out.push(format!("file: {}", header.starts_with('$') && !header.starts_with("$EOF")));
        let stream = [r.reply(), r.reply(), r.reply()].concat();
        assert_eq!(r.reply(), b"*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n2\r\n");
        out.push(without_ids(&stream));
    }
    let forked = field(&mut c, "stats", "total_forks").parse::<u64>().unwrap() - forks;
    out.push(format!("forks: {forked}"));
    wait_until(5, "both replicas online", || {
        replica_state(&mut c, 0) == "online" && replica_state(&mut c, 1) == "online"
    });
    // The save counts as one: what changed since it forked is left.
    for name in ["rdb_changes_since_last_save", "rdb_last_bgsave_status", "rdb_bgsave_in_progress"] {
        out.push(format!("{name}:{}", field(&mut c, "persistence", name)));
    }
    out
}

#[test]
fn replicas_syncing_from_disk_share_one_background_save_as_on_redis_server() {
    let s = start_with(|c| c.set("repl-ping-replica-period", &["3600"]).unwrap());
    let ours = shared_save_scenario(s.addr());
    assert_eq!(
        ours[..6],
        [
            "connected_slaves:2",
            "waiting: wait_bgsave wait_bgsave",
            "rdb_bgsave_in_progress:1",
            "sync_full:2",
            "+FULLRESYNC <id> 0",
            "+FULLRESYNC <id> 0",
        ]
    );
    // The second replica's arrival puts a SELECT before the next write.
    let stream = "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$6\r\nduring\r\n$1\r\n1\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n";
    assert_eq!(ours[6..10], ["file: true", stream, "file: true", stream]);
    assert_eq!(
        ours[10..],
        [
            "forks: 1",
            "rdb_changes_since_last_save:2",
            "rdb_last_bgsave_status:ok",
            "rdb_bgsave_in_progress:0"
        ]
    );
    let Some(redis) = real_redis_with(&["--repl-ping-replica-period", "3600"]) else {
        return;
    };
    assert_eq!(Raw::connect(redis.addr).call(&["PING"]), b"+PONG\r\n");
    assert_eq!(ours, shared_save_scenario(redis.addr));
}

/// Replicas that wait for a background save made for them leave, with no
/// `save` points and then with one.
fn unneeded_save_scenario(addr: std::net::SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = Raw::connect(addr);
    for i in 0..20 {
        c.call(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(c.call(&["CONFIG", "SET", "repl-diskless-sync", "no"]), b"+OK\r\n");
    // Twenty keys at 100 ms each: the save takes two seconds.
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "100000"]), b"+OK\r\n");
    let in_progress = |c: &mut Raw| field(c, "persistence", "rdb_bgsave_in_progress");
    for save in ["", "900 1"] {
        assert_eq!(c.call(&["CONFIG", "SET", "save", save]), b"+OK\r\n");
        let mut replicas: Vec<Raw> = (0..2)
            .map(|_| {
                let mut r = Raw::connect(addr);
                r.send_cmd(&[b"PSYNC", b"?", b"-1"]);
                // Told at once (the second shares the first's save).
                assert!(line(&mut r).starts_with("+FULLRESYNC"));
                r
            })
            .collect();
        wait_until(5, "both replicas waiting for the save", || {
            in_progress(&mut c) == "1" && replica_state(&mut c, 0) == "wait_bgsave" && replica_state(&mut c, 1) == "wait_bgsave"
        });
        drop(replicas.pop());
        std::thread::sleep(std::time::Duration::from_millis(300));
        out.push(format!("save '{save}', one replica left: in progress {}", in_progress(&mut c)));
        drop(replicas.pop());
        let gone = std::time::Instant::now();
        while in_progress(&mut c) == "1" && gone.elapsed() < std::time::Duration::from_millis(600) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        out.push(format!("save '{save}', none left: in progress {}", in_progress(&mut c)));
        out.push(format!(
            "rdb_last_bgsave_status:{}",
            field(&mut c, "persistence", "rdb_last_bgsave_status")
        ));
        if save.is_empty() {
            continue;
        }
        // The save goes on to its end.
        wait_until(5, "the save's end", || in_progress(&mut c) == "0");
        out.push(format!(
            "changes left: {}",
            field(&mut c, "persistence", "rdb_changes_since_last_save")
        ));
    }
    out
}

#[test]
fn a_save_made_for_replicas_stops_when_the_last_of_them_leaves_unless_save_points_want_it() {
    let s = start();
    let ours = unneeded_save_scenario(s.addr());
    assert_eq!(
        ours,
        [
            "save '', one replica left: in progress 1",
            "save '', none left: in progress 0",
            "rdb_last_bgsave_status:ok",
            "save '900 1', one replica left: in progress 1",
            "save '900 1', none left: in progress 1",
            "rdb_last_bgsave_status:ok",
            "changes left: 0",
        ]
    );
    let Some(redis) = real_redis() else { return };
    assert_eq!(ours, unneeded_save_scenario(redis.addr));
}

#[test]
fn rdb_del_sync_files_removes_the_file_a_disk_based_sync_saved_when_nothing_else_persists() {
    for (settings, kept) in [
        (&["--rdb-del-sync-files", "yes"][..], false),
        (&[], true),
        (&["--rdb-del-sync-files", "yes", "--save", "3600 1"], true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--repl-diskless-sync", "no"];
        args.extend_from_slice(settings);
        let k = keylock_in_dir(dir.path(), &args);
        let mut c = Raw::connect(k.addr);
        c.call(&["SET", "a", "1"]);
        let (mut r, answer) = psync(k.addr, false, "?", "-1");
        assert!(answer.starts_with("+FULLRESYNC"), "{answer}");
        let header = skip_snapshot(&mut r);
        assert!(header.starts_with('$') && !header.starts_with("$EOF"), "{header}");
        let file = dir.path().join("dump.rdb");
        if kept {
            std::thread::sleep(std::time::Duration::from_millis(500));
            assert!(file.exists(), "{settings:?}: the file went");
        } else {
            wait_until(5, "the file to be removed", || !file.exists());
        }
    }
}
