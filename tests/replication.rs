//! Replication and cluster commands on a keylock master without cluster
//! mode: what Redis answers is compared in `corpus/replication.txt` and
//! `corpus/cluster.txt`; here, a real redis-server replicating from
//! keylock and REPLCONF's silent ACK. keylock as a replica is
//! `tests/replica.rs`.

mod common;
use common::*;

#[test]
fn replicaof_no_one_on_a_master_is_ok_and_changes_nothing() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(q::<String>(&mut c, &["SLAVEOF", "no", "one"]), "OK");
    let role: Vec<redis::Value> = q(&mut c, &["ROLE"]);
    assert_eq!(redis::from_redis_value::<String>(role[0].clone()).unwrap(), "master");
    let info: String = q(&mut c, &["INFO", "replication"]);
    assert!(info.contains("master_replid2:0000000000000000000000000000000000000000"), "{info}");
}

#[test]
fn sync_sends_the_snapshot_then_every_write() {
    let s = start();
    let mut c = conn(&s);
    let _: () = q(&mut c, &["SET", "before", "1"]);
    let mut replica = Raw::connect(s.addr());
    replica.send(b"SYNC\r\n");
    // `$<length>` and the snapshot, with no CRLF after it.
    let mut header = String::new();
    std::io::BufRead::read_line(&mut replica.reader, &mut header).unwrap();
    let len: usize = header.trim().strip_prefix('$').expect("a bulk length").parse().unwrap();
    let mut rdb = vec![0; len];
    std::io::Read::read_exact(&mut replica.reader, &mut rdb).unwrap();
    assert!(rdb.starts_with(b"REDIS0010"));
    let _: () = q(&mut c, &["SET", "after", "2", "EX", "100"]);
    let _: i64 = q(&mut c, &["PUBLISH", "ch", "m"]);
    assert_eq!(replica.reply(), encode(&[b"SELECT", b"0"]));
    let set = replica.reply();
    assert!(String::from_utf8_lossy(&set).starts_with("*5\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n2\r\n$4\r\nPXAT\r\n"));
    assert_eq!(replica.reply(), encode(&[b"PUBLISH", b"ch", b"m"]));
}

#[test]
fn a_redis_server_replica_follows_keylock() {
    let s = start();
    let mut c = conn(&s);
    for i in 0..100 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    let Some(replica) = real_redis_with(&["--replicaof", "127.0.0.1", &s.addr().port().to_string()]) else {
        return;
    };
    let mut r = Raw::connect(replica.addr);
    wait_until(20, "the replica synchronizes", || {
        String::from_utf8_lossy(&r.call(&["INFO", "replication"])).contains("master_link_status:up")
    });
    // Then it follows every write, scripts and the native lock included.
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    let acquire = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");
    let _: redis::Value = q(&mut c, &["EVAL", acquire, "1", "orders", "60000", "owner"]);
    let _: i64 = q(&mut c, &["DEL", "k0"]);
    wait_until(20, "the replica applies the writes", || r.call(&["DBSIZE"]) == b":101\r\n");
    assert_eq!(r.call(&["HGET", "orders", "owner"]), b"$1\r\n1\r\n");
    assert_eq!(r.call(&["GET", "k99"]), b"$2\r\n99\r\n");
    assert_eq!(r.call(&["HGET", "h", "f"]), b"$1\r\nv\r\n");
    assert_eq!(r.call(&["EXISTS", "k0"]), b":0\r\n");
}

#[test]
fn a_redis_server_replica_gets_what_keylock_wrote_while_a_child_made_its_snapshot() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    for i in 0..1500 {
        c.call(&["SET", &format!("k{i}"), &i.to_string()]);
    }
    // 1500 keys at 2 ms: the child writes for 3 s, from `$EOF:` to the
    // mark, as Redis's diskless sync does.
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "2000"]), b"+OK\r\n");
    let Some(replica) = real_redis_with(&["--replicaof", "127.0.0.1", &s.addr().port().to_string()]) else {
        return;
    };
    wait_until(10, "the snapshot's child to start", || {
        info_value(&mut c, "persistence", "rdb_bgsave_in_progress") == "1"
    });
    assert_eq!(c.call(&["SET", "during", "1"]), b"+OK\r\n");
    assert_eq!(c.call(&["DEL", "k0"]), b":1\r\n");
    assert_eq!(info_value(&mut c, "persistence", "rdb_bgsave_in_progress"), "1");
    let mut r = Raw::connect(replica.addr);
    wait_until(20, "the replica synchronizes", || {
        info_value(&mut r, "replication", "master_link_status") == "up"
    });
    wait_until(10, "the replica applies the writes", || r.call(&["EXISTS", "during"]) == b":1\r\n");
    assert_eq!(r.call(&["DBSIZE"]), b":1500\r\n");
    assert_eq!(r.call(&["EXISTS", "k0"]), b":0\r\n");
    assert_eq!(r.call(&["GET", "k1499"]), b"$4\r\n1499\r\n");
}

#[test]
fn debug_populate_adds_keys_on_the_master_only_as_redis_servers_does() {
    let s = start_with(|c| c.set("enable-debug-command", &["yes"]).unwrap());
    let mut c = Raw::connect(s.addr());
    let Some(replica) = real_redis_with(&["--replicaof", "127.0.0.1", &s.addr().port().to_string()]) else {
        return;
    };
    let mut r = Raw::connect(replica.addr);
    wait_until(20, "the replica synchronizes", || {
        info_value(&mut r, "replication", "master_link_status") == "up"
    });
    let changes = info_value(&mut c, "persistence", "rdb_changes_since_last_save");
    assert_eq!(c.call(&["DEBUG", "POPULATE", "10"]), b"+OK\r\n");
    assert_eq!(info_value(&mut c, "persistence", "rdb_changes_since_last_save"), changes);
    assert_eq!(c.call(&["SET", "after", "1"]), b"+OK\r\n");
    wait_until(10, "the replica applies the write", || r.call(&["EXISTS", "after"]) == b":1\r\n");
    assert_eq!(c.call(&["DBSIZE"]), b":11\r\n");
    assert_eq!(r.call(&["DBSIZE"]), b":1\r\n");
}

#[test]
fn replconf_ack_and_getack_reply_nothing_to_a_client() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    raw.send_cmd(&[b"REPLCONF", b"ACK", b"10"]);
    raw.send_cmd(&[b"REPLCONF", b"GETACK", b"*"]);
    raw.send_cmd(&[b"PING"]);
    assert_eq!(raw.reply(), b"+PONG\r\n");
    assert_eq!(raw.call(&["REPLCONF", "capa", "psync2"]), b"+OK\r\n");
}

#[test]
fn cluster_commands_say_cluster_support_is_disabled() {
    let s = start();
    let mut c = conn(&s);
    for cmd in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "KEYSLOT", "k"],
        &["ASKING"],
    ] {
        assert_eq!(q_err(&mut c, cmd), "ERR This instance has cluster support disabled");
    }
}
