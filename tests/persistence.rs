//! RDB snapshots: SAVE, BGSAVE, the `save` schedule, SHUTDOWN and SIGTERM
//! saving, DEBUG RELOAD, and loading at start, in Redis 7.0's format: what
//! keylock saves loads in redis-server 7.0.15 with the same DEBUG DIGEST
//! (every type, deadlines, several databases, function libraries), and
//! what redis-server saves loads in keylock the same way.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Binary, Raw, text};

fn info_field(c: &mut Raw, field: &str) -> String {
    common::info_value(c, "everything", field)
}

fn keylock_in(dir: &std::path::Path, extra: &[&str]) -> Binary {
    common::keylock_in_dir(dir, extra)
}

/// Fills a server with every type Redis 7.0 has, in both encodings where
/// there are two, with deadlines, in two databases, and a library.
fn fill(c: &mut Raw) {
    let many = |prefix: &str, n: usize, pairs: bool| -> Vec<String> {
        (0..n)
            .flat_map(|i| {
                if pairs {
                    vec![format!("{i}"), format!("{prefix}{i}")]
                } else {
                    vec![format!("{prefix}{i}")]
                }
            })
            .collect()
    };
    let call = |c: &mut Raw, head: &[&str], rest: Vec<String>| {
        let mut args: Vec<&str> = head.to_vec();
        args.extend(rest.iter().map(String::as_str));
        let reply = c.call(&args);
        assert!(!reply.starts_with(b"-"), "{head:?}: {}", text(reply));
    };
    call(c, &["SET", "str", "hello"], vec![]);
    call(c, &["SET", "int", "12345"], vec![]);
    call(c, &["SET", "long", &"compressible ".repeat(40)], vec![]);
    call(c, &["SET", "ttl", "v", "PX", "100000000"], vec![]);
    call(c, &["RPUSH", "list"], many("e", 5, false));
    call(c, &["RPUSH", "biglist"], many("element-", 2000, false));
    call(c, &["SADD", "intset", "1", "2", "3"], vec![]);
    call(c, &["SADD", "set"], many("m", 300, false));
    call(c, &["HSET", "hash", "f", "v", "g", "2"], vec![]);
    call(c, &["HSET", "bighash"], many("v", 300, true));
    call(c, &["ZADD", "zset", "1", "a", "2.5", "b"], vec![]);
    call(c, &["ZADD", "bigzset"], many("member", 300, true));
    call(c, &["PFADD", "hll", "a", "b", "c"], vec![]);
    call(c, &["SETBIT", "bits", "1000", "1"], vec![]);
    call(c, &["XADD", "stream", "1-1", "f", "v"], vec![]);
    call(c, &["XADD", "stream", "1-2", "g", "w"], vec![]);
    call(c, &["XGROUP", "CREATE", "stream", "group", "0"], vec![]);
    call(
        c,
        &["XREADGROUP", "GROUP", "group", "alice", "COUNT", "1", "STREAMS", "stream", ">"],
        vec![],
    );
    call(c, &["EXPIRE", "hash", "100000"], vec![]);
    call(c, &["SELECT", "7"], vec![]);
    call(c, &["SET", "in-db-7", "x"], vec![]);
    call(c, &["SELECT", "0"], vec![]);
    call(
        c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('answer', function() return 42 end)",
        ],
        vec![],
    );
}

#[test]
fn what_keylock_saves_loads_in_redis_server_with_the_same_digest() {
    let Some(redis) = common::real_redis_with(&["--enable-debug-command", "yes", "--enable-protected-configs", "yes"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    fill(&mut c);
    let digest = c.call(&["DEBUG", "DIGEST"]);
    assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut c, "rdb_saves"), "1");

    // The real server loads the file: point it at keylock's directory.
    let mut r = Raw::connect(redis.addr);
    assert_eq!(r.call(&["CONFIG", "SET", "dir", dir.path().to_str().unwrap()]), b"+OK\r\n");
    assert_eq!(r.call(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(r.call(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(r.call(&["FCALL", "answer", "0"]), b":42\r\n");
    assert!(text(r.call(&["PTTL", "ttl"])).starts_with(':'));
    assert_eq!(r.call(&["OBJECT", "ENCODING", "intset"]), b"$6\r\nintset\r\n");
}

#[test]
fn what_redis_server_saves_loads_in_keylock_at_start_with_the_same_digest() {
    let Some(redis) = common::real_redis_with(&["--enable-debug-command", "yes", "--enable-protected-configs", "yes"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut r = Raw::connect(redis.addr);
    fill(&mut r);
    assert_eq!(r.call(&["CONFIG", "SET", "dir", dir.path().to_str().unwrap()]), b"+OK\r\n");
    assert_eq!(r.call(&["SAVE"]), b"+OK\r\n");
    let digest = r.call(&["DEBUG", "DIGEST"]);

    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(c.call(&["FCALL", "answer", "0"]), b":42\r\n");
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_loaded"), "16");
    assert!(c.call(&["XPENDING", "stream", "group"]).starts_with(b"*4\r\n:1\r\n"));
}

#[test]
fn a_held_lock_survives_a_restart_with_its_remaining_lease() {
    let dir = tempfile::tempdir().unwrap();
    let acquire = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");
    let mut keylock = keylock_in(dir.path(), &["--save", "3600 1"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["EVAL", acquire, "1", "orders", "60000", "client-1:thread-1"]), b"$-1\r\n");
    // SHUTDOWN with save points writes the final snapshot.
    c.send_cmd(&[b"SHUTDOWN"]);
    assert!(keylock.wait_exit(10).success());

    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["HGET", "orders", "client-1:thread-1"]), b"$1\r\n1\r\n");
    let pttl: i64 = text(c.call(&["PTTL", "orders"]))[1..].trim().parse().unwrap();
    assert!((50_000..=60_000).contains(&pttl), "{pttl}");
    // Another owner is refused: the lease is held.
    assert!(text(c.call(&["EVAL", acquire, "1", "orders", "60000", "client-2:thread-1"])).starts_with(':'));
}

#[test]
fn sigterm_saves_with_save_points_and_shutdown_nosave_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--save", "3600 1"]);
    Raw::connect(keylock.addr).call(&["SET", "k", "v"]);
    let mut keylock = keylock;
    keylock.signal(libc::SIGTERM);
    assert!(keylock.wait_exit(10).success());
    assert!(dir.path().join("dump.rdb").exists());

    let mut keylock = keylock_in(dir.path(), &["--save", "3600 1"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["GET", "k"]), b"$1\r\nv\r\n");
    c.call(&["SET", "k", "changed"]);
    c.send_cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(keylock.wait_exit(10).success());

    let keylock = keylock_in(dir.path(), &[]);
    assert_eq!(Raw::connect(keylock.addr).call(&["GET", "k"]), b"$1\r\nv\r\n");
}

#[test]
fn bgsave_writes_the_dataset_as_it_was_when_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["DEBUG", "POPULATE", "20000", "key", "100"]);
    let lastsave = c.call(&["LASTSAVE"]);
    // With the cron paused, the child is not reaped: the save stays in
    // progress for the engine until the cron runs again.
    c.call(&["DEBUG", "PAUSE-CRON", "1"]);
    assert_eq!(c.call(&["BGSAVE"]), b"+Background saving started\r\n");
    // Written after the fork: not in the snapshot.
    c.call(&["SET", "later", "v"]);
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
    assert_eq!(c.call(&["BGSAVE"]), b"-ERR Background save already in progress\r\n");
    // As Redis: SCHEDULE waits only for another kind of child.
    assert_eq!(c.call(&["BGSAVE", "SCHEDULE"]), b"-ERR Background save already in progress\r\n");
    assert_eq!(c.call(&["SAVE"]), b"-ERR Background save already in progress\r\n");
    c.call(&["DEBUG", "PAUSE-CRON", "0"]);
    common::wait_until(30, "the background save ends", || {
        info_field(&mut c, "rdb_bgsave_in_progress") == "0" && info_field(&mut c, "rdb_saves") == "1"
    });
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert!(info_field(&mut c, "latest_fork_usec").parse::<u64>().unwrap() > 0);
    // The snapshot is the 20000 keys; what came after is one change.
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    assert!(text(c.call(&["LASTSAVE"])) >= text(lastsave));
    assert_eq!(c.call(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(c.call(&["DBSIZE"]), b":20000\r\n");
}

#[test]
fn the_save_schedule_saves_once_enough_changes_are_old_enough() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--save", "1 2", "--hz", "50"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["SET", "a", "1"]);
    std::thread::sleep(Duration::from_millis(2500));
    // One change is below the point's two.
    assert_eq!(info_field(&mut c, "rdb_saves"), "0");
    c.call(&["SET", "b", "2"]);
    // Counted when the save starts, as Redis's `rdb_saves`.
    common::wait_until(10, "the schedule saves", || {
        info_field(&mut c, "rdb_saves") == "1" && info_field(&mut c, "rdb_bgsave_in_progress") == "0"
    });
    assert!(dir.path().join("dump.rdb").exists());
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
}

#[test]
fn debug_reload_round_trips_through_the_file_and_nosave_loads_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    fill(&mut c);
    let digest = c.call(&["DEBUG", "DIGEST"]);
    assert_eq!(c.call(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(c.call(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(c.call(&["FCALL", "answer", "0"]), b":42\r\n");
    // What changed since the file was written is gone after NOSAVE.
    c.call(&["SET", "unsaved", "1"]);
    assert_eq!(c.call(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(c.call(&["EXISTS", "unsaved"]), b":0\r\n");
    assert_eq!(c.call(&["DEBUG", "DIGEST"]), digest);
}

#[test]
fn flushall_with_save_points_leaves_nothing_unsaved() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--save", "3600 1"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["SET", "a", "1"]);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    c.call(&["FLUSHALL"]);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    // Without save points the change count stays (Redis's unit/other).
    c.call(&["CONFIG", "SET", "save", ""]);
    c.call(&["SET", "a", "1"]);
    c.call(&["FLUSHALL"]);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "2");
}

#[test]
fn a_damaged_snapshot_stops_the_start_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["SET", "k", "v"]);
    c.call(&["SAVE"]);
    drop(keylock);
    let path = dir.path().join("dump.rdb");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 12;
    bytes[at] ^= 0x55;
    std::fs::write(&path, bytes).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args(["--port", "0", "--dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("Fatal error loading the DB"), "{log}");
    // The file and where in it reading stopped are named.
    // The checksum is read last: reading stopped at the end of the file.
    let expected = format!("Internal error in RDB reading offset {} of {}", at + 12, path.display());
    assert!(log.contains(&expected), "{log}");
}

#[test]
fn save_reports_a_write_failure_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["SET", "k", "v"]);
    // A directory where the file should be: the rename fails.
    std::fs::create_dir(dir.path().join("dump.rdb")).unwrap();
    assert_eq!(c.call(&["SAVE"]), b"-ERR\r\n");
    // Only a background save's outcome is the status, as in Redis.
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(c.call(&["BGSAVE"]), b"+Background saving started\r\n");
    common::wait_until(10, "the save to end", || info_field(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "err");
    assert_eq!(c.call(&["SHUTDOWN", "SAVE"]), b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n");
    c.call(&["PING"]);
}

/// What a server answers once a snapshot failed while save points are
/// set, then once it saves again.
fn misconf_scenario(c: &mut Raw, dir: &std::path::Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // Started (and done loading) before the file is made unwritable.
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    std::fs::create_dir(dir.join("dump.rdb")).unwrap();
    for args in [&["SET", "k", "v"][..], &["SAVE"], &["SET", "k1", "v"], &["BGSAVE"]] {
        out.push(c.call(args));
    }
    common::wait_until(10, "the save to end", || {
        common::info_value(c, "persistence", "rdb_bgsave_in_progress") == "0"
    });
    for args in [
        &["SET", "k2", "v"][..],
        &["PING"],
        &["GET", "k"],
        &["EVAL", "return redis.call('get', 'k')", "0"],
        &["EVAL", "return redis.call('set', 'x', 1)", "0"],
        &["EVAL", "#!lua\nreturn redis.call('get', 'k')", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'k')", "0"],
        &["MULTI"],
        &["GET", "k"],
        &["INCR", "n"],
        &["EXEC"],
        &["CONFIG", "SET", "save", ""],
        &["SET", "k3", "v"],
        &["CONFIG", "SET", "save", "3600 1"],
        &["SET", "k4", "v"],
    ] {
        out.push(c.call(args));
    }
    std::fs::remove_dir(dir.join("dump.rdb")).unwrap();
    for args in [&["SAVE"][..], &["SET", "k5", "v"], &["PING"]] {
        out.push(c.call(args));
    }
    out
}

#[test]
fn a_failed_save_with_save_points_refuses_writes_with_misconf_as_redis_does() {
    let redis_dir = tempfile::tempdir().unwrap();
    let Some(redis) = common::real_redis_with(&["--save", "3600 1", "--dir", redis_dir.path().to_str().unwrap()]) else {
        return;
    };
    let expected = misconf_scenario(&mut Raw::connect(redis.addr), redis_dir.path());
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--save", "3600 1"]);
    let got = misconf_scenario(&mut Raw::connect(keylock.addr), dir.path());
    for (i, (got, expected)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(text(got.clone()), text(expected.clone()), "step {i}");
    }
    assert!(text(expected[4].clone()).starts_with("-MISCONF"));
}

/// A child process killed when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a client connecting while `dir`'s snapshot of 2,000 keys loads
/// slowly (`key-load-delay`) is told, then once the load is done.
fn while_loading(start: &dyn Fn(&[&str]) -> SocketAddr) -> Vec<String> {
    let addr = start(&[]);
    let mut c = Raw::connect(addr);
    c.call(&["DEBUG", "POPULATE", "2000"]);
    assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    common::send_args(&mut c, &["SHUTDOWN", "NOSAVE"]);
    assert!(c.is_closed());
    let addr = start(&["--key-load-delay", "500", "--loading-process-events-interval-bytes", "1024"]);
    let mut c = Raw::connect(addr);
    let mut seen = vec![
        text(c.call(&["PING"])),
        text(c.call(&["GET", "key:1"])),
        text(c.call(&["SET", "k", "v"])),
        text(c.call(&["MULTI"])),
        text(c.call(&["DBSIZE"])),
        text(c.call(&["EXEC"])),
        text(c.call(&["CLIENT", "SETNAME", "loader"])),
        info_field(&mut c, "loading"),
        text(c.call(&["CONFIG", "GET", "key-load-delay"])),
        text(c.call(&["CONFIG", "SET", "dir", "no-such-dir"])),
        text(c.call(&["CONFIG", "SET", "maxmemory", "1gb", "appendonly", "yes"])),
        text(c.call(&["CONFIG", "SET", "loglevel", "verbose"])),
    ];
    let info = text(c.call(&["INFO", "persistence"]));
    for field in [
        "loading_start_time",
        "loading_total_bytes",
        "loading_loaded_bytes",
        "loading_eta_seconds",
    ] {
        seen.push(format!("{field} shown: {}", info.contains(&format!("\r\n{field}:"))));
    }
    // The rest loads at full speed.
    seen.push(text(c.call(&["CONFIG", "SET", "key-load-delay", "0"])));
    common::wait_until(30, "the load to end", || info_field(&mut c, "loading") == "0");
    seen.push(text(c.call(&["DBSIZE"])));
    seen.push(text(c.call(&["PING"])));
    seen
}

#[test]
fn clients_are_answered_loading_while_the_snapshot_loads_as_redis_answers_them() {
    if !common::redis_server_found() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let redis = std::cell::RefCell::new(None);
    let expected = while_loading(&|extra| {
        // Started by hand: redis-server says it is ready only once loaded.
        let port = common::free_port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "3600 1"])
            .args(["--enable-debug-command", "yes", "--dir", dir.path().to_str().unwrap()])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        *redis.borrow_mut() = Some(KillOnDrop(child));
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        common::wait_until(10, "redis-server to listen", || std::net::TcpStream::connect(addr).is_ok());
        addr
    });
    let dir = tempfile::tempdir().unwrap();
    let keylock = std::cell::RefCell::new(None);
    let got = while_loading(&|extra| {
        let mut args = vec!["--save", "3600 1"];
        args.extend_from_slice(extra);
        let server = keylock_in(dir.path(), &args);
        let addr = server.addr;
        *keylock.borrow_mut() = Some(server);
        addr
    });
    assert_eq!(got, expected);
    assert!(expected[0].starts_with("-LOADING"), "{expected:?}");
    assert_eq!(expected[7], "1");
}

#[test]
fn sigterm_whose_snapshot_fails_leaves_the_server_running_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(dir.path(), &["--save", "3600 1"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["SET", "k", "v"]);
    std::fs::create_dir(dir.path().join("dump.rdb")).unwrap();
    keylock.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(500));
    // Nothing saved, so nothing lost: it serves on.
    assert_eq!(c.call(&["GET", "k"]), b"$1\r\nv\r\n");
    assert_eq!(c.call(&["SET", "k2", "v"]), b"+OK\r\n");
    std::fs::remove_dir(dir.path().join("dump.rdb")).unwrap();
    keylock.signal(libc::SIGTERM);
    assert_eq!(keylock.wait_exit(10).code(), Some(0));
    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["MGET", "k", "k2"]), b"*2\r\n$1\r\nv\r\n$1\r\nv\r\n");
}

/// The children of process `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|stat| stat.rsplit(") ").next()?.split(' ').nth(1)?.parse::<u32>().ok())
                == Some(pid)
        })
        .collect()
}

#[test]
fn rdb_key_save_delay_slows_the_background_save_whose_child_can_be_killed() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["DEBUG", "POPULATE", "20"]);
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]), b"+OK\r\n");
    assert_eq!(c.call(&["BGSAVE"]), b"+Background saving started\r\n");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
    let children = children_of(keylock.pid());
    assert_eq!(children.len(), 1, "{children:?}");
    // SAFETY: kills the test's own grandchild, the save's child process.
    unsafe { libc::kill(children[0] as i32, libc::SIGKILL) };
    common::wait_until(10, "the save to end", || info_field(&mut c, "rdb_bgsave_in_progress") == "0");
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "err");
}

#[test]
fn a_save_child_does_not_hold_the_listening_port() {
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["DEBUG", "POPULATE", "20"]);
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]), b"+OK\r\n");
    assert_eq!(c.call(&["BGSAVE"]), b"+Background saving started\r\n");
    let children = children_of(keylock.pid());
    assert_eq!(children.len(), 1, "{children:?}");
    let kill_child = || {
        // SAFETY: kills the test's own grandchild, the save's child process.
        unsafe { libc::kill(children[0] as i32, libc::SIGKILL) };
    };
    // The server goes; its port is free while the child (20 s of
    // writing) still runs.
    keylock.signal(libc::SIGKILL);
    keylock.wait_exit(10);
    let refused = std::net::TcpStream::connect(keylock.addr).is_err();
    kill_child();
    assert!(refused, "the port still accepted connections after the server was gone");
}

/// Whether process `pid` has ended (gone, or a zombie no one reaps).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |stat| stat.rsplit(") ").next().is_some_and(|rest| rest.starts_with('Z')))
}

#[test]
fn a_save_child_ends_when_its_server_is_killed() {
    // A BGSAVE's child, and the one a replica syncing from disk waits for.
    for replica in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut keylock = keylock_in(dir.path(), &["--repl-diskless-sync", "no"]);
        let mut c = Raw::connect(keylock.addr);
        c.call(&["DEBUG", "POPULATE", "20"]);
        assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]), b"+OK\r\n");
        let mut r = Raw::connect(keylock.addr);
        if replica {
            r.send_cmd(&[b"PSYNC", b"?", b"-1"]);
        } else {
            assert_eq!(c.call(&["BGSAVE"]), b"+Background saving started\r\n");
        }
        common::wait_until(10, "the save's child to start", || {
            info_field(&mut c, "rdb_bgsave_in_progress") == "1"
        });
        let children = children_of(keylock.pid());
        assert_eq!(children.len(), 1, "{children:?}");
        // As by the OOM killer: the child (20 s of writing) stops too.
        keylock.signal(libc::SIGKILL);
        keylock.wait_exit(10);
        common::wait_until(5, "the orphaned child to end", || ended(children[0]));
    }
}

#[test]
fn sigterm_while_a_child_writes_a_replicas_snapshot_saves_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(dir.path(), &["--save", "3600 1"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["DEBUG", "POPULATE", "20"]);
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "1000000"]), b"+OK\r\n");
    // A replica whose snapshot's child writes for 20 s.
    let mut replica = Raw::connect(keylock.addr);
    assert_eq!(replica.call(&["REPLCONF", "capa", "eof", "capa", "psync2"]), b"+OK\r\n");
    replica.send_cmd(&[b"PSYNC", b"?", b"-1"]);
    common::wait_until(10, "the snapshot's child to start", || {
        info_field(&mut c, "rdb_bgsave_in_progress") == "1"
    });
    let children = children_of(keylock.pid());
    // The child goes on at 1 s a key; the final save is to be quick.
    assert_eq!(c.call(&["CONFIG", "SET", "rdb-key-save-delay", "0"]), b"+OK\r\n");
    // The child is ended (Redis's `killRDBChild`), the dataset saved, and
    // the server gone.
    keylock.signal(libc::SIGTERM);
    let exited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| keylock.wait_exit(10)));
    for child in children {
        // SAFETY: kills the test's own grandchild, if it is still there.
        unsafe { libc::kill(child as i32, libc::SIGKILL) };
    }
    assert_eq!(exited.expect("keylock exits").code(), Some(0));
    let keylock = keylock_in(dir.path(), &[]);
    assert_eq!(Raw::connect(keylock.addr).call(&["DBSIZE"]), b":20\r\n");
}
