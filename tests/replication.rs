//! Replication, cluster and AOF commands on keylock, which replicates
//! nothing, has no cluster mode and keeps no AOF: what Redis answers
//! without those features is compared in `corpus/replication.txt` and
//! `corpus/cluster.txt`; here, what keylock answers where Redis would
//! start one of them, and REPLCONF's silent ACK.

mod common;
use common::*;

const NO_REPLICATION: &str =
    "ERR Replication is not supported by this server (keylock): it cannot replicate from a master or serve replicas";

#[test]
fn replicaof_no_one_is_ok_and_a_master_address_is_refused() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(q::<String>(&mut c, &["SLAVEOF", "no", "one"]), "OK");
    assert_eq!(q_err(&mut c, &["REPLICAOF", "127.0.0.1", "6379"]), NO_REPLICATION);
    assert_eq!(q_err(&mut c, &["SLAVEOF", "127.0.0.1", "6379"]), NO_REPLICATION);
    // Still a master.
    let role: Vec<redis::Value> = q(&mut c, &["ROLE"]);
    assert_eq!(redis::from_redis_value::<String>(role[0].clone()).unwrap(), "master");
}

#[test]
fn sync_and_psync_are_refused() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["SYNC"]), NO_REPLICATION);
    assert_eq!(q_err(&mut c, &["PSYNC", "?", "-1"]), NO_REPLICATION);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
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

#[test]
fn bgrewriteaof_is_refused_without_an_aof() {
    let s = start();
    let mut c = conn(&s);
    assert!(q_err(&mut c, &["BGREWRITEAOF"]).starts_with("ERR Background append only file rewriting is not supported"));
}
