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

fn redis_master() -> Option<RealRedis> {
    real_redis_with(&["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"])
}

/// A keylock and a redis-server (its twin, asked the same to compare
/// answers), both replicas of `master`, their links up.
fn keylock_and_redis_replicas(master: std::net::SocketAddr) -> Option<(ServerHandle, Raw, RealRedis, Raw)> {
    let s = start();
    let mut k = Raw::connect(s.addr());
    let twin = real_redis_with(&[])?;
    let mut t = Raw::connect(twin.addr);
    replicaof(&mut k, master);
    replicaof(&mut t, master);
    wait_link_up(&mut k);
    wait_link_up(&mut t);
    Some((s, k, twin, t))
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

    let Some((s, mut k, _twin, mut t)) = keylock_and_redis_replicas(master.addr) else {
        return;
    };

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
    let Some((_master, mut m, _s, mut k)) = replica_of_redis(&[]) else {
        return;
    };
    m.call(&["SET", "k", "v"]);
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
    let Some((_s, mut k, _twin, mut t)) = keylock_and_redis_replicas(master.addr) else {
        return;
    };
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

/// A keylock replica of a fresh redis-server master, link up.
fn replica_of_redis(extra: &[&str]) -> Option<(RealRedis, Raw, ServerHandle, Raw)> {
    let master = real_redis_with(&[&["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"][..], extra].concat())?;
    let m = Raw::connect(master.addr);
    let s = start();
    let mut k = Raw::connect(s.addr());
    replicaof(&mut k, master.addr);
    wait_link_up(&mut k);
    Some((master, m, s, k))
}

#[test]
fn the_masters_commands_see_keys_past_their_deadline_on_the_replica() {
    let Some((_master, mut m, _s, mut k)) = replica_of_redis(&[]) else {
        return;
    };
    m.call(&["SET", "k", "10", "PX", "5000"]);
    wait_offsets_equal(&mut m, &mut k);
    // The replica's clock is ahead: the key is past its deadline here,
    // not on the master, whose commands on it must still apply.
    k.call(&["KEYLOCK", "CLOCK", "ADVANCE", "10000"]);
    assert_eq!(k.call(&["GET", "k"]), b"$-1\r\n");
    m.call(&["INCR", "k"]);
    m.call(&["PERSIST", "k"]);
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(k.call(&["GET", "k"]), b"$2\r\n11\r\n");
    assert_eq!(k.call(&["TTL", "k"]), b":-1\r\n");
}

#[test]
fn killing_the_masters_client_makes_the_link_continue_where_it_was() {
    let Some((_master, mut m, _s, mut k)) = replica_of_redis(&[]) else {
        return;
    };
    let list = String::from_utf8_lossy(&k.call(&["CLIENT", "LIST", "TYPE", "master"])).into_owned();
    assert!(list.contains("flags=M"), "{list}");
    assert!(!String::from_utf8_lossy(&k.call(&["CLIENT", "LIST", "TYPE", "normal"])).contains("flags=M"));
    // Client eviction leaves it alone.
    assert_eq!(k.call(&["CONFIG", "SET", "maxmemory-clients", "1"]), b"+OK\r\n");
    m.call(&["SELECT", "3"]);
    m.call(&["SET", "a", "1"]);
    wait_offsets_equal(&mut m, &mut k);
    k.call(&["SELECT", "3"]);
    assert_eq!(k.call(&["GET", "a"]), b"$1\r\n1\r\n");
    assert_eq!(k.call(&["CONFIG", "SET", "maxmemory-clients", "0"]), b"+OK\r\n");
    assert_eq!(k.call(&["CLIENT", "KILL", "TYPE", "master"]), b":1\r\n");
    // Written while the link is down, in the database the stream had
    // selected: the master sends it from its backlog with no SELECT.
    m.call(&["SET", "b", "2"]);
    // It connects again and continues: no second snapshot.
    wait_until(10, "the master sees a partial resynchronization", || {
        field(&m.call(&["INFO", "stats"]), "sync_partial_ok") == "1"
    });
    assert_eq!(field(&m.call(&["INFO", "stats"]), "sync_full"), "1");
    wait_link_up(&mut k);
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(k.call(&["GET", "b"]), b"$1\r\n2\r\n");
    m.call(&["SET", "c", "3"]);
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(k.call(&["GET", "c"]), b"$1\r\n3\r\n");
}

#[test]
fn the_stream_database_goes_along_a_chain_of_replicas() {
    // redis-server A, keylock B replica of A, redis-server C replica of B:
    // C learns from B's snapshot which database A's stream is in.
    let Some((_a, mut ma, b, mut kb)) = replica_of_redis(&[]) else {
        return;
    };
    ma.call(&["SELECT", "5"]);
    ma.call(&["SET", "x", "1"]);
    wait_offsets_equal(&mut ma, &mut kb);
    let Some(c) = real_redis_with(&["--replicaof", "127.0.0.1", &b.addr().port().to_string()]) else {
        return;
    };
    let mut rc = Raw::connect(c.addr);
    wait_link_up(&mut rc);
    ma.call(&["SET", "y", "2"]);
    wait_offsets_equal(&mut ma, &mut kb);
    wait_offsets_equal(&mut kb, &mut rc);
    rc.call(&["SELECT", "5"]);
    assert_eq!(rc.call(&["GET", "y"]), b"$1\r\n2\r\n");
    // And keylock reads it from a redis-server replica's snapshot.
    let s = start();
    let mut kd = Raw::connect(s.addr());
    replicaof(&mut kd, c.addr);
    wait_link_up(&mut kd);
    ma.call(&["SET", "z", "3"]);
    wait_offsets_equal(&mut ma, &mut kd);
    kd.call(&["SELECT", "5"]);
    assert_eq!(kd.call(&["GET", "z"]), b"$1\r\n3\r\n");
}

#[test]
fn a_replica_leaves_eviction_to_its_master() {
    let Some((_master, mut m, _s, mut k)) = replica_of_redis(&[]) else {
        return;
    };
    m.call(&["EVAL", "for i = 1, 20000 do redis.call('set', 'key:' .. i, i) end", "0"]);
    wait_offsets_equal(&mut m, &mut k);
    k.call(&["CONFIG", "SET", "maxmemory", "1mb"]);
    k.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    assert_eq!(
        k.call(&["SET", "x", "1"]),
        b"-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(k.call(&["DBSIZE"]), b":20000\r\n");
}

#[test]
fn replicaof_no_one_disconnects_the_replicas_of_the_replica() {
    let a = start();
    let b = start();
    let mut kb = Raw::connect(b.addr());
    replicaof(&mut kb, a.addr());
    wait_link_up(&mut kb);
    let Some(c) = real_redis_with(&["--replicaof", "127.0.0.1", &b.addr().port().to_string()]) else {
        return;
    };
    let mut rc = Raw::connect(c.addr);
    wait_link_up(&mut rc);
    assert_eq!(kb.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    // C resynchronizes with B's new history.
    wait_until(10, "C follows B's new replication ID", || {
        field(&info(&mut rc), "master_link_status") == "up"
            && field(&info(&mut rc), "master_replid") == field(&info(&mut kb), "master_replid")
    });
    kb.call(&["SELECT", "7"]);
    kb.call(&["SET", "after", "1"]);
    wait_offsets_equal(&mut kb, &mut rc);
    rc.call(&["SELECT", "7"]);
    assert_eq!(rc.call(&["GET", "after"]), b"$1\r\n1\r\n");
}

#[test]
fn the_snapshot_does_not_count_toward_the_replica_output_limit() {
    let s = start();
    let mut m = Raw::connect(s.addr());
    m.call(&[
        "EVAL",
        "for i = 1, 50000 do redis.call('set', 'key:' .. i, string.rep('x', 100)) end",
        "0",
    ]);
    m.call(&["CONFIG", "SET", "client-output-buffer-limit", "replica 1mb 0 0"]);
    let Some(r) = real_redis_with(&["--replicaof", "127.0.0.1", &s.addr().port().to_string()]) else {
        return;
    };
    let mut rr = Raw::connect(r.addr);
    wait_link_up(&mut rr);
    assert_eq!(rr.call(&["DBSIZE"]), b":50000\r\n");
    assert_eq!(field(&m.call(&["INFO", "stats"]), "sync_full"), "1");
}

/// A snapshot of an empty keylock, as a master sends it after SYNC.
fn empty_snapshot() -> Vec<u8> {
    let source = start();
    let mut raw = Raw::connect(source.addr());
    raw.send(b"SYNC\r\n");
    let mut header = String::new();
    std::io::BufRead::read_line(&mut raw.reader, &mut header).unwrap();
    let len: usize = header.trim()[1..].parse().unwrap();
    let mut rdb = vec![0; len];
    std::io::Read::read_exact(&mut raw.reader, &mut rdb).unwrap();
    rdb
}

/// A keylock told to replicate a master the test plays on `listener`, a
/// connection to it, and an empty snapshot for the master to send.
fn replica_of_fake_master() -> (Vec<u8>, std::net::TcpListener, ServerHandle, Raw) {
    let rdb = empty_snapshot();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = start();
    let mut k = Raw::connect(s.addr());
    replicaof(&mut k, listener.local_addr().unwrap());
    (rdb, listener, s, k)
}

/// Plays a master for the replica that connects to `listener`: its
/// handshake, then `+FULLRESYNC` and the snapshot `rdb`. The connection,
/// and the reader past the replica's PSYNC.
fn fake_master_full_sync(listener: &std::net::TcpListener, rdb: &[u8]) -> (std::net::TcpStream, std::io::BufReader<std::net::TcpStream>) {
    let (stream, _) = listener.accept().unwrap();
    let (reader, _) = answer_replica_handshake(&stream);
    let header = format!("+FULLRESYNC {} 0\r\n${}\r\n", "a".repeat(40), rdb.len());
    std::io::Write::write_all(&mut &stream, header.as_bytes()).unwrap();
    std::io::Write::write_all(&mut &stream, rdb).unwrap();
    (stream, reader)
}

#[test]
fn a_malformed_stream_from_the_master_ends_the_link() {
    // A master that sends a snapshot, one command, then a bad count.
    let (rdb, listener, _s, mut k) = replica_of_fake_master();
    let serve = |stream: std::net::TcpStream, tail: &[u8]| {
        let (reader, _) = answer_replica_handshake(&stream);
        let mut writer = stream;
        let header = format!("+FULLRESYNC {} 0\r\n${}\r\n", "a".repeat(40), rdb.len());
        std::io::Write::write_all(&mut writer, header.as_bytes()).unwrap();
        std::io::Write::write_all(&mut writer, &rdb).unwrap();
        std::io::Write::write_all(&mut writer, tail).unwrap();
        reader
    };
    let (first, _) = listener.accept().unwrap();
    let mut reader = serve(
        first,
        b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nv1\r\n*x\r\n*3\r\n$3\r\nSET\r\n$2\r\nk2\r\n$2\r\nv2\r\n",
    );
    // The replica closes the link (after its ACKs, if any) ...
    reader.get_ref().set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(&mut reader, &mut rest);
    // ... having run what came before the bad count, not what came after.
    assert_eq!(k.call(&["GET", "k1"]), b"$2\r\nv1\r\n");
    assert_eq!(k.call(&["EXISTS", "k2"]), b":0\r\n");
    // And connects again, asking for a snapshot: the same stream would
    // come again from the master's backlog.
    listener.set_nonblocking(false).unwrap();
    let (second, _) = listener.accept().unwrap();
    assert_eq!(answer_replica_handshake(&second).1, ["PSYNC", "?", "-1"]);
}

#[test]
fn a_link_broken_inside_a_transaction_continues_from_before_it() {
    let (rdb, listener, _s, mut k) = replica_of_fake_master();
    let handshake = |stream: &std::net::TcpStream| answer_replica_handshake(stream).1;
    let set1 = encode(&[b"SET", b"k1", b"v1"]);
    let multi = [encode(&[b"MULTI"]), encode(&[b"SET", b"k2", b"v2"])].concat();
    let exec = encode(&[b"EXEC"]);
    let id = "b".repeat(40);
    let (first, _) = listener.accept().unwrap();
    // A master told REPLICAOF asks to continue its own history first.
    assert_eq!(handshake(&first)[0], "PSYNC");
    let mut w = first.try_clone().unwrap();
    let header = format!("+FULLRESYNC {id} 100\r\n${}\r\n", rdb.len());
    std::io::Write::write_all(&mut w, &[header.as_bytes(), &rdb, &set1, &multi].concat()).unwrap();
    wait_until(10, "the first write is applied", || k.call(&["GET", "k1"]) == b"$2\r\nv1\r\n");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(k.call(&["EXISTS", "k2"]), b":0\r\n");
    // The link breaks before the transaction's EXEC: what the replica
    // reached ends before its MULTI.
    drop(w);
    drop(first);
    let (second, _) = listener.accept().unwrap();
    let offset = 100 + set1.len() + 1;
    assert_eq!(handshake(&second), ["PSYNC", &id, &offset.to_string()]);
    // The transaction again, its EXEC in a later read than the rest.
    let more = encode(&[b"SET", b"k3", b"v3"]);
    let mut w = second.try_clone().unwrap();
    std::io::Write::write_all(&mut w, &[&b"+CONTINUE\r\n"[..], &multi].concat()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    std::io::Write::write_all(&mut w, &more).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(k.call(&["EXISTS", "k2", "k3"]), b":0\r\n");
    std::io::Write::write_all(&mut w, &exec).unwrap();
    wait_until(10, "the transaction is applied", || {
        k.call(&["MGET", "k2", "k3"]) == b"*2\r\n$2\r\nv2\r\n$2\r\nv3\r\n"
    });
    let total = 100 + set1.len() + multi.len() + more.len() + exec.len();
    assert_eq!(info_value(&mut k, "replication", "master_repl_offset"), total.to_string());
}

#[test]
fn client_pause_holds_the_masters_stream() {
    let Some((_master, mut m, _s, mut k)) = replica_of_redis(&[]) else {
        return;
    };
    assert_eq!(k.call(&["CLIENT", "PAUSE", "700", "WRITE"]), b"+OK\r\n");
    m.call(&["SET", "held", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(k.call(&["GET", "held"]), b"$-1\r\n");
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(k.call(&["GET", "held"]), b"$1\r\n1\r\n");
}

#[test]
fn what_a_replica_with_its_link_down_answers_is_redis_servers() {
    // A master that is not there.
    let port = free_port().to_string();
    let s = start();
    let mut k = Raw::connect(s.addr());
    let Some(twin) = real_redis_with(&[]) else { return };
    let mut t = Raw::connect(twin.addr);
    for r in [&mut k, &mut t] {
        assert_eq!(r.call(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (ki, ti) = (info(&mut k), info(&mut t));
    for name in [
        "master_link_status",
        "master_last_io_seconds_ago",
        "master_sync_in_progress",
        "master_link_down_since_seconds",
    ] {
        assert_eq!(field(&ki, name), field(&ti, name), "{name}");
    }
    assert_eq!(field(&ki, "slave_repl_offset"), field(&ki, "master_repl_offset"));
    for r in [&mut k, &mut t] {
        assert_eq!(r.call(&["CONFIG", "SET", "replica-serve-stale-data", "no"]), b"+OK\r\n");
    }
    for cmd in [
        &["GET", "a"][..],
        &["PING"],
        &["INFO", "server"],
        &["EVAL_RO", "return redis.call('set', 'x', '1')", "0"],
        &["EVAL", "#!lua flags=allow-stale,no-writes\nreturn redis.call('get', 'x')", "1", "x"],
        &["EVAL", "#!lua flags=allow-stale,no-writes\nreturn redis.call('echo', 'x')", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn 1", "0"],
    ] {
        let (ka, ta) = (k.call(cmd), t.call(cmd));
        if cmd[0] == "INFO" {
            assert_eq!(ka[0], ta[0]);
        } else {
            assert_eq!(String::from_utf8_lossy(&ka), String::from_utf8_lossy(&ta), "{cmd:?}");
        }
    }
    for r in [&mut k, &mut t] {
        r.call(&["CONFIG", "SET", "replica-serve-stale-data", "yes"]);
    }
    assert_eq!(
        String::from_utf8_lossy(&k.call(&["EVAL_RO", "return redis.call('set', 'x', '1')", "0"])),
        String::from_utf8_lossy(&t.call(&["EVAL_RO", "return redis.call('set', 'x', '1')", "0"]))
    );
    let hello = String::from_utf8_lossy(&k.call(&["HELLO", "2"])).into_owned();
    assert!(hello.contains("role\r\n$7\r\nreplica"), "{hello}");
    // REPLICAOF NO ONE draws a hex replication ID.
    k.call(&["REPLICAOF", "NO", "ONE"]);
    let id = field(&info(&mut k), "master_replid");
    assert!(
        id.len() == 40 && id.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
        "{id}"
    );
}

#[test]
fn a_replicas_connection_may_not_touch_the_keyspace_and_min_replicas_counts_acks() {
    let s = start();
    let mut m = Raw::connect(s.addr());
    let Some(r) = real_redis_with(&["--replicaof", "127.0.0.1", &s.addr().port().to_string()]) else {
        return;
    };
    let mut rr = Raw::connect(r.addr);
    wait_link_up(&mut rr);
    m.call(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    wait_until(5, "the replica acknowledges", || {
        field(&info(&mut m), "min_slaves_good_slaves") == "1"
    });
    assert_eq!(m.call(&["SET", "k", "v"]), b"+OK\r\n");
    m.call(&["CONFIG", "SET", "min-replicas-to-write", "2"]);
    assert_eq!(
        m.call(&["SET", "k", "v"]),
        b"-NOREPLICAS Not enough good replicas to write.\r\n".to_vec()
    );
    // A connection that became a replica gets the stream, not the
    // keyspace: its GET is refused, and since the refusal is a reply, which
    // the link never carries, the replica is disconnected instead.
    let (stream, closed) = replica_sends_after_sync(s.addr(), &[b"GET", b"k"]);
    assert!(closed);
    assert!(!stream.windows(4).any(|w| w == b"-ERR"), "{}", String::from_utf8_lossy(&stream));
}

/// A connection to `server` that sends SYNC, reads the snapshot, then sends
/// `command`: what it reads after the snapshot (the stream) in 3 s, and
/// whether the server closed it.
fn replica_sends_after_sync(server: std::net::SocketAddr, command: &[&[u8]]) -> (Vec<u8>, bool) {
    let mut fake = replica_after(server, &[]);
    fake.send(&encode(command));
    read_for_a_while(&mut fake)
}

#[test]
fn a_replica_whose_command_makes_a_reply_is_disconnected_as_redis_server_does() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("keylock.log");
    let keylock = Binary::start(&["--logfile", log.to_str().unwrap()]);
    let redis = real_redis_with(&[]);
    for (command, name) in [
        (&[&b"PING"[..]][..], "ping"),
        (&[&b"XINFO"[..], b"HELP"], "xinfo|help"),
        (&[&b"GET"[..], b"k"], "get"),
        (&[&b"NOSUCH"[..]], "<unknown>"),
    ] {
        let (stream, closed) = replica_sends_after_sync(keylock.addr, command);
        assert!(closed, "{name}: still open");
        assert!(!stream.windows(5).any(|w| w == b"+PONG" || w.starts_with(b"-ERR")), "{name}");
        let logged = std::fs::read_to_string(&log).unwrap();
        let line = format!("Replica generated a reply to command '{name}', disconnecting it: id=");
        assert!(logged.contains(&line), "{name}: {logged}");
        if let Some(redis) = &redis {
            // redis-server closes it the same way, replying nothing.
            let (stream, closed) = replica_sends_after_sync(redis.addr, command);
            assert!(closed, "redis-server, {name}: still open");
            assert!(
                !stream.windows(5).any(|w| w == b"+PONG" || w.starts_with(b"-ERR")),
                "redis-server, {name}"
            );
        }
    }
    // An error is also logged as one sent to a replica, and counted.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("== CRITICAL == This master is sending an error to its replica: 'Replica can't interact with the keyspace' after processing the command 'get'"),
        "{logged}"
    );
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(info_value(&mut c, "stats", "unexpected_error_replies"), "2");
    if let Some(redis) = &redis {
        let mut r = Raw::connect(redis.addr);
        assert_eq!(info_value(&mut r, "stats", "unexpected_error_replies"), "2");
    }
    // MONITOR is ignored, with no reply, as Redis ignores it from a
    // replica; REPLCONF ACK makes none either: the link stays.
    let (_, closed) = replica_sends_after_sync(keylock.addr, &[b"MONITOR"]);
    assert!(!closed);
    let (_, closed) = replica_sends_after_sync(keylock.addr, &[b"REPLCONF", b"ACK", b"0"]);
    assert!(!closed);
}

#[test]
fn wait_asks_for_acks_without_moving_the_clients_own_offset() {
    let s = start();
    let mut m = Raw::connect(s.addr());
    let port = s.addr().port().to_string();
    let replicas: Vec<RealRedis> = (0..2)
        .filter_map(|_| real_redis_with(&["--replicaof", "127.0.0.1", &port, "--enable-debug-command", "yes"]))
        .collect();
    if replicas.len() < 2 {
        return;
    }
    for r in &replicas {
        wait_link_up(&mut Raw::connect(r.addr));
    }
    assert_eq!(m.call(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(m.call(&["WAIT", "2", "5000"]), b":2\r\n");
    // A WAIT that times out has asked for acknowledgements (the GETACK
    // goes after its batch, not counted as this client's write).
    assert_eq!(m.call(&["WAIT", "3", "10"]), b":2\r\n");
    // With both replicas asleep, they still hold this client's last write.
    let mut sleepers: Vec<Raw> = replicas.iter().map(|r| Raw::connect(r.addr)).collect();
    for r in &mut sleepers {
        r.send_cmd(&[b"DEBUG", b"SLEEP", b"1"]);
    }
    let started = std::time::Instant::now();
    assert_eq!(m.call(&["WAIT", "2", "500"]), b":2\r\n");
    assert!(started.elapsed() < std::time::Duration::from_millis(400), "{:?}", started.elapsed());
    for r in &mut sleepers {
        assert_eq!(r.reply(), b"+OK\r\n");
    }
}

/// A field of an INFO section as a number.
fn number(r: &mut Raw, section: &str, name: &str) -> i64 {
    field(&r.call(&["INFO", section]), name).parse().unwrap()
}

#[test]
fn a_replicas_own_acks_do_not_make_its_output_count_toward_maxmemory() {
    // The binary: used memory is its allocator's count, as in production
    // (an in-process server reports the test process's RSS).
    let s = Binary::start(&[]);
    let mut m = Raw::connect(s.addr);
    for j in 0..100 {
        m.call(&["SETRANGE", &format!("key:{j}"), "100000", "asdf"]);
    }
    m.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    m.call(&["CONFIG", "SET", "client-output-buffer-limit", "replica 100000000 100000000 300"]);
    // A replica that takes its snapshot, then stops reading.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&s.addr.into()).unwrap();
    let stream: std::net::TcpStream = sock.into();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let mut replica = Raw {
        reader: std::io::BufReader::new(stream.try_clone().unwrap()),
        writer: stream,
    };
    replica.send(b"SYNC\r\n");
    let mut header = String::new();
    std::io::BufRead::read_line(&mut replica.reader, &mut header).unwrap();
    let mut rdb = vec![0; header.trim()[1..].parse().unwrap()];
    std::io::Read::read_exact(&mut replica.reader, &mut rdb).unwrap();
    let mut writer = Raw::connect(s.addr);
    let payload = "A".repeat(100);
    for _ in 0..100 {
        let batch: Vec<u8> = encode(&[b"SETRANGE", b"key:0", b"0", payload.as_bytes()]).repeat(1000);
        writer.send(&batch);
        (0..1000).for_each(|_| assert_eq!(writer.reply(), b":100004\r\n"));
    }
    assert!(number(&mut m, "memory", "mem_clients_slaves") > 2 << 20);
    let used = number(&mut m, "memory", "used_memory");
    let not_counted = number(&mut m, "memory", "mem_not_counted_for_evict");
    m.call(&["CONFIG", "SET", "maxmemory", &(used - not_counted + 256 * 1024).to_string()]);
    m.call(&["PING"]);
    let evicted = number(&mut m, "stats", "evicted_keys");
    // The replica's ACK runs as any command, its own output left out too.
    replica.send_cmd(&[b"REPLCONF", b"ACK", b"0"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(number(&mut m, "stats", "evicted_keys"), evicted);
    assert_eq!(m.call(&["DBSIZE"]), b":100\r\n");
}

#[test]
fn eviction_keeps_used_memory_under_maxmemory_whatever_keys_hold() {
    // Lists whose first elements are large: a sampled estimate of their
    // size would count more than their removal frees. (The binary: see
    // above.)
    let s = Binary::start(&[]);
    let mut m = Raw::connect(s.addr);
    m.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let big = "z".repeat(20_000);
    for k in 0..50 {
        let key = format!("l{k}");
        let mut argv: Vec<&str> = vec!["RPUSH", &key];
        argv.extend(std::iter::repeat_n(big.as_str(), 5));
        m.call(&argv);
        let mut argv: Vec<&str> = vec!["RPUSH", &key];
        argv.extend(std::iter::repeat_n("1", 2000));
        m.call(&argv);
    }
    let limit = number(&mut m, "memory", "used_memory") - (2 << 20);
    m.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    let value = "y".repeat(1 << 20);
    for i in 0..20 {
        assert_eq!(m.call(&["SET", &format!("new{i}"), &value]), b"+OK\r\n");
        // Checked before each command: at most the last SET's value over.
        let used = number(&mut m, "memory", "used_memory");
        assert!(used <= limit + (1 << 20) + (256 << 10), "{} KB over", (used - limit) / 1024);
    }
}

/// A master of `keys` keys, and a keylock that has `old` set and will load
/// the master's snapshot slowly (`key-load-delay` 2 ms a key).
fn master_and_slow_loading_replica(keys: usize, extra: &[&str]) -> (ServerHandle, Raw, ServerHandle, Raw) {
    let master = start();
    let mut m = Raw::connect(master.addr());
    for chunk in (0..keys).collect::<Vec<_>>().chunks(500) {
        let mut args = vec!["MSET".to_string()];
        for i in chunk {
            args.extend([format!("key:{i}"), i.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(m.call(&args), b"+OK\r\n");
    }
    let s = start_with(|c| c.set("enable-debug-command", &["yes"]).unwrap());
    let mut k = Raw::connect(s.addr());
    assert_eq!(k.call(&["SET", "old", "1"]), b"+OK\r\n");
    for pair in extra.chunks(2) {
        assert_eq!(k.call(&["CONFIG", "SET", pair[0], pair[1]]), b"+OK\r\n");
    }
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "2000"]), b"+OK\r\n");
    (master, m, s, k)
}

const LOADING: &[u8] = b"-LOADING Redis is loading the dataset in memory\r\n";

#[test]
fn a_replica_answers_loading_while_the_masters_snapshot_loads() {
    let (master, _m, _s, mut k) = master_and_slow_loading_replica(2000, &[]);
    replicaof(&mut k, master.addr());
    // 2000 keys at 2 ms: 4 s of loading, served meanwhile.
    wait_until(10, "the snapshot to start loading", || {
        field(&k.call(&["INFO", "persistence"]), "loading") == "1"
    });
    assert_eq!(k.call(&["GET", "old"]), LOADING);
    assert_eq!(k.call(&["DBSIZE"]), LOADING);
    // No other load meanwhile.
    assert_eq!(k.call(&["DEBUG", "RELOAD"]), LOADING);
    let persistence = k.call(&["INFO", "persistence"]);
    assert_eq!(field(&persistence, "async_loading"), "0");
    assert_eq!(field(&info(&mut k), "master_sync_in_progress"), "1");
    // CONFIG is served, and the keys that follow load at once.
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "0"]), b"+OK\r\n");
    wait_link_up(&mut k);
    assert_eq!(field(&k.call(&["INFO", "persistence"]), "loading"), "0");
    assert_eq!(k.call(&["DBSIZE"]), b":2000\r\n");
    assert_eq!(k.call(&["GET", "key:1999"]), b"$4\r\n1999\r\n");
    assert_eq!(k.call(&["GET", "old"]), b"$-1\r\n");
}

#[test]
fn with_swapdb_a_replica_serves_its_old_data_while_a_snapshot_of_its_history_loads() {
    let (master, mut m, _s, mut k) = master_and_slow_loading_replica(2000, &["repl-diskless-load", "swapdb"]);
    replicaof(&mut k, master.addr());
    // The first snapshot is of another history: LOADING meanwhile.
    wait_until(10, "the snapshot to start loading", || {
        field(&k.call(&["INFO", "persistence"]), "loading") == "1"
    });
    assert_eq!(field(&k.call(&["INFO", "persistence"]), "async_loading"), "0");
    assert_eq!(k.call(&["GET", "old"]), LOADING);
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "0"]), b"+OK\r\n");
    wait_link_up(&mut k);
    assert_eq!(k.call(&["DBSIZE"]), b":2000\r\n");
    // The next full sync continues the same history: the old data is
    // served while it loads. (2 MB written past the 1 MB backlog.)
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "2000"]), b"+OK\r\n");
    let value = "x".repeat(100_000);
    assert_eq!(m.call(&["MULTI"]), b"+OK\r\n");
    m.call(&["CLIENT", "KILL", "TYPE", "replica"]);
    for i in 0..20 {
        m.call(&["SET", &format!("big:{i}"), &value]);
    }
    m.call(&["EXEC"]);
    wait_until(10, "the second snapshot to start loading", || {
        field(&k.call(&["INFO", "persistence"]), "async_loading") == "1"
    });
    assert_eq!(field(&k.call(&["INFO", "persistence"]), "loading"), "0");
    assert_eq!(k.call(&["GET", "key:7"]), b"$1\r\n7\r\n");
    assert_eq!(k.call(&["EXISTS", "big:0"]), b":0\r\n");
    // What may not run meanwhile (`no-async-loading`, DENY_LOADING
    // settings) is answered LOADING.
    assert_eq!(k.call(&["REPLICAOF", "NO", "ONE"]), LOADING);
    assert_eq!(k.call(&["CONFIG", "SET", "repl-diskless-load", "disabled"]), LOADING);
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "0"]), b"+OK\r\n");
    wait_link_up(&mut k);
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(field(&k.call(&["INFO", "persistence"]), "async_loading"), "0");
    assert_eq!(k.call(&["DBSIZE"]), b":2020\r\n");
}

/// A keylock with `old` set and `repl-diskless-load swapdb` gets half a
/// snapshot, after `+FULLRESYNC replid` (its own history's, or another),
/// from a master the test plays, which then goes: what GET old answers
/// during the transfer, and after.
fn transfer_cut_short(same_history: bool) -> (Vec<u8>, Vec<u8>) {
    let rdb = empty_snapshot();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = start();
    let mut k = Raw::connect(s.addr());
    assert_eq!(k.call(&["SET", "old", "1"]), b"+OK\r\n");
    assert_eq!(k.call(&["CONFIG", "SET", "repl-diskless-load", "swapdb"]), b"+OK\r\n");
    let replid = if same_history {
        field(&info(&mut k), "master_replid")
    } else {
        "a".repeat(40)
    };
    replicaof(&mut k, listener.local_addr().unwrap());
    let (stream, _) = listener.accept().unwrap();
    let (reader, _) = answer_replica_handshake(&stream);
    let mut writer = &stream;
    let header = format!("+FULLRESYNC {replid} 0\r\n${}\r\n", rdb.len());
    std::io::Write::write_all(&mut writer, header.as_bytes()).unwrap();
    std::io::Write::write_all(&mut writer, &rdb[..rdb.len() / 2]).unwrap();
    let flag = if same_history { "async_loading" } else { "loading" };
    wait_until(10, "the transfer to start", || {
        field(&k.call(&["INFO", "persistence"]), flag) == "1"
    });
    let during = k.call(&["GET", "old"]);
    // The master goes before the snapshot is all there.
    drop(reader);
    stream.shutdown(std::net::Shutdown::Both).unwrap();
    wait_until(10, "the transfer to be left", || {
        field(&k.call(&["INFO", "persistence"]), flag) == "0"
    });
    assert_eq!(k.call(&["DBSIZE"]), b":1\r\n");
    (during, k.call(&["GET", "old"]))
}

#[test]
fn with_swapdb_a_transfer_cut_short_leaves_the_old_data_in_place() {
    let old = b"$1\r\n1\r\n".to_vec();
    // Of this replica's history: served meanwhile.
    assert_eq!(transfer_cut_short(true), (old.clone(), old.clone()));
    // Of another: LOADING meanwhile, as with Redis's load into a
    // temporary database.
    assert_eq!(transfer_cut_short(false), (LOADING.to_vec(), old));
}

/// A master of 1000 keys whose snapshot's child waits `delay_us` a key
/// (`rdb-key-save-delay`), and a keylock replica of it whose snapshot's
/// child has started: the master, a connection to it, the replica, a
/// connection to it.
fn replica_of_a_slow_child(delay_us: u32) -> (ServerHandle, Raw, ServerHandle, Raw) {
    let master = start();
    let mut m = Raw::connect(master.addr());
    for i in 0..1000 {
        m.call(&["SET", &format!("key:{i}"), "v"]);
    }
    assert_eq!(m.call(&["CONFIG", "SET", "rdb-key-save-delay", &delay_us.to_string()]), b"+OK\r\n");
    let s = start();
    let mut k = Raw::connect(s.addr());
    replicaof(&mut k, master.addr());
    wait_until(10, "the snapshot's child to start", || {
        info_value(&mut m, "persistence", "rdb_bgsave_in_progress") == "1"
    });
    (master, m, s, k)
}

#[test]
fn a_master_serves_its_clients_while_a_child_writes_a_replicas_snapshot() {
    // 1000 keys at 2 ms: the child writes for 2 s.
    let (_master, mut m, _s, mut k) = replica_of_a_slow_child(2000);
    // Served meanwhile, and what it writes follows the snapshot.
    assert_eq!(m.call(&["SET", "during", "1"]), b"+OK\r\n");
    assert_eq!(m.call(&["DEL", "key:0"]), b":1\r\n");
    // The child is a save in progress, as Redis's is.
    assert_eq!(m.call(&["BGSAVE"]), b"-ERR Background save already in progress\r\n");
    assert_eq!(info_value(&mut m, "persistence", "rdb_bgsave_in_progress"), "1");
    assert_eq!(field(&info(&mut k), "master_link_status"), "down");
    wait_link_up(&mut k);
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(k.call(&["GET", "during"]), b"$1\r\n1\r\n");
    assert_eq!(k.call(&["EXISTS", "key:0"]), b":0\r\n");
    assert_eq!(k.call(&["DBSIZE"]), b":1000\r\n");
    assert_eq!(info_value(&mut m, "persistence", "rdb_bgsave_in_progress"), "0");
    wait_until(5, "the replica to be online", || {
        field(&m.call(&["INFO", "replication"]), "slave0").contains("state=online")
    });
}

#[test]
fn a_replica_disconnected_during_its_snapshot_ends_the_child() {
    // 10 s of writing, unless the child is ended.
    let (_master, mut m, _s, mut k) = replica_of_a_slow_child(10_000);
    // The replica stops and closes its link. (The child closed its copy
    // of every socket of this process, the replica's end of the link
    // among them: the master sees the link end.)
    assert_eq!(k.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    wait_until(5, "the child to be ended", || {
        info_value(&mut m, "persistence", "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(info_value(&mut m, "replication", "connected_slaves"), "0");
}

#[test]
fn flushall_ends_the_child_writing_a_replicas_snapshot_and_the_replica_syncs_again() {
    // 10 s of writing, unless the child is ended.
    let (_master, mut m, _s, mut k) = replica_of_a_slow_child(10_000);
    assert_eq!(m.call(&["FLUSHALL"]), b"+OK\r\n");
    wait_until(3, "the child to be ended", || {
        info_value(&mut m, "persistence", "rdb_bgsave_in_progress") == "0"
    });
    // The replica, disconnected, asks again and gets the flushed dataset.
    assert_eq!(m.call(&["SET", "after", "1"]), b"+OK\r\n");
    wait_until(10, "the second full synchronization", || {
        info_value(&mut m, "stats", "sync_full") == "2"
    });
    wait_link_up(&mut k);
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(k.call(&["DBSIZE"]), b":1\r\n");
}

#[test]
fn a_replica_that_reads_nothing_of_its_snapshot_is_dropped_after_repl_timeout() {
    let master = start_with(|c| c.set("enable-debug-command", &["yes"]).unwrap());
    let mut m = Raw::connect(master.addr());
    // 20 MB, more than the socket's buffers and the 4 MB relayed ahead.
    assert_eq!(m.call(&["DEBUG", "POPULATE", "200", "key", "100000"]), b"+OK\r\n");
    assert_eq!(m.call(&["CONFIG", "SET", "repl-timeout", "1"]), b"+OK\r\n");
    assert_eq!(m.call(&["CONFIG", "SET", "rdbcompression", "no"]), b"+OK\r\n");
    let mut replica = Raw::connect(master.addr());
    assert_eq!(replica.call(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
    replica.send(&encode(&[b"PSYNC", b"?", b"-1"]));
    // It reads nothing more.
    wait_until(10, "the snapshot's child to start", || {
        info_value(&mut m, "persistence", "rdb_bgsave_in_progress") == "1"
    });
    wait_until(10, "the replica to be dropped and the child ended", || {
        info_value(&mut m, "persistence", "rdb_bgsave_in_progress") == "0" && info_value(&mut m, "replication", "connected_slaves") == "0"
    });
}

#[test]
fn a_replica_that_asks_while_a_child_writes_waits_for_the_next_child() {
    // 1000 keys at 3 ms: the first child writes for 3 s.
    let (master, mut m, _s, mut k) = replica_of_a_slow_child(3000);
    let forks = info_value(&mut m, "stats", "total_forks");
    let s2 = start();
    let mut k2 = Raw::connect(s2.addr());
    replicaof(&mut k2, master.addr());
    wait_until(5, "the second replica to wait", || {
        let info = String::from_utf8_lossy(&m.call(&["INFO", "replication"])).into_owned();
        info.lines().any(|l| l.starts_with("slave1:") && l.contains("state=wait_bgsave"))
    });
    // Not served by the running child, nor given one of its own.
    assert_eq!(info_value(&mut m, "stats", "total_forks"), forks);
    // The next child is to be quick (the running one keeps its setting).
    assert_eq!(m.call(&["CONFIG", "SET", "rdb-key-save-delay", "0"]), b"+OK\r\n");
    assert_eq!(m.call(&["SET", "during", "1"]), b"+OK\r\n");
    // The next child starts once the first is done.
    for r in [&mut k, &mut k2] {
        wait_link_up(r);
        wait_offsets_equal(&mut m, r);
        assert_eq!(r.call(&["DBSIZE"]), b":1001\r\n");
    }
    assert_eq!(
        info_value(&mut m, "stats", "total_forks").parse::<u64>().unwrap(),
        forks.parse::<u64>().unwrap() + 1
    );
}

#[test]
fn repl_diskless_sync_max_replicas_starts_the_child_before_the_delay() {
    let master = start();
    let mut m = Raw::connect(master.addr());
    assert_eq!(m.call(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(m.call(&["CONFIG", "SET", "repl-diskless-sync-delay", "100"]), b"+OK\r\n");
    assert_eq!(m.call(&["CONFIG", "SET", "repl-diskless-sync-max-replicas", "2"]), b"+OK\r\n");
    let s1 = start();
    let mut k1 = Raw::connect(s1.addr());
    replicaof(&mut k1, master.addr());
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // One replica waits for the delay (a newline a second keeps its link).
    assert!(field(&m.call(&["INFO", "replication"]), "slave0").contains("state=wait_bgsave"));
    assert_eq!(field(&info(&mut k1), "master_link_status"), "down");
    assert_eq!(info_value(&mut m, "stats", "total_forks"), "0");
    // The second makes two: one child for both, long before 100 s.
    let s2 = start();
    let mut k2 = Raw::connect(s2.addr());
    replicaof(&mut k2, master.addr());
    for r in [&mut k1, &mut k2] {
        wait_link_up(r);
        assert_eq!(r.call(&["GET", "k"]), b"$1\r\nv\r\n");
    }
    assert_eq!(info_value(&mut m, "stats", "total_forks"), "1");
}

#[test]
fn a_master_silent_after_psync_times_the_handshake_out_as_redis_logs_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("keylock.log");
    let replica = Binary::start(&["--logfile", log.to_str().unwrap(), "--repl-timeout", "1"]);
    let master = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut r = Raw::connect(replica.addr);
    replicaof(&mut r, master.local_addr().unwrap());
    // The master answers the handshake, then nothing: not even the
    // newlines a master waiting to start a snapshot sends.
    let (link, _) = master.accept().unwrap();
    let (_reader, psync) = answer_replica_handshake(&link);
    assert_eq!(psync[0], "PSYNC");
    assert!(text(r.call(&["ROLE"])).contains("handshake"));
    // Redis's words for a silence in the handshake, then a new link.
    let (_again, _) = master.accept().unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("Timeout connecting to the MASTER..."), "{logged}");
}

#[test]
fn shutdown_and_flushall_with_save_points_save_while_a_replicas_snapshot_child_runs() {
    let (_master, mut m, _s, _k) = replica_of_a_slow_child(10_000);
    assert_eq!(m.call(&["CONFIG", "SET", "save", "900 1"]), b"+OK\r\n");
    // The child is killed first; the save follows (it was refused while
    // the killed child still counted).
    assert_eq!(m.call(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(info_value(&mut m, "persistence", "rdb_changes_since_last_save"), "0");
    let (_master, mut m, _s, _k) = replica_of_a_slow_child(10_000);
    assert_eq!(m.call(&["CONFIG", "SET", "save", "900 1"]), b"+OK\r\n");
    // NOW: without waiting for the replica, which is still loading, to
    // acknowledge the stream. Not refused ("-ERR Errors trying to
    // SHUTDOWN" while the killed child counted).
    m.send(&encode(&[b"SHUTDOWN", b"NOW"]));
    m.writer.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
    let mut answer = String::new();
    let _ = std::io::BufRead::read_line(&mut m.reader, &mut answer);
    assert!(!answer.starts_with('-'), "SHUTDOWN refused: {answer}");
}

#[test]
fn the_idle_timeout_spares_a_replica_waiting_for_its_snapshot() {
    let master = start();
    let mut m = Raw::connect(master.addr());
    assert_eq!(m.call(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(m.call(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
    assert_eq!(m.call(&["CONFIG", "SET", "repl-diskless-sync-delay", "3"]), b"+OK\r\n");
    let s1 = start();
    let mut k1 = Raw::connect(s1.addr());
    replicaof(&mut k1, master.addr());
    // It says nothing for 3 s and is not closed for it, as Redis spares
    // replicas (and its master) from `timeout`.
    wait_link_up(&mut k1);
    // (The test's own idle connection is closed meanwhile.)
    let mut m = Raw::connect(master.addr());
    assert_eq!(info_value(&mut m, "stats", "sync_full"), "1");
    assert_eq!(k1.call(&["GET", "k"]), b"$1\r\nv\r\n");
}

#[test]
fn with_diskless_load_a_slow_load_makes_a_slow_reader_of_the_replica() {
    let master = start_with(|c| c.set("enable-debug-command", &["yes"]).unwrap());
    let mut m = Raw::connect(master.addr());
    // 40 MB, far more than the socket's buffers and what the master
    // relays ahead; at 1 ms a key the replica loads for 4 s.
    assert_eq!(m.call(&["DEBUG", "POPULATE", "4000", "key", "10000"]), b"+OK\r\n");
    assert_eq!(m.call(&["CONFIG", "SET", "rdbcompression", "no"]), b"+OK\r\n");
    let s = start_with(|c| c.set("enable-debug-command", &["yes"]).unwrap());
    let mut k = Raw::connect(s.addr());
    assert_eq!(k.call(&["CONFIG", "SET", "repl-diskless-load", "swapdb"]), b"+OK\r\n");
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "1000"]), b"+OK\r\n");
    replicaof(&mut k, master.addr());
    wait_until(10, "the snapshot to start loading", || {
        field(&k.call(&["INFO", "persistence"]), "loading") == "1"
    });
    std::thread::sleep(std::time::Duration::from_secs(1));
    // The replica reads the snapshot as it parses it, so the master's
    // child still waits to write the rest (as with Redis's diskless
    // load); a replica that read it all first would have let it finish.
    assert_eq!(info_value(&mut m, "persistence", "rdb_bgsave_in_progress"), "1");
    let replication = info(&mut k);
    let read: u64 = field(&replication, "master_sync_read_bytes").parse().unwrap();
    assert!(read < 30 << 20, "{read} bytes read");
    assert_eq!(field(&replication, "master_sync_total_bytes"), "-1");
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "0"]), b"+OK\r\n");
    wait_link_up(&mut k);
    wait_offsets_equal(&mut m, &mut k);
    assert_eq!(k.call(&["DBSIZE"]), b":4000\r\n");
    assert_eq!(k.call(&["DEBUG", "DIGEST"]), m.call(&["DEBUG", "DIGEST"]));
}

/// A keylock with `old` set and `repl-diskless-load swapdb` told to
/// replicate a master the test plays, which sends `+FULLRESYNC` of
/// another history, then `body` cut in `pieces` writes 50 ms apart: the
/// listener, the keylock and a connection to it.
fn snapshot_parsed_as_it_arrives(body: &[u8], pieces: usize) -> (std::net::TcpListener, ServerHandle, Raw) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = start();
    let mut k = Raw::connect(s.addr());
    assert_eq!(k.call(&["SET", "old", "1"]), b"+OK\r\n");
    assert_eq!(k.call(&["CONFIG", "SET", "repl-diskless-load", "swapdb"]), b"+OK\r\n");
    replicaof(&mut k, listener.local_addr().unwrap());
    let (stream, _) = listener.accept().unwrap();
    let (reader, _) = answer_replica_handshake(&stream);
    let message = format!("+FULLRESYNC {} 0\r\n", "a".repeat(40)).into_bytes();
    std::io::Write::write_all(&mut &stream, &message).unwrap();
    for piece in body.chunks(body.len().div_ceil(pieces)) {
        std::io::Write::write_all(&mut &stream, piece).unwrap();
        if pieces > 1 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    // The link stays open for the test's life.
    std::mem::forget((reader, stream));
    (listener, s, k)
}

#[test]
fn a_snapshot_parsed_as_it_arrives_is_followed_by_the_stream_read_with_it() {
    let rdb = empty_snapshot();
    let command = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
    let mark = "m".repeat(40);
    // With an EOF mark, and with a length.
    let mut eof = format!("$EOF:{mark}\r\n").into_bytes();
    eof.extend_from_slice(&rdb);
    eof.extend_from_slice(mark.as_bytes());
    eof.extend_from_slice(command);
    let mut length = format!("${}\r\n", rdb.len()).into_bytes();
    length.extend_from_slice(&rdb);
    length.extend_from_slice(command);
    // In one write, and in many (the mark cut across two).
    for (body, pieces) in [(&eof, 1), (&length, 1), (&eof, 7), (&length, 7)] {
        let (_listener, _s, mut k) = snapshot_parsed_as_it_arrives(body, pieces);
        wait_link_up(&mut k);
        wait_until(5, "the stream's command to run", || k.call(&["GET", "k"]) == b"$1\r\nv\r\n");
        assert_eq!(k.call(&["GET", "old"]), b"$-1\r\n");
        assert_eq!(info_value(&mut k, "replication", "master_repl_offset"), command.len().to_string());
    }
}

#[test]
fn a_snapshot_parsed_as_it_arrives_with_a_broken_eof_mark_is_not_installed() {
    let rdb = empty_snapshot();
    let mark = "m".repeat(40);
    let mut body = format!("$EOF:{mark}\r\n").into_bytes();
    body.extend_from_slice(&rdb);
    body.extend_from_slice("x".repeat(40).as_bytes());
    let (listener, _s, mut k) = snapshot_parsed_as_it_arrives(&body, 1);
    // The link starts over; the old data stays, and so does the history
    // it is at, which the next PSYNC offers to continue (with `swapdb`
    // Redis keeps its cached master until a snapshot has loaded).
    let (again, _) = listener.accept().unwrap();
    let replid = info_value(&mut k, "replication", "master_replid");
    assert_eq!(answer_replica_handshake(&again).1, ["PSYNC", replid.as_str(), "1"]);
    assert_eq!(k.call(&["GET", "old"]), b"$1\r\n1\r\n");
    assert_eq!(info_value(&mut k, "replication", "master_link_status"), "down");
}

#[test]
fn a_snapshot_child_killed_while_its_replica_reads_slowly_is_collected() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("master.log");
    let master = Binary::start(&["--logfile", log.to_str().unwrap(), "--enable-debug-command", "yes"]);
    let mut m = Raw::connect(master.addr);
    assert_eq!(m.call(&["DEBUG", "POPULATE", "4000", "key", "10000"]), b"+OK\r\n");
    assert_eq!(m.call(&["CONFIG", "SET", "rdbcompression", "no"]), b"+OK\r\n");
    // A replica that reads a key a second: the master's relay waits on
    // it and does not read the child's pipe.
    let s = start();
    let mut k = Raw::connect(s.addr());
    assert_eq!(k.call(&["CONFIG", "SET", "repl-diskless-load", "swapdb"]), b"+OK\r\n");
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "1000000"]), b"+OK\r\n");
    replicaof(&mut k, master.addr);
    let mut child = None;
    wait_until(10, "the snapshot's child to start", || {
        let logged = std::fs::read_to_string(&log).unwrap();
        child = logged
            .lines()
            .find_map(|l| l.split("Background RDB transfer started by pid ").nth(1))
            .map(|pid| pid.trim().parse::<i32>().unwrap());
        child.is_some()
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(info_value(&mut m, "persistence", "rdb_bgsave_in_progress"), "1");
    // As the OOM killer would.
    unsafe { libc::kill(child.unwrap(), libc::SIGKILL) };
    wait_until(5, "the killed child to be collected", || {
        info_value(&mut m, "persistence", "rdb_bgsave_in_progress") == "0"
    });
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("Background transfer terminated by signal 9"), "{logged}");
    // The replica was dropped; it asks again, and syncs once it loads at
    // speed.
    assert_eq!(k.call(&["CONFIG", "SET", "key-load-delay", "0"]), b"+OK\r\n");
    wait_link_up(&mut k);
    assert_eq!(k.call(&["DBSIZE"]), b":4000\r\n");
}

#[test]
fn a_deadline_past_when_the_masters_stream_sets_it_is_kept_not_deleted() {
    // As on a Redis replica (`checkAlreadyExpired` is false with a
    // master): the key stays, with the deadline, until its master deletes
    // it; the replica's clients see it gone meanwhile.
    let (rdb, listener, _s, mut k) = replica_of_fake_master();
    let (stream, reader) = fake_master_full_sync(&listener, &rdb);
    let mut writer = &stream;
    let stream_bytes = encode(&[b"SET", b"k", b"v"])
        .into_iter()
        .chain(encode(&[b"PEXPIREAT", b"k", b"1"]))
        .collect::<Vec<u8>>();
    std::io::Write::write_all(&mut writer, &stream_bytes).unwrap();
    wait_link_up(&mut k);
    wait_until(5, "the stream to be applied", || {
        info_value(&mut k, "replication", "slave_repl_offset") == stream_bytes.len().to_string()
    });
    assert_eq!(k.call(&["DBSIZE"]), b":1\r\n");
    assert_eq!(k.call(&["GET", "k"]), b"$-1\r\n");
    // Its master's DEL removes it.
    std::io::Write::write_all(&mut writer, &encode(&[b"DEL", b"k"])).unwrap();
    wait_until(5, "the DEL to be applied", || k.call(&["DBSIZE"]) == b":0\r\n");
    drop(reader);
}

#[test]
fn a_full_sync_that_fails_before_its_snapshot_keeps_the_history_for_a_partial_resync() {
    // Redis keeps its cached master until the new master's snapshot is
    // loaded (`replicationAttachToNewMaster`): back with its old master, a
    // replica whose full sync elsewhere failed continues where it was.
    let master = start();
    let mut m = Raw::connect(master.addr());
    assert_eq!(m.call(&["SET", "a", "b"]), b"+OK\r\n");
    let s = start();
    let mut k = Raw::connect(s.addr());
    replicaof(&mut k, master.addr());
    wait_link_up(&mut k);
    wait_offsets_equal(&mut m, &mut k);
    let full = info_value(&mut m, "stats", "sync_full");
    let partial: u64 = info_value(&mut m, "stats", "sync_partial_ok").parse().unwrap();
    // Another master answers +FULLRESYNC, then goes before its snapshot.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    replicaof(&mut k, listener.local_addr().unwrap());
    let (stream, _) = listener.accept().unwrap();
    let (reader, _) = answer_replica_handshake(&stream);
    let message = format!("+FULLRESYNC {} 0\r\n", "c".repeat(40));
    std::io::Write::write_all(&mut &stream, message.as_bytes()).unwrap();
    wait_until(20, "the transfer to start", || {
        info_value(&mut k, "replication", "master_sync_in_progress") == "1"
    });
    drop((reader, stream, listener));
    replicaof(&mut k, master.addr());
    wait_link_up(&mut k);
    assert_eq!(info_value(&mut m, "stats", "sync_full"), full);
    assert_eq!(info_value(&mut m, "stats", "sync_partial_ok"), (partial + 1).to_string());
    assert_eq!(k.call(&["GET", "a"]), b"$1\r\nb\r\n");
}

#[test]
fn errors_inside_a_transaction_of_the_masters_stream_are_logged_and_counted() {
    // A replica whose data drifted: the master's MULTI/EXEC meets a
    // WRONGTYPE. Redis logs each error sent to its master's client.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("replica.log");
    let replica = Binary::start(&["--logfile", log.to_str().unwrap()]);
    let (rdb, listener) = (empty_snapshot(), std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let mut k = Raw::connect(replica.addr);
    assert_eq!(
        k.call(&["REPLICAOF", "127.0.0.1", &listener.local_addr().unwrap().port().to_string()]),
        b"+OK\r\n"
    );
    let (stream, reader) = fake_master_full_sync(&listener, &rdb);
    let mut writer = &stream;
    let mut commands = encode(&[b"SET", b"k", b"v"]);
    for command in [&[&b"MULTI"[..]][..], &[b"LPUSH", b"k", b"x"], &[b"SET", b"n", b"1"], &[b"EXEC"]] {
        commands.extend(encode(command));
    }
    std::io::Write::write_all(&mut writer, &commands).unwrap();
    wait_link_up(&mut k);
    wait_until(20, "the stream to be applied", || {
        info_value(&mut k, "replication", "slave_repl_offset") == commands.len().to_string()
    });
    assert_eq!(k.call(&["GET", "n"]), b"$1\r\n1\r\n");
    assert_eq!(info_value(&mut k, "stats", "unexpected_error_replies"), "1");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("== CRITICAL == This replica is sending an error to its master: '-WRONGTYPE Operation against a key holding the wrong kind of value' after processing the command 'exec'"),
        "{logged}"
    );
    drop(reader);
}

#[test]
fn propagation_error_behavior_panic_stops_a_read_only_replica_that_refuses_its_masters_command() {
    let master = Binary::start(&["--enable-debug-command", "yes"]);
    let mut m = Raw::connect(master.addr);
    for read_only in ["no", "yes"] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("replica.log");
        let mut replica = Binary::start(&[
            "--logfile",
            log.to_str().unwrap(),
            "--propagation-error-behavior",
            "panic",
            "--replica-read-only",
            read_only,
        ]);
        let mut r = Raw::connect(replica.addr);
        replicaof(&mut r, master.addr);
        wait_link_up(&mut r);
        assert_eq!(m.call(&["DEBUG", "REPLICATE", "fake-command-1"]), b"+OK\r\n");
        assert_eq!(m.call(&["SET", "after", "1"]), b"+OK\r\n");
        let refused = "== CRITICAL == This replica is sending an error to its master: 'unknown command 'fake-command-1', with args beginning with: ' after processing the command '<unknown>'";
        if read_only == "no" {
            // A writable replica may diverge: it logs the error and goes on.
            wait_offsets_equal(&mut m, &mut r);
            assert_eq!(r.call(&["GET", "after"]), b"$1\r\n1\r\n");
            let logged = std::fs::read_to_string(&log).unwrap();
            assert!(logged.contains(refused), "{logged}");
            continue;
        }
        // A read-only one stops rather than go on with other data than
        // its master's.
        let status = replica.wait_exit(10);
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGABRT));
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(logged.contains(refused), "{logged}");
        assert!(
            logged
                .contains("Guru Meditation: This replica panicked sending an error to its master after processing the command '<unknown>'"),
            "{logged}"
        );
    }
}

/// A connection to `server` that runs `before` (reading each reply), sends
/// SYNC and reads the snapshot: a replica, as the master sees it.
fn replica_after(server: std::net::SocketAddr, before: &[&[&str]]) -> Raw {
    let mut fake = Raw::connect(server);
    for command in before {
        fake.call(command);
    }
    fake.send(b"SYNC\r\n");
    let mut header = String::new();
    loop {
        header.clear();
        std::io::BufRead::read_line(&mut fake.reader, &mut header).unwrap();
        if header.trim().starts_with('$') {
            break;
        }
    }
    let mut rdb = vec![0; header.trim()[1..].parse().unwrap()];
    std::io::Read::read_exact(&mut fake.reader, &mut rdb).unwrap();
    fake
}

/// What `replica` reads in 3 s, and whether the server closed it then.
fn read_for_a_while(replica: &mut Raw) -> (Vec<u8>, bool) {
    replica
        .reader
        .get_ref()
        .set_read_timeout(Some(std::time::Duration::from_secs(3)))
        .unwrap();
    let mut stream = Vec::new();
    let closed = match std::io::Read::read_to_end(&mut replica.reader, &mut stream) {
        Ok(_) => true,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    };
    (stream, closed)
}

/// A replica's link gets a reply made later than its command (WAIT timed
/// out), a message of a channel it subscribed to, or an invalidation of a
/// key it tracked: whether it was closed, and whether any of those reached
/// it.
fn late_replies_to_a_replica(server: std::net::SocketAddr) -> Vec<(bool, bool)> {
    let mut c = Raw::connect(server);
    c.call(&["SET", "k", "v"]);
    let mut out = Vec::new();
    let mut waiting = replica_after(server, &[]);
    waiting.send(&encode(&[b"WAIT", b"5", b"300"]));
    let (stream, closed) = read_for_a_while(&mut waiting);
    out.push((closed, stream.windows(3).any(|w| w == b"\n:0" || w == b"\n:1")));
    let mut subscribed = replica_after(server, &[&["HELLO", "3"], &["SUBSCRIBE", "ch"]]);
    c.call(&["PUBLISH", "ch", "m"]);
    let (stream, closed) = read_for_a_while(&mut subscribed);
    out.push((closed, stream.windows(7).any(|w| w == b"message")));
    let mut tracking = replica_after(server, &[&["HELLO", "3"], &["CLIENT", "TRACKING", "ON"], &["GET", "k"]]);
    c.call(&["SET", "k", "w"]);
    let (stream, closed) = read_for_a_while(&mut tracking);
    out.push((closed, stream.windows(10).any(|w| w == b"invalidate")));
    // A command answered BUSY while a script runs too long.
    let mut busy = replica_after(server, &[]);
    assert_eq!(c.call(&["CONFIG", "SET", "busy-reply-threshold", "100"]), b"+OK\r\n");
    let mut script = Raw::connect(server);
    script.send(&encode(&[b"EVAL", b"while true do end", b"0"]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    busy.send(&encode(&[b"PING"]));
    let (stream, closed) = read_for_a_while(&mut busy);
    out.push((closed, stream.windows(5).any(|w| w == b"-BUSY")));
    assert_eq!(c.call(&["SCRIPT", "KILL"]), b"+OK\r\n");
    out
}

#[test]
fn replies_made_later_for_a_replica_disconnect_it_as_redis_server_does() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("keylock.log");
    let keylock = Binary::start(&["--logfile", log.to_str().unwrap()]);
    let ours = late_replies_to_a_replica(keylock.addr);
    // Closed, with nothing of the reply, the message or the invalidation.
    assert_eq!(ours, [(true, false), (true, false), (true, false), (true, false)]);
    let logged = std::fs::read_to_string(&log).unwrap();
    for command in ["wait", "sync", "ping"] {
        let line = format!("Replica generated a reply to command '{command}', disconnecting it: id=");
        assert!(logged.contains(&line), "{command}: {logged}");
    }
    if let Some(redis) = real_redis_with(&[]) {
        assert_eq!(ours, late_replies_to_a_replica(redis.addr));
    }
}

/// Keys given a deadline on a writable replica, by its own client and by
/// its master's stream: what is left on the replica once both are due.
fn writable_replica_expiry_scenario(master: std::net::SocketAddr, replica: std::net::SocketAddr) -> Vec<String> {
    let mut m = Raw::connect(master);
    let mut r = Raw::connect(replica);
    replicaof(&mut r, master);
    wait_link_up(&mut r);
    assert_eq!(r.call(&["CONFIG", "SET", "replica-read-only", "no"]), b"+OK\r\n");
    // The master's key: its deadline passes, but the master (active expiry
    // off) sends no DEL, and the replica leaves it to its master.
    assert_eq!(m.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    m.call(&["SET", "from-master", "1", "PX", "200"]);
    wait_offsets_equal(&mut m, &mut r);
    // The replica's own keys, in two databases, and one whose deadline
    // is taken away again.
    for (db, key) in [("0", "a"), ("0", "b"), ("3", "a")] {
        r.call(&["SELECT", db]);
        assert_eq!(r.call(&["SET", key, "1", "PX", "200"]), b"+OK\r\n");
    }
    r.call(&["SELECT", "0"]);
    r.call(&["SET", "kept", "1", "EX", "100"]);
    r.call(&["PERSIST", "kept"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let mut out = Vec::new();
    for db in ["0", "3"] {
        r.call(&["SELECT", db]);
        out.push(format!("db {db}: {}", String::from_utf8_lossy(&r.call(&["DBSIZE"])).trim()));
    }
    r.call(&["SELECT", "0"]);
    out.push(format!("kept: {}", String::from_utf8_lossy(&r.call(&["EXISTS", "kept"])).trim()));
    // A write to the master's key past its deadline makes it anew, with
    // no deadline.
    out.push(format!(
        "incr: {}",
        String::from_utf8_lossy(&r.call(&["INCR", "from-master"])).trim()
    ));
    out.push(format!("ttl: {}", String::from_utf8_lossy(&r.call(&["TTL", "from-master"])).trim()));
    assert_eq!(m.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
    out
}

#[test]
fn a_writable_replica_expires_the_keys_its_clients_gave_a_deadline_as_redis_server_does() {
    let master = Binary::start(&["--enable-debug-command", "yes"]);
    let replica = Binary::start(&[]);
    let ours = writable_replica_expiry_scenario(master.addr, replica.addr);
    // Its own keys went; the master's stays until the master's DEL.
    assert_eq!(ours, ["db 0: :2", "db 3: :0", "kept: :1", "incr: :1", "ttl: :-1"]);
    let (Some(redis_master), Some(redis_replica)) = (real_redis_with(&["--enable-debug-command", "yes"]), real_redis_with(&[])) else {
        return;
    };
    assert_eq!(ours, writable_replica_expiry_scenario(redis_master.addr, redis_replica.addr));
}

/// A master and its replica, in sync on `k` = 1, the replica then stopped
/// (SIGSTOP) and `k` incremented: the master's replica is behind.
fn master_with_a_stopped_replica(extra: &[&str]) -> (Binary, Binary, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("master.log");
    let mut args = vec!["--logfile", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    let master = Binary::start(&args);
    let replica = Binary::start(&[]);
    let (mut m, mut r) = (Raw::connect(master.addr), Raw::connect(replica.addr));
    replicaof(&mut r, master.addr);
    wait_link_up(&mut r);
    assert_eq!(m.call(&["SET", "k", "1"]), b"+OK\r\n");
    wait_offsets_equal(&mut m, &mut r);
    replica.signal(libc::SIGSTOP);
    assert_eq!(m.call(&["INCR", "k"]), b":2\r\n");
    (master, replica, log, dir)
}

fn shutdown_in_ms(m: &mut Raw) -> Option<u64> {
    let info = String::from_utf8(m.call(&["INFO", "server"])).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("shutdown_in_milliseconds:")?.trim().parse().ok())
}

#[test]
fn a_shutdown_waits_for_a_lagging_replica_with_writes_paused_then_exits() {
    for how in ["shutdown", "sigterm"] {
        let (mut master, replica, log, _dir) = master_with_a_stopped_replica(&[]);
        let mut m = Raw::connect(master.addr);
        let mut shut = Raw::connect(master.addr);
        match how {
            "shutdown" => shut.send_cmd(&[b"SHUTDOWN"]),
            _ => master.signal(libc::SIGTERM),
        }
        wait_until(5, "the master to wait for its replica", || {
            shutdown_in_ms(&mut m).is_some_and(|ms| ms > 0)
        });
        // Reads are served meanwhile; writes wait.
        assert_eq!(m.call(&["GET", "k"]), b"$1\r\n2\r\n", "{how}");
        let mut writer = Raw::connect(master.addr);
        writer.send_cmd(&[b"SET", b"x", b"1"]);
        assert!(silent_for(&mut writer, std::time::Duration::from_millis(300)), "{how}: a write ran");
        // The replica catches up; the master goes.
        replica.signal(libc::SIGCONT);
        assert!(master.wait_exit(20).success(), "{how}");
        let mut r = Raw::connect(replica.addr);
        assert_eq!(r.call(&["GET", "k"]), b"$1\r\n2\r\n", "{how}");
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(logged.contains("Waiting for replicas before shutting down."), "{how}: {logged}");
        assert!(
            logged.contains("1 of 1 replicas are in sync when shutting down."),
            "{how}: {logged}"
        );
        assert!(!logged.contains("Lagging replica"), "{how}: {logged}");
        assert_eq!(logged.matches("User requested shutdown...").count(), 1, "{how}: {logged}");
    }
}

#[test]
fn shutdown_abort_gives_up_the_wait_and_shutdown_timeout_ends_it() {
    let (mut master, replica, log, _dir) = master_with_a_stopped_replica(&[]);
    let mut m = Raw::connect(master.addr);
    assert_eq!(m.call(&["SHUTDOWN", "ABORT"]), b"-ERR No shutdown in progress.\r\n");
    assert_eq!(m.call(&["SHUTDOWN", "ABORT", "NOW"]), b"-ERR syntax error\r\n");
    let mut shut = Raw::connect(master.addr);
    shut.send_cmd(&[b"SHUTDOWN"]);
    wait_until(5, "the master to wait for its replica", || shutdown_in_ms(&mut m).is_some());
    let mut writer = Raw::connect(master.addr);
    writer.send_cmd(&[b"SET", b"x", b"1"]);
    assert!(silent_for(&mut writer, std::time::Duration::from_millis(200)));
    // Given up: SHUTDOWN is told, the paused write runs.
    assert_eq!(m.call(&["SHUTDOWN", "ABORT"]), b"+OK\r\n");
    assert_eq!(shut.reply(), b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n");
    assert_eq!(writer.reply(), b"+OK\r\n");
    assert_eq!(shutdown_in_ms(&mut m), None);
    // With a one-second timeout it goes without the stopped replica.
    assert_eq!(m.call(&["CONFIG", "SET", "shutdown-timeout", "1"]), b"+OK\r\n");
    shut.send_cmd(&[b"SHUTDOWN"]);
    assert!(master.wait_exit(10).success());
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("Shutdown manually aborted."), "{logged}");
    assert!(logged.contains("Lagging replica 127.0.0.1:"), "{logged}");
    assert!(logged.contains("0 of 1 replicas are in sync when shutting down."), "{logged}");
    replica.signal(libc::SIGCONT);
}

#[test]
fn connected_clients_leaves_replicas_out_as_redis_server_does() {
    let s = start();
    let mut counts = Vec::new();
    let redis = real_redis_with(&[]);
    for addr in std::iter::once(s.addr()).chain(redis.as_ref().map(|r| r.addr)) {
        let _replica = replica_after(addr, &[]);
        let mut c = Raw::connect(addr);
        counts.push((
            info_value(&mut c, "clients", "connected_clients"),
            info_value(&mut c, "replication", "connected_slaves"),
        ));
    }
    assert_eq!(counts[0], ("1".to_string(), "1".to_string()));
    if counts.len() == 2 {
        assert_eq!(counts[0], counts[1]);
    }
}
