//! keylock as a replica (REPLICAOF host port): of a real redis-server and
//! of another keylock. Where the answer is Redis's own (refusals, INFO
//! and ROLE fields, what a replica keeps of expired keys, what blocked
//! clients are told), a redis-server replica of the same master is asked
//! the same and the replies compared.

mod common;
use common::*;

/// A field of an INFO reply.
fn field(info: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(info);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .to_string()
}

fn info(r: &mut Raw) -> Vec<u8> {
    r.call(&["INFO", "replication"])
}

fn wait_link_up(r: &mut Raw) {
    wait_until(20, "the replica's link comes up", || field(&info(r), "master_link_status") == "up");
}

/// Waits until the replica has applied everything the master sent.
fn wait_offsets_equal(master: &mut Raw, replica: &mut Raw) {
    wait_until(20, "the replica reaches the master's offset", || {
        field(&info(master), "master_repl_offset") == field(&info(replica), "master_repl_offset")
    });
}

fn redis_master() -> Option<RealRedis> {
    real_redis_with(&["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"])
}

fn replicaof(r: &mut Raw, addr: std::net::SocketAddr) {
    assert_eq!(r.call(&["REPLICAOF", "127.0.0.1", &addr.port().to_string()]), b"+OK\r\n");
}

#[test]
fn keylock_follows_a_redis_server_master_as_a_redis_server_replica_does() {
    let Some(master) = redis_master() else { return };
    let mut m = Raw::connect(master.addr);
    m.call(&["MSET", "a", "1", "b", "2"]);
    m.call(&["HSET", "h", "f", "v"]);
    m.call(&["SET", "ttl", "x", "EX", "1000"]);
    m.call(&["SELECT", "3"]);
    m.call(&["SADD", "s3", "x", "y"]);
    m.call(&["SELECT", "0"]);
    m.call(&["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function{function_name='f', callback=function() return 7 end, flags={'no-writes'}}\nredis.register_function('w', function() return redis.call('set', 'x', '1') end)"]);

    let s = start();
    let mut k = Raw::connect(s.addr());
    let Some(twin) = real_redis_with(&[]) else { return };
    let mut t = Raw::connect(twin.addr);
    replicaof(&mut k, master.addr);
    replicaof(&mut t, master.addr);
    wait_link_up(&mut k);
    wait_link_up(&mut t);

    // The snapshot: every database, deadlines and functions.
    assert_eq!(k.call(&["MGET", "a", "b"]), b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    assert_eq!(k.call(&["HGET", "h", "f"]), b"$1\r\nv\r\n");
    assert!(k.call(&["TTL", "ttl"]) != b":-1\r\n");
    assert_eq!(k.call(&["FCALL_RO", "f", "0"]), b":7\r\n");
    k.call(&["SELECT", "3"]);
    assert_eq!(k.call(&["SCARD", "s3"]), b":2\r\n");
    k.call(&["SELECT", "0"]);

    // Then the stream: plain writes, a transaction, a script, other
    // databases, relative expiries.
    m.call(&["INCR", "a"]);
    m.call(&["MULTI"]);
    m.call(&["LPUSH", "l", "x"]);
    m.call(&["RPUSH", "l", "y"]);
    m.call(&["EXEC"]);
    m.call(&["EVAL", "redis.call('set', 'from-script', 'yes') return 1", "0"]);
    m.call(&["EXPIRE", "b", "500"]);
    m.call(&["SELECT", "5"]);
    m.call(&["SET", "in5", "5"]);
    wait_offsets_equal(&mut m, &mut k);
    wait_offsets_equal(&mut m, &mut t);
    assert_eq!(k.call(&["GET", "a"]), b"$1\r\n2\r\n");
    assert_eq!(k.call(&["LRANGE", "l", "0", "-1"]), b"*2\r\n$1\r\nx\r\n$1\r\ny\r\n");
    assert_eq!(k.call(&["GET", "from-script"]), b"$3\r\nyes\r\n");
    assert!(matches!(&k.call(&["TTL", "b"])[..], b":500\r\n" | b":499\r\n"));
    k.call(&["SELECT", "5"]);
    assert_eq!(k.call(&["GET", "in5"]), b"$1\r\n5\r\n");
    k.call(&["SELECT", "0"]);

    // What a replica refuses, and how it describes itself, as redis-server.
    for cmd in [
        &["SET", "x", "1"][..],
        &["EVAL", "return redis.call('set', 'x', '1')", "0"],
        &["EVAL", "#!lua\nreturn 1", "0"],
        &["FCALL", "w", "0"],
        &["FCALL_RO", "w", "0"],
        &["FCALL", "f", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'a')", "0"],
        &["EVAL", "return redis.call('get', 'a')", "0"],
        &["WAIT", "0", "0"],
        &["REPLICAOF", "127.0.0.1", &master.addr.port().to_string()],
    ] {
        assert_eq!(
            String::from_utf8_lossy(&k.call(cmd)),
            String::from_utf8_lossy(&t.call(cmd)),
            "{cmd:?}"
        );
    }
    let (ki, ti) = (info(&mut k), info(&mut t));
    for name in [
        "role",
        "master_host",
        "master_port",
        "master_link_status",
        "master_sync_in_progress",
        "slave_read_repl_offset",
        "slave_repl_offset",
        "slave_priority",
        "slave_read_only",
        "replica_announced",
        "connected_slaves",
        "master_replid",
        "master_repl_offset",
        "second_repl_offset",
    ] {
        assert_eq!(field(&ki, name), field(&ti, name), "{name}");
    }
    let role = |r: &mut Raw| {
        let reply = r.call(&["ROLE"]);
        String::from_utf8_lossy(&reply).into_owned()
    };
    assert_eq!(role(&mut k), role(&mut t));
    assert!(String::from_utf8_lossy(&k.call(&["CLIENT", "LIST"])).contains("flags=M"));

    // The master lists keylock with its listening port, acknowledging.
    let port = s.addr().port().to_string();
    wait_until(10, "the master sees keylock's ACK", || {
        let text = String::from_utf8_lossy(&info(&mut m)).into_owned();
        text.lines().any(|l| {
            l.starts_with("slave")
                && l.contains(&format!(
                    "port={port},state=online,offset={}",
                    field(&info(&mut m), "master_repl_offset")
                ))
        })
    });
}

#[test]
fn replicaof_no_one_makes_a_master_that_continues_the_history() {
    let Some(master) = redis_master() else { return };
    let mut m = Raw::connect(master.addr);
    m.call(&["SET", "k", "v"]);
    let s = start();
    let mut k = Raw::connect(s.addr());
    replicaof(&mut k, master.addr);
    wait_link_up(&mut k);
    wait_offsets_equal(&mut m, &mut k);
    let replid = field(&info(&mut m), "master_replid");
    let offset: i64 = field(&info(&mut m), "master_repl_offset").parse().unwrap();
    assert_eq!(k.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    let ki = info(&mut k);
    assert_eq!(field(&ki, "role"), "master");
    assert_eq!(field(&ki, "master_replid2"), replid);
    assert_eq!(field(&ki, "second_repl_offset"), (offset + 1).to_string());
    assert_ne!(field(&ki, "master_replid"), replid);
    // Writable, with the data it had.
    assert_eq!(k.call(&["SET", "mine", "1"]), b"+OK\r\n");
    assert_eq!(k.call(&["GET", "k"]), b"$1\r\nv\r\n");
    // The master no longer has it.
    wait_until(10, "the master drops the replica", || {
        field(&info(&mut m), "connected_slaves") == "0"
    });
}

#[test]
fn a_keylock_replica_of_keylock_serves_its_own_replica_the_same_stream() {
    let a = start();
    let mut ka = Raw::connect(a.addr());
    ka.call(&["SET", "before", "1"]);
    let b = start();
    let mut kb = Raw::connect(b.addr());
    replicaof(&mut kb, a.addr());
    wait_link_up(&mut kb);
    let Some(c) = real_redis_with(&["--replicaof", "127.0.0.1", &b.addr().port().to_string()]) else {
        return;
    };
    let mut rc = Raw::connect(c.addr);
    wait_link_up(&mut rc);
    let acquire = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");
    ka.call(&["EVAL", acquire, "1", "orders", "60000", "owner"]);
    ka.call(&["HSET", "h", "f", "v"]);
    ka.call(&["DEL", "before"]);
    wait_offsets_equal(&mut ka, &mut kb);
    wait_offsets_equal(&mut kb, &mut rc);
    for r in [&mut kb, &mut rc] {
        assert_eq!(r.call(&["HGET", "orders", "owner"]), b"$1\r\n1\r\n");
        assert_eq!(r.call(&["HGET", "h", "f"]), b"$1\r\nv\r\n");
        assert_eq!(r.call(&["EXISTS", "before"]), b":0\r\n");
    }
    // The offsets are the same all along the chain.
    assert_eq!(
        field(&info(&mut ka), "master_repl_offset"),
        field(&info(&mut rc), "master_repl_offset")
    );
}

#[test]
fn a_replica_keeps_expired_keys_until_its_master_deletes_them() {
    let Some(master) = redis_master() else { return };
    let mut m = Raw::connect(master.addr);
    m.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let s = start();
    let mut k = Raw::connect(s.addr());
    let Some(twin) = real_redis_with(&[]) else { return };
    let mut t = Raw::connect(twin.addr);
    replicaof(&mut k, master.addr);
    replicaof(&mut t, master.addr);
    wait_link_up(&mut k);
    wait_link_up(&mut t);
    m.call(&["SET", "short", "x", "PX", "100"]);
    wait_offsets_equal(&mut m, &mut k);
    wait_offsets_equal(&mut m, &mut t);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Past its deadline: not read, still counted.
    for cmd in [&["GET", "short"][..], &["EXISTS", "short"], &["DBSIZE"], &["TTL", "short"]] {
        assert_eq!(k.call(cmd), t.call(cmd), "{cmd:?}");
    }
    assert_eq!(k.call(&["DBSIZE"]), b":1\r\n");
    // The master's lazy expiry sends the DEL.
    assert_eq!(m.call(&["GET", "short"]), b"$-1\r\n");
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(k.call(&["DBSIZE"]), b":0\r\n");
}

#[test]
fn clients_blocked_when_the_server_becomes_a_replica_are_told_so() {
    let Some(master) = redis_master() else { return };
    let s = start();
    let Some(twin) = real_redis_with(&[]) else { return };
    let mut replies = Vec::new();
    for addr in [s.addr(), twin.addr] {
        let mut blocked = Raw::connect(addr);
        blocked.send_cmd(&[b"BLPOP", b"list", b"0"]);
        let mut admin = Raw::connect(addr);
        wait_until(5, "the client blocks", || {
            field(&admin.call(&["INFO", "clients"]), "blocked_clients") == "1"
        });
        replicaof(&mut admin, master.addr);
        replies.push(String::from_utf8_lossy(&blocked.reply()).into_owned());
        assert!(blocked.is_closed());
    }
    assert_eq!(replies[0], replies[1]);
}

#[test]
fn the_link_resynchronizes_after_the_master_comes_back() {
    let a = start();
    let port = a.addr().port();
    let mut ka = Raw::connect(a.addr());
    ka.call(&["SET", "old", "1"]);
    let s = start();
    let mut k = Raw::connect(s.addr());
    replicaof(&mut k, a.addr());
    wait_link_up(&mut k);
    assert_eq!(
        k.call(&["REPLICAOF", "127.0.0.1", &port.to_string()]),
        b"+OK Already connected to specified master\r\n"
    );
    drop(ka);
    a.shutdown();
    wait_until(10, "the link goes down", || field(&info(&mut k), "master_link_status") == "down");
    let role = String::from_utf8_lossy(&k.call(&["ROLE"])).into_owned();
    assert!(role.contains("connect"), "{role}");
    assert!(field(&info(&mut k), "master_link_down_since_seconds").parse::<u64>().is_ok());
    // A new master on the same port, with other data.
    let b = start_with(|c| c.port = port);
    let mut kb = Raw::connect(b.addr());
    kb.call(&["SET", "new", "2"]);
    wait_until(20, "the link comes back", || field(&info(&mut k), "master_link_status") == "up");
    assert_eq!(k.call(&["EXISTS", "old"]), b":0\r\n");
    assert_eq!(k.call(&["GET", "new"]), b"$1\r\n2\r\n");
}

#[test]
fn a_replica_authenticates_to_its_master_with_masterauth() {
    let Some(master) = real_redis_with(&["--requirepass", "secret", "--repl-diskless-sync-delay", "0"]) else {
        return;
    };
    let s = start();
    let mut k = Raw::connect(s.addr());
    replicaof(&mut k, master.addr);
    // Without the password the link does not come up.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(field(&info(&mut k), "master_link_status"), "down");
    assert_eq!(k.call(&["CONFIG", "SET", "masterauth", "secret"]), b"+OK\r\n");
    wait_link_up(&mut k);
}

#[test]
fn wait_counts_the_replicas_that_acknowledged_the_clients_writes() {
    let s = start();
    let mut m = Raw::connect(s.addr());
    // No replica: WAIT waits its timeout and finds none.
    let started = std::time::Instant::now();
    assert_eq!(m.call(&["WAIT", "1", "200"]), b":0\r\n");
    assert!(started.elapsed() >= std::time::Duration::from_millis(180));
    let k = start();
    let mut kr = Raw::connect(k.addr());
    replicaof(&mut kr, s.addr());
    let Some(r) = real_redis_with(&["--replicaof", "127.0.0.1", &s.addr().port().to_string()]) else {
        return;
    };
    let mut rr = Raw::connect(r.addr);
    wait_link_up(&mut kr);
    wait_link_up(&mut rr);
    assert_eq!(m.call(&["SET", "k", "v"]), b"+OK\r\n");
    // Both replicas acknowledge at once (asked with GETACK, not at their
    // next one-second ACK).
    let started = std::time::Instant::now();
    assert_eq!(m.call(&["WAIT", "2", "5000"]), b":2\r\n");
    assert!(started.elapsed() < std::time::Duration::from_millis(900), "{:?}", started.elapsed());
    // Asking for more than there are waits the timeout, then says how many.
    assert_eq!(m.call(&["SET", "k", "w"]), b"+OK\r\n");
    assert_eq!(m.call(&["WAIT", "3", "300"]), b":2\r\n");
    // CLIENT UNBLOCK answers it the same way.
    let mut waiter = Raw::connect(s.addr());
    let id = String::from_utf8_lossy(&waiter.call(&["CLIENT", "ID"]))[1..].trim().to_string();
    waiter.send_cmd(&[b"WAIT", b"3", b"0"]);
    wait_until(5, "the WAIT blocks", || {
        field(&m.call(&["INFO", "clients"]), "blocked_clients") == "1"
    });
    assert_eq!(m.call(&["CLIENT", "UNBLOCK", &id]), b":1\r\n");
    assert_eq!(waiter.reply(), b":2\r\n");
    // Inside a transaction nothing blocks.
    m.call(&["MULTI"]);
    m.call(&["WAIT", "3", "0"]);
    assert_eq!(m.call(&["EXEC"]), b"*1\r\n:2\r\n");
}
