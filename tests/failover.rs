//! FAILOVER: a master hands its role to a replica (see
//! `engine::failover`). The checks, states and the pause of writes are
//! compared with a real redis-server master, both given the same
//! hand-made replica; then keylock and redis-server fail over to each
//! other, each way round.

mod common;
use common::*;
use std::io::{BufRead, Read};
use std::time::Duration;

fn field(r: &mut Raw, section: &str, name: &str) -> String {
    info_value(r, section, name)
}

/// Whether a reply comes within `wait`.
fn replies_within(r: &mut Raw, wait: Duration) -> bool {
    r.writer.set_read_timeout(Some(wait)).unwrap();
    let got = r.reader.fill_buf().map(|b| !b.is_empty()).unwrap_or(false);
    r.writer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    got
}

/// A replica made by hand, announcing `port`: its full synchronization
/// (`PSYNC ? -1`, the snapshot read), and nothing acknowledged.
fn hand_made_replica(addr: std::net::SocketAddr, port: u16) -> Raw {
    let mut replica = Raw::connect(addr);
    assert_eq!(replica.call(&["REPLCONF", "listening-port", &port.to_string()]), b"+OK\r\n");
    replica.send(&encode(&[b"PSYNC", b"?", b"-1"]));
    let mut line = String::new();
    replica.reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("+FULLRESYNC"), "{line}");
    // The newlines a master sends while it prepares the snapshot, then
    // its length.
    while line.trim().is_empty() || line.starts_with('+') {
        line.clear();
        replica.reader.read_line(&mut line).unwrap();
    }
    let len: usize = line.trim().strip_prefix('$').unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
    let mut rdb = vec![0; len];
    replica.reader.read_exact(&mut rdb).unwrap();
    replica
}

/// The same FAILOVER session against a master with one replica that never
/// acknowledges (made by hand, announcing port 1234, where nothing
/// listens): argument and state errors, a wait that times out, a FORCE
/// that goes on to the replica (and stays in progress, since it cannot be
/// reached) and its ABORT; writes are held meanwhile.
fn scenario(addr: std::net::SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = Raw::connect(addr);
    let mut writer = Raw::connect(addr);
    out.push(text(c.call(&["FAILOVER"])));
    let _replica = hand_made_replica(addr, 1234);
    wait_until(10, "the replica is online", || {
        text(c.call(&["INFO", "replication"])).contains("state=online")
    });
    // Something the replica does not acknowledge.
    c.call(&["SET", "a", "1"]);
    for cmd in [
        &["FAILOVER", "TO", "127.0.0.1", "9999"][..],
        &["FAILOVER", "TO", "127.0.0.1", "x"],
        &["FAILOVER", "FORCE"],
        &["FAILOVER", "TO", "127.0.0.1", "1234", "FORCE"],
        &["FAILOVER", "TIMEOUT", "0"],
        &["FAILOVER", "TIMEOUT", "10", "TIMEOUT", "10"],
        &["FAILOVER", "ABORT"],
        &["FAILOVER", "ABORT", "TIMEOUT", "10"],
        &["FAILOVER", "TO", "127.0.0.1", "1234", "TIMEOUT", "400"],
        &["FAILOVER"],
        &["REPLICAOF", "NO", "ONE"],
    ] {
        out.push(format!("{cmd:?} {}", text(c.call(cmd))));
    }
    out.push(field(&mut c, "replication", "master_failover_state"));
    let (_other, refused) = {
        let mut other = Raw::connect(addr);
        let reply = text(other.call(&["PSYNC", "?", "-1"]));
        (other, reply)
    };
    out.push(refused);
    // Writes wait; reads do not.
    writer.send(&encode(&[b"SET", b"held", b"1"]));
    out.push(format!("write held: {}", !replies_within(&mut writer, Duration::from_millis(150))));
    out.push(text(c.call(&["GET", "a"])));
    // The replica never catches up: the wait times out, and the write runs.
    out.push(text(writer.reply()));
    wait_until(5, "the failover times out", || {
        field(&mut c, "replication", "master_failover_state") == "no-failover"
    });
    out.push(field(&mut c, "replication", "role"));

    out.push(text(c.call(&["FAILOVER", "TO", "127.0.0.1", "1234", "FORCE", "TIMEOUT", "200"])));
    wait_until(5, "the forced failover goes on", || {
        field(&mut c, "replication", "master_failover_state") == "failover-in-progress"
    });
    out.push(field(&mut c, "replication", "role"));
    out.push(field(&mut c, "replication", "master_port"));
    out.push(text(c.call(&["FAILOVER", "ABORT"])));
    out.push(field(&mut c, "replication", "master_failover_state"));
    out.push(field(&mut c, "replication", "role"));
    out.push(text(c.call(&["SET", "after", "1"])));
    out
}

#[test]
fn failover_checks_waits_and_aborts_as_redis_server() {
    let Some(ours) = same_on_both_masters(scenario) else { return };
    assert_eq!(ours[12], "waiting-for-sync");
    assert_eq!(ours[13], "-NOMASTERLINK Can't SYNC while failing over\r\n");
    assert_eq!(ours[14], "write held: true");
    assert_eq!(ours[19..21], ["slave", "1234"]);
}

/// A keylock master and a keylock replica of it, the link up, and a
/// connection to each.
fn keylock_and_replica() -> (ServerHandle, ServerHandle, Raw, Raw) {
    let a = start();
    let b = start();
    let ca = Raw::connect(a.addr());
    let mut cb = Raw::connect(b.addr());
    replicaof(&mut cb, a.addr());
    wait_link_up(&mut cb);
    (a, b, ca, cb)
}

#[test]
fn a_keylock_master_fails_over_to_its_keylock_replica() {
    let (_a, b, mut ca, mut cb) = keylock_and_replica();
    ca.call(&["SELECT", "2"]);
    ca.call(&["SET", "k", "1"]);
    wait_offsets_equal(&mut ca, &mut cb);
    let old_id = field(&mut ca, "replication", "master_replid");

    assert_eq!(ca.call(&["FAILOVER"]), b"+OK\r\n");
    wait_until(20, "the replica takes over", || field(&mut cb, "replication", "role") == "master");
    wait_link_up(&mut ca);
    assert_eq!(field(&mut ca, "replication", "master_failover_state"), "no-failover");
    assert_eq!(field(&mut ca, "replication", "master_port"), b.addr().port().to_string());
    // The old master continued with the new one: no snapshot.
    assert_eq!(field(&mut cb, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut cb, "stats", "sync_full"), "0");
    assert_eq!(field(&mut cb, "replication", "master_replid2"), old_id);
    assert_eq!(
        text(ca.call(&["SET", "k", "2"])),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    cb.call(&["SELECT", "2"]);
    cb.call(&["INCR", "k"]);
    wait_offsets_equal(&mut cb, &mut ca);
    assert_eq!(ca.call(&["GET", "k"]), b"$1\r\n2\r\n");
}

#[test]
fn keylock_and_redis_server_fail_over_to_each_other() {
    // keylock hands over to a redis-server replica...
    let k = start();
    let mut ck = Raw::connect(k.addr());
    let Some(redis) = real_redis_with(&[]) else { return };
    let mut cr = Raw::connect(redis.addr);
    replicaof(&mut cr, k.addr());
    wait_link_up(&mut cr);
    ck.call(&["SET", "k", "1"]);
    wait_offsets_equal(&mut ck, &mut cr);
    let to = ["FAILOVER", "TO", "127.0.0.1", &redis.addr.port().to_string()];
    assert_eq!(ck.call(&to), b"+OK\r\n");
    wait_until(20, "redis-server takes over", || field(&mut cr, "replication", "role") == "master");
    wait_link_up(&mut ck);
    assert_eq!(field(&mut cr, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut cr, "stats", "sync_full"), "0");
    cr.call(&["SET", "k", "2"]);
    wait_offsets_equal(&mut cr, &mut ck);
    assert_eq!(ck.call(&["GET", "k"]), b"$1\r\n2\r\n");

    // ...and takes the role back when redis-server hands over to it.
    assert_eq!(cr.call(&["FAILOVER"]), b"+OK\r\n");
    wait_until(20, "keylock takes over", || field(&mut ck, "replication", "role") == "master");
    wait_link_up(&mut cr);
    assert_eq!(field(&mut ck, "stats", "sync_partial_ok"), "1");
    assert_eq!(field(&mut ck, "stats", "sync_full"), "1");
    ck.call(&["SET", "k", "3"]);
    wait_offsets_equal(&mut ck, &mut cr);
    assert_eq!(cr.call(&["GET", "k"]), b"$1\r\n3\r\n");
}

#[test]
fn a_failover_started_in_a_transaction_waits_for_what_the_transaction_wrote() {
    let (_a, _b, mut ca, mut cb) = keylock_and_replica();
    wait_offsets_equal(&mut ca, &mut cb);
    ca.call(&["MULTI"]);
    ca.call(&["SET", "k", "v"]);
    ca.call(&["FAILOVER"]);
    assert_eq!(text(ca.call(&["EXEC"])), "*2\r\n+OK\r\n+OK\r\n");
    wait_until(20, "the replica takes over", || field(&mut cb, "replication", "role") == "master");
    assert_eq!(cb.call(&["GET", "k"]), b"$1\r\nv\r\n");
    wait_link_up(&mut ca);
    assert_eq!(ca.call(&["GET", "k"]), b"$1\r\nv\r\n");
}

/// A target that takes the handshake and closes at PSYNC, and what it was
/// asked.
fn silent_target() -> (u16, std::thread::JoinHandle<Vec<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        answer_replica_handshake(&stream).1
    });
    (port, handle)
}

/// A failover to a replica (made by hand, acknowledging everything) whose
/// address takes the handshake but closes at PSYNC: the master asks
/// `PSYNC … FAILOVER`, gets no answer, and is a master again.
fn unanswered_scenario(addr: std::net::SocketAddr) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = Raw::connect(addr);
    let (port, target) = silent_target();
    let mut replica = hand_made_replica(addr, port);
    c.call(&["SET", "a", "1"]);
    let offset = field(&mut c, "replication", "master_repl_offset");
    replica.send(&encode(&[b"REPLCONF", b"ACK", offset.as_bytes()]));
    out.push(text(c.call(&["FAILOVER", "TO", "127.0.0.1", &port.to_string()])));
    let psync = target.join().unwrap();
    out.push(format!("{} {}", psync[0], psync[3]));
    out.push(format!(
        "offset asked is the master's + 1: {}",
        psync[2] == (offset.parse::<u64>().unwrap() + 1).to_string()
    ));
    wait_until(10, "the failover is aborted", || {
        field(&mut c, "replication", "master_failover_state") == "no-failover"
    });
    out.push(field(&mut c, "replication", "role"));
    out.push(text(c.call(&["SET", "b", "2"])));
    out
}

#[test]
fn a_failover_whose_target_does_not_answer_psync_is_aborted_as_redis_servers() {
    let Some(ours) = same_on_both_masters(unanswered_scenario) else {
        return;
    };
    assert_eq!(
        ours[1..],
        ["PSYNC FAILOVER", "offset asked is the master's + 1: true", "master", "+OK\r\n"]
    );
}
