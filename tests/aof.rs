//! The append-only file: with `appendfsync always` a write acknowledged
//! is on disk (the process killed with SIGKILL right after loses none);
//! keylock's files load in redis-server 7.0.15 with the same DEBUG DIGEST
//! and redis-server's in keylock; BGREWRITEAOF, CONFIG SET appendonly and
//! a truncated tail behave as Redis's.

mod common;

use common::{Binary, Raw, text};

fn info_field(c: &mut Raw, field: &str) -> String {
    common::info_value(c, "persistence", field)
}

fn keylock_in(dir: &std::path::Path, extra: &[&str]) -> Binary {
    common::keylock_in_dir(dir, extra)
}

const ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");

/// Writes of every kind whose effects differ from the command sent.
fn write_things(c: &mut Raw) {
    for args in [
        &["SET", "plain", "v"][..],
        &["SET", "leased", "v", "EX", "1000"],
        &["INCRBYFLOAT", "float", "1.5"],
        &["RPUSH", "list", "a", "b", "c"],
        &["LPOP", "list"],
        &["SADD", "set", "x"],
        &["SPOP", "set"],
        &["HSET", "hash", "f", "1"],
        &["EXPIRE", "hash", "1000"],
        &["ZADD", "zset", "1", "m"],
        &["XADD", "stream", "*", "f", "v"],
        &["XADD", "stream", "*", "f", "w"],
        &["XGROUP", "CREATE", "stream", "group", "0"],
        &["XREADGROUP", "GROUP", "group", "alice", "COUNT", "1", "STREAMS", "stream", ">"],
        &["XGROUP", "CREATECONSUMER", "stream", "group", "bob"],
        &["XADD", "emptied", "5-1", "f", "v"],
        &["XDEL", "emptied", "5-1"],
        &["ZADD", "scores", "inf", "top", "-inf", "bottom", "1.5", "mid", "0.1", "tenth"],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
        ],
        &["SELECT", "3"],
        &["SET", "in-db-3", "v"],
        &["SELECT", "0"],
        &["MULTI"],
        &["INCR", "counter"],
        &["INCR", "counter"],
        &["EXEC"],
        &[
            "EVAL",
            "redis.call('set', 'by-script', 1) return redis.call('incr', 'counter')",
            "0",
        ],
        &["EVAL", ACQUIRE, "1", "orders", "60000", "client-1:thread-1"],
    ] {
        let reply = c.call(args);
        assert!(!reply.starts_with(b"-"), "{args:?}: {}", text(reply));
    }
    // More items than one rewritten command holds.
    let items: Vec<String> = (0..150).map(|i| i.to_string()).collect();
    let mut args = vec!["RPUSH", "long-list"];
    args.extend(items.iter().map(String::as_str));
    c.call(&args);
    args[0] = "SADD";
    args[1] = "big-set";
    c.call(&args);
    args[0] = "HSET";
    args[1] = "big-hash";
    c.call(&args);
}

#[test]
fn an_acknowledged_write_survives_sigkill_with_appendfsync_always() {
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = Raw::connect(keylock.addr);
    write_things(&mut c);
    let digest = c.call(&["DEBUG", "DIGEST"]);
    keylock.signal(libc::SIGKILL);
    keylock.wait_exit(10);

    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["DEBUG", "DIGEST"]), digest);
    // The lock taken natively is held, its lease counting from when it
    // was taken.
    assert_eq!(c.call(&["HGET", "orders", "client-1:thread-1"]), b"$1\r\n1\r\n");
    let pttl: i64 = text(c.call(&["PTTL", "orders"]))[1..].trim().parse().unwrap();
    assert!((50_000..=60_000).contains(&pttl), "{pttl}");
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
}

#[test]
fn keylocks_append_only_file_loads_in_redis_server_and_the_reverse() {
    round_trip_with_redis_server("yes");
}

#[test]
fn with_aof_use_rdb_preamble_no_the_base_is_commands_that_load_in_redis_server_and_the_reverse() {
    round_trip_with_redis_server("no");
}

/// keylock's files, rewritten once and appended to, load in redis-server
/// with the same digest, and redis-server's, rewritten there, in keylock;
/// bases are snapshots or commands as `aof-use-rdb-preamble` says.
fn round_trip_with_redis_server(preamble: &str) {
    let Some(redis) = common::real_redis_with(&[
        "--enable-debug-command",
        "yes",
        "--enable-protected-configs",
        "yes",
        "--aof-use-rdb-preamble",
        preamble,
    ]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(dir.path(), &["--appendonly", "yes", "--aof-use-rdb-preamble", preamble]);
    let mut c = Raw::connect(keylock.addr);
    write_things(&mut c);
    // A rewrite in the middle: a new base, then more increments.
    assert_eq!(c.call(&["BGREWRITEAOF"]), b"+Background append only file rewriting started\r\n");
    common::wait_until(30, "the rewrite ends", || info_field(&mut c, "aof_rewrites") == "1");
    c.call(&["SET", "after-rewrite", "v"]);
    c.call(&["DEL", "plain"]);
    let digest = c.call(&["DEBUG", "DIGEST"]);
    // What the digest leaves out: consumer groups and their pending entries.
    let groups = |c: &mut Raw| {
        (
            c.call(&["XINFO", "GROUPS", "stream"]),
            c.call(&["XPENDING", "stream", "group"]),
            c.call(&["XINFO", "STREAM", "emptied"]),
            c.call(&["FUNCTION", "LIST"]),
        )
    };
    let stream_state = groups(&mut c);
    c.send_cmd(&[b"SHUTDOWN"]);
    keylock.wait_exit(10);
    let files: Vec<String> = std::fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 3, "the old base and increments are gone: {files:?}");
    let base_kind = if preamble == "yes" { ".base.rdb" } else { ".base.aof" };
    assert!(files.iter().any(|f| f.ends_with(base_kind)), "{files:?}");

    // redis-server loads keylock's files and appends to them.
    let mut r = Raw::connect(redis.addr);
    assert_eq!(r.call(&["CONFIG", "SET", "dir", dir.path().to_str().unwrap()]), b"+OK\r\n");
    assert_eq!(r.call(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    assert_eq!(r.call(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(groups(&mut r), stream_state);
    r.call(&["SET", "from-redis", "v"]);
    r.call(&["SET", "leased-by-redis", "v", "PX", "500000"]);
    let digest = r.call(&["DEBUG", "DIGEST"]);
    assert_eq!(r.call(&["CONFIG", "SET", "appendonly", "yes"]), b"+OK\r\n");
    common::wait_until(30, "redis rewrites its AOF", || {
        text(r.call(&["INFO", "persistence"])).contains("aof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0")
            && text(r.call(&["INFO", "persistence"])).contains("aof_rewrites:1")
    });
    r.call(&["SET", "appended-by-redis", "v"]);
    let digest_after = r.call(&["DEBUG", "DIGEST"]);
    assert_ne!(digest, digest_after);
    drop(redis);
    let files: Vec<String> = std::fs::read_dir(dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(files.iter().any(|f| f.ends_with(base_kind)), "{files:?}");

    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["DEBUG", "DIGEST"]), digest_after);
    assert_eq!(groups(&mut c), stream_state);
}

#[test]
fn config_set_appendonly_writes_the_dataset_as_the_base_and_no_stops_appending() {
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(dir.path(), &[]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["SET", "before", "v"]);
    assert_eq!(info_field(&mut c, "aof_enabled"), "0");
    assert_eq!(c.call(&["CONFIG", "SET", "appendonly", "yes"]), b"+OK\r\n");
    assert_eq!(info_field(&mut c, "aof_enabled"), "1");
    c.call(&["SET", "during", "v"]);
    assert_eq!(c.call(&["CONFIG", "SET", "appendonly", "no"]), b"+OK\r\n");
    c.call(&["SET", "after", "v"]);
    c.send_cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    keylock.wait_exit(10);

    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    let mut keys = text(c.call(&["KEYS", "*"]));
    keys = keys.lines().filter(|l| !l.starts_with(['*', '$'])).collect::<Vec<_>>().join(" ");
    let mut keys: Vec<&str> = keys.split(' ').collect();
    keys.sort();
    assert_eq!(keys, ["before", "during"]);
}

#[test]
fn debug_loadaof_loads_the_file_back_and_appends_nothing_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    write_things(&mut c);
    let digest = c.call(&["DEBUG", "DIGEST"]);
    let size = info_field(&mut c, "aof_current_size");
    assert_eq!(c.call(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    assert_eq!(c.call(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(info_field(&mut c, "aof_current_size"), size);
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    c.call(&["SET", "more", "v"]);
    assert_eq!(c.call(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    assert_eq!(c.call(&["GET", "more"]), b"$1\r\nv\r\n");
}

#[test]
fn a_truncated_last_command_is_cut_off_or_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["SET", "kept", "v"]);
    c.call(&["SET", "torn", "v"]);
    keylock.signal(libc::SIGKILL);
    keylock.wait_exit(10);
    let incr = dir.path().join("appendonlydir").join("appendonly.aof.1.incr.aof");
    let bytes = std::fs::read(&incr).unwrap();
    std::fs::write(&incr, &bytes[..bytes.len() - 5]).unwrap();

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args([
            "--port",
            "0",
            "--dir",
            dir.path().to_str().unwrap(),
            "--appendonly",
            "yes",
            "--aof-load-truncated",
            "no",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("Unexpected end of file"), "{log}");
    // Which file, and where in it.
    assert!(log.contains(".incr.aof ends in the middle of a command at offset "), "{log}");

    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["GET", "kept"]), b"$1\r\nv\r\n");
    assert_eq!(c.call(&["EXISTS", "torn"]), b":0\r\n");
    // The file was cut back to its last whole command and goes on there.
    c.call(&["SET", "next", "v"]);
    assert_eq!(c.call(&["GET", "next"]), b"$1\r\nv\r\n");
}

#[test]
fn the_file_replays_whatever_the_default_user_may_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["SET", "k", "v"]);
    c.send_cmd(&[b"SHUTDOWN"]);
    keylock.wait_exit(10);
    // The default user may no longer SET: the file still loads.
    let keylock = keylock_in(
        dir.path(),
        &["--appendonly", "yes", "--user", "default", "on", "nopass", "~*", "+@all", "-set"],
    );
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["GET", "k"]), b"$1\r\nv\r\n");
    assert!(text(c.call(&["SET", "k", "w"])).starts_with("-NOPERM"));
}

/// Milliseconds since `t`.
fn ms_since(t: std::time::Instant) -> u128 {
    t.elapsed().as_millis()
}

#[test]
fn with_appendfsync_always_replies_wait_for_the_disk_and_reads_of_unsynced_writes_wait_too() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut writer = Raw::connect(keylock.addr);
    let mut reader = Raw::connect(keylock.addr);
    assert_eq!(writer.call(&["KEYLOCK", "FAULT", "ADD", "SLOW-FSYNC", "600"]), b":1\r\n");

    // The write ran at once, but its reply waits for the sync.
    let t = std::time::Instant::now();
    assert_eq!(writer.call(&["SET", "k", "v1"]), b"+OK\r\n");
    assert!(ms_since(t) >= 600, "replied after {} ms", ms_since(t));

    // With nothing waiting for the disk, a read is not held back.
    let t = std::time::Instant::now();
    assert_eq!(reader.call(&["GET", "k"]), b"$2\r\nv1\r\n");
    assert!(ms_since(t) < 400, "replied after {} ms", ms_since(t));

    // A read of a write that is not on disk yet waits for the same sync:
    // no one hears of a write the disk may still lose.
    common::send_args(&mut writer, &["SET", "k", "v2"]);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let t = std::time::Instant::now();
    common::send_args(&mut reader, &["GET", "k"]);
    assert!(common::silent_for(&mut reader, std::time::Duration::from_millis(250)));
    assert_eq!(reader.reply(), b"$2\r\nv2\r\n");
    assert!(ms_since(t) >= 400, "replied after {} ms", ms_since(t));
    assert_eq!(writer.reply(), b"+OK\r\n");
}

#[test]
fn with_appendfsync_always_one_sync_covers_the_writes_of_every_connection_made_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["KEYLOCK", "FAULT", "ADD", "SLOW-FSYNC", "100"]);
    let syncs_before: u64 = common::info_value(&mut c, "keylock", "aof_syncs").parse().unwrap();
    const CLIENTS: usize = 16;
    const WRITES: usize = 5;
    let addr = keylock.addr;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            std::thread::spawn(move || {
                let mut c = Raw::connect(addr);
                for _ in 0..WRITES {
                    assert_eq!(c.call(&["INCR", "counter"]).first(), Some(&b':'));
                    assert_eq!(c.call(&["RPUSH", &format!("list-{i}"), "x"]).first(), Some(&b':'));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let syncs: u64 = common::info_value(&mut c, "keylock", "aof_syncs").parse::<u64>().unwrap() - syncs_before;
    assert_eq!(
        c.call(&["GET", "counter"]),
        format!("${}\r\n{}\r\n", (CLIENTS * WRITES).to_string().len(), CLIENTS * WRITES).as_bytes()
    );
    // 160 acknowledged writes, each client waiting for every reply: the
    // clients' writes made during one sync share the next one.
    let writes = (CLIENTS * WRITES * 2) as u64;
    assert!(syncs * 4 <= writes, "{syncs} syncs for {writes} writes");
    assert!(syncs >= (WRITES * 2) as u64, "{syncs} syncs");
    drop(c);

    // Every one of them is in the file.
    let mut keylock = keylock;
    keylock.signal(libc::SIGKILL);
    keylock.wait_exit(10);
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["GET", "counter"]), b"$2\r\n80\r\n");
    assert_eq!(c.call(&["LLEN", "list-15"]), b":5\r\n");
}

/// Limits the size of any file `pid` writes (RLIMIT_FSIZE, as `ulimit -f`).
fn limit_file_size(pid: u32, bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: sets a resource limit of the test's own child process.
    assert_eq!(
        unsafe { libc::prlimit(pid as i32, libc::RLIMIT_FSIZE, &limit, std::ptr::null_mut()) },
        0
    );
}

/// keylock appending to `dir` with `fsync`, holding `before`, whose
/// incremental file may grow by `room` bytes more at most.
fn with_a_full_file(dir: &std::path::Path, fsync: &str, room: u64) -> (Binary, Raw) {
    let keylock = keylock_in(dir, &["--appendonly", "yes", "--appendfsync", fsync]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["SET", "before", "v"]), b"+OK\r\n");
    let incr = common::aof_incr_file(dir);
    limit_file_size(keylock.pid(), std::fs::metadata(&incr).unwrap().len() + room);
    (keylock, c)
}

#[test]
fn a_failing_write_refuses_writes_with_misconf_until_it_succeeds_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The incremental file may not grow past what it holds now.
    let (mut keylock, mut c) = with_a_full_file(dir.path(), "everysec", 0);
    let value = "x".repeat(100);
    // The write runs and is acknowledged (everysec: its record is pending);
    // writing it fails, and from then on writes are refused, reads are not.
    assert_eq!(c.call(&["SET", "during", &value]), b"+OK\r\n");
    let refused = b"-MISCONF Errors writing to the AOF file: File too large\r\n";
    common::wait_until(5, "writes refused", || c.call(&["SET", "refused", "v"]) == refused);
    assert_eq!(c.call(&["PING"]), refused);
    let by_script = c.call(&["EVAL", "return redis.call('set', 'by-script', 1)", "0"]);
    assert!(
        by_script.starts_with(b"-MISCONF Errors writing to the AOF file: File too large"),
        "{}",
        text(by_script)
    );
    assert_eq!(c.call(&["GET", "before"]), b"$1\r\nv\r\n");
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "err");

    // Room again: the kept write goes to the file, and writes are accepted.
    limit_file_size(keylock.pid(), libc::RLIM_INFINITY);
    common::wait_until(5, "writes accepted", || c.call(&["SET", "after", "v"]) == b"+OK\r\n");
    assert_eq!(info_field(&mut c, "aof_last_write_status"), "ok");
    keylock.signal(libc::SIGKILL);
    keylock.wait_exit(10);
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["GET", "during"]), format!("$100\r\n{value}\r\n").as_bytes());
    assert_eq!(c.call(&["GET", "after"]), b"$1\r\nv\r\n");
    assert_eq!(c.call(&["EXISTS", "refused", "by-script"]), b":0\r\n");
}

#[test]
fn with_appendfsync_always_a_failing_write_ends_the_process_and_is_never_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (mut keylock, mut c) = with_a_full_file(dir.path(), "always", 10);
    common::send_args(&mut c, &["SET", "unwritten", &"x".repeat(100)]);
    // No reply: the connection closes as the process exits (status 1).
    assert!(c.is_closed());
    assert_eq!(keylock.wait_exit(10).code(), Some(1));
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["GET", "before"]), b"$1\r\nv\r\n");
    assert_eq!(c.call(&["EXISTS", "unwritten"]), b":0\r\n");
}

#[test]
fn clients_are_answered_loading_while_the_append_only_file_replays() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes", "--requirepass", "secret"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["AUTH", "secret"]);
    for i in 0..2000 {
        common::send_args(&mut c, &["SET", &format!("key:{i}"), "v"]);
    }
    for _ in 0..2000 {
        c.reply();
    }
    drop(c);
    drop(keylock);
    let keylock = keylock_in(
        dir.path(),
        &[
            "--appendonly",
            "yes",
            "--requirepass",
            "secret",
            "--key-load-delay",
            "500",
            "--loading-process-events-interval-bytes",
            "1024",
        ],
    );
    let mut c = Raw::connect(keylock.addr);
    // The file's commands run as no user, but a client connecting
    // meanwhile is one: it must authenticate.
    assert_eq!(c.call(&["INFO", "persistence"]), b"-NOAUTH Authentication required.\r\n");
    assert_eq!(c.call(&["AUTH", "secret"]), b"+OK\r\n");
    assert_eq!(c.call(&["GET", "key:1"]), b"-LOADING Redis is loading the dataset in memory\r\n");
    assert_eq!(info_field(&mut c, "loading"), "1");
    c.call(&["CONFIG", "SET", "key-load-delay", "0"]);
    common::wait_until(30, "the load to end", || info_field(&mut c, "loading") == "0");
    assert_eq!(c.call(&["DBSIZE"]), b":2000\r\n");
}

#[test]
fn aof_timestamp_enabled_annotates_each_second_and_the_file_still_loads_in_redis_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut keylock = keylock_in(
        dir.path(),
        &["--appendonly", "yes", "--aof-timestamp-enabled", "yes", "--clock", "frozen"],
    );
    let mut c = Raw::connect(keylock.addr);
    let now: u64 = text(c.call(&["KEYLOCK", "CLOCK", "GET"]))[1..].trim().parse().unwrap();
    c.call(&["SET", "a", "1"]);
    c.call(&["SET", "b", "2"]);
    c.call(&["KEYLOCK", "CLOCK", "ADVANCE", "1000"]);
    c.call(&["SET", "c", "3"]);
    let digest = c.call(&["DEBUG", "DIGEST"]);
    keylock.signal(libc::SIGTERM);
    keylock.wait_exit(10);
    let incr = common::aof_incr_file(dir.path());
    let file = String::from_utf8(std::fs::read(incr).unwrap()).unwrap();
    let stamps: Vec<&str> = file.lines().filter(|l| l.starts_with("#TS:")).collect();
    assert_eq!(stamps, [format!("#TS:{}", now / 1000), format!("#TS:{}", now / 1000 + 1)]);
    // Annotations are skipped by a loader: redis-server's, and keylock's.
    if let Some(redis) = common::real_redis_with(&[
        "--appendonly",
        "yes",
        "--enable-debug-command",
        "yes",
        "--dir",
        dir.path().to_str().unwrap(),
    ]) {
        assert_eq!(Raw::connect(redis.addr).call(&["DEBUG", "DIGEST"]), digest);
    }
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(Raw::connect(keylock.addr).call(&["DEBUG", "DIGEST"]), digest);
}

/// BGREWRITEAOF with the AOF off, twice: the files and manifest left, and
/// what INFO says.
fn rewrite_while_off(addr: std::net::SocketAddr, dir: &std::path::Path) -> Vec<String> {
    let mut c = Raw::connect(addr);
    let mut seen = Vec::new();
    c.call(&["SET", "k", "v"]);
    for _ in 0..2 {
        seen.push(text(c.call(&["BGREWRITEAOF"])));
        common::wait_until(30, "the rewrite to end", || info_field(&mut c, "aof_rewrite_in_progress") == "0");
        let mut files: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        seen.push(files.join(" "));
        seen.push(std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap());
        for field in ["aof_enabled", "aof_rewrites", "aof_last_bgrewrite_status"] {
            seen.push(format!("{field}:{}", info_field(&mut c, field)));
        }
    }
    seen
}

#[test]
fn bgrewriteaof_with_the_aof_off_leaves_a_manifest_naming_the_new_base_alone_as_redis_does() {
    let redis_dir = tempfile::tempdir().unwrap();
    let Some(redis) = common::real_redis_with(&["--dir", redis_dir.path().to_str().unwrap()]) else {
        return;
    };
    let expected = rewrite_while_off(redis.addr, redis_dir.path());
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &[]);
    assert_eq!(rewrite_while_off(keylock.addr, dir.path()), expected);
    assert_eq!(expected[7], "appendonly.aof.2.base.rdb appendonly.aof.manifest");
}

/// BGREWRITEAOF in a transaction: scheduled, then started by the cron.
fn rewrite_scheduled_in_multi(addr: std::net::SocketAddr) -> Vec<String> {
    let mut c = Raw::connect(addr);
    let forks = |c: &mut Raw| common::info_value(c, "stats", "total_forks").parse::<u64>().unwrap();
    let before = forks(&mut c);
    let mut seen = vec![
        text(c.call(&["MULTI"])),
        text(c.call(&["SET", "foo", "bar"])),
        text(c.call(&["BGREWRITEAOF"])),
        text(c.call(&["EXEC"])),
    ];
    common::wait_until(10, "the scheduled rewrite to run", || {
        forks(&mut c) > before && info_field(&mut c, "aof_rewrite_in_progress") == "0" && info_field(&mut c, "aof_rewrite_scheduled") == "0"
    });
    seen.push(info_field(&mut c, "aof_last_bgrewrite_status"));
    seen
}

#[test]
fn bgrewriteaof_in_a_transaction_is_scheduled_and_run_by_the_cron_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let ours = rewrite_scheduled_in_multi(keylock.addr);
    assert_eq!(ours[3], "*2\r\n+OK\r\n+Background append only file rewriting scheduled\r\n");
    let redis_dir = tempfile::tempdir().unwrap();
    if let Some(redis) = common::real_redis_with(&["--dir", redis_dir.path().to_str().unwrap(), "--appendonly", "yes"]) {
        assert_eq!(rewrite_scheduled_in_multi(redis.addr), ours);
    }
}

/// An approximate trim with LIMIT is recorded as the exact trim it made
/// (`MAXLEN = n LIMIT …`), which the file's replay obeys whatever the node
/// size then.
fn approximate_trim_replayed(addr: std::net::SocketAddr) -> Vec<String> {
    let mut c = Raw::connect(addr);
    for _ in 0..100 {
        c.call(&["XADD", "mystream", "*", "xitem", "v"]);
    }
    c.call(&["XADD", "mystream", "MAXLEN", "~", "55", "LIMIT", "30", "*", "xitem", "v"]);
    let mut seen = vec![text(c.call(&["XLEN", "mystream"]))];
    c.call(&["CONFIG", "SET", "stream-node-max-entries", "1"]);
    seen.push(text(c.call(&["DEBUG", "LOADAOF"])));
    seen.push(text(c.call(&["XLEN", "mystream"])));
    seen
}

#[test]
fn an_approximate_stream_trim_replays_as_the_trim_it_made_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes", "--stream-node-max-entries", "10"]);
    let ours = approximate_trim_replayed(keylock.addr);
    assert_eq!(ours, [":71\r\n", "+OK\r\n", ":71\r\n"]);
    let redis_dir = tempfile::tempdir().unwrap();
    let flags = [
        "--dir",
        redis_dir.path().to_str().unwrap(),
        "--appendonly",
        "yes",
        "--stream-node-max-entries",
        "10",
    ];
    if let Some(redis) = common::real_redis_with(&[&flags[..], &["--enable-debug-command", "yes"]].concat()) {
        assert_eq!(approximate_trim_replayed(redis.addr), ours);
    }
}

/// Waits until no rewrite runs or is scheduled.
fn wait_rewrite_done(c: &mut Raw) {
    common::wait_until(10, "the rewrite to finish", || {
        info_field(c, "aof_rewrite_in_progress") == "0" && info_field(c, "aof_rewrite_scheduled") == "0"
    });
}

#[test]
fn keys_past_their_deadline_are_live_while_the_file_replays_and_expire_after() {
    // Redis expires nothing while it loads: a command of the file finds
    // the key as it was when the command first ran. Expiring it lazily
    // instead would make APPEND and HINCRBY create keys with no deadline,
    // which live on for ever.
    let dir = tempfile::tempdir().unwrap();
    let keylock = keylock_in(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    assert_eq!(c.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    // In the base (an RDB preamble), then changed by the commands after.
    assert_eq!(c.call(&["HSET", "in-base", "f", "1"]), b":1\r\n");
    assert_eq!(c.call(&["PEXPIRE", "in-base", "1000"]), b":1\r\n");
    assert_eq!(c.call(&["BGREWRITEAOF"]), b"+Background append only file rewriting started\r\n");
    wait_rewrite_done(&mut c);
    assert_eq!(c.call(&["HINCRBY", "in-base", "f", "1"]), b":2\r\n");
    // Only in the commands.
    assert_eq!(c.call(&["SET", "appended", "v", "PX", "1000"]), b"+OK\r\n");
    assert_eq!(c.call(&["APPEND", "appended", "x"]), b":2\r\n");
    assert_eq!(c.call(&["SET", "counted", "1", "PX", "1000"]), b"+OK\r\n");
    assert_eq!(c.call(&["INCR", "counted"]), b":2\r\n");
    // Their deadlines pass, unseen.
    std::thread::sleep(std::time::Duration::from_millis(1300));
    assert_eq!(c.call(&["DEBUG", "LOADAOF"]), b"+OK\r\n");
    // Loaded with their deadlines (past): gone, none made anew.
    assert_eq!(c.call(&["DBSIZE"]), b":3\r\n");
    assert_eq!(c.call(&["EXISTS", "in-base", "appended", "counted"]), b":0\r\n");
    assert_eq!(c.call(&["DBSIZE"]), b":0\r\n");
}
