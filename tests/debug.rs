//! DEBUG against redis-server 7.0.15: digests of the same random datasets
//! equal, PROTOCOL's bytes in RESP2 and RESP3, POPULATE's keys, OBJECT's
//! line, the `enable-debug-command` protection, SLEEP blocking the
//! server and SET-ACTIVE-EXPIRE 0 leaving expired keys in place.

mod common;

use std::time::{Duration, Instant};

use common::{Raw, RealRedis, ServerHandle, real_redis_with, text};

fn keylock_with_debug(setting: &str) -> ServerHandle {
    let setting = setting.to_string();
    common::start_with(move |c| c.directives.push(("enable-debug-command".into(), vec![setting])))
}

fn pair() -> Option<(ServerHandle, RealRedis)> {
    let redis = real_redis_with(&["--enable-debug-command", "yes"])?;
    Some((keylock_with_debug("yes"), redis))
}

/// Runs the same commands on both servers, asserting equal raw replies.
fn same(k: &mut Raw, r: &mut Raw, args: &[&str]) -> Vec<u8> {
    let (a, b) = (k.call(args), r.call(args));
    assert_eq!(
        String::from_utf8_lossy(&a),
        String::from_utf8_lossy(&b),
        "{args:?}: keylock and redis-server differ"
    );
    a
}

/// A random dataset of every type, with TTLs on some keys, written to
/// both servers.
fn random_dataset(k: &mut Raw, r: &mut Raw, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let word = |rng: &mut fastrand::Rng| -> String {
        match rng.u8(0..4) {
            0 => rng.i64(-1000..1000).to_string(),
            1 => "x".repeat(rng.usize(0..80)),
            _ => (0..rng.usize(1..12)).map(|_| rng.alphanumeric()).collect(),
        }
    };
    for db in ["0", "5"] {
        same(k, r, &["SELECT", db]);
        for i in 0..40 {
            let key = format!("k{i}");
            let most = if rng.bool() { 6 } else { 200 };
            let n = rng.usize(1..most);
            let mut args: Vec<String> = Vec::new();
            match i % 6 {
                0 => args.extend(["SET".into(), key.clone(), word(&mut rng)]),
                1 => {
                    args.extend(["RPUSH".into(), key.clone()]);
                    args.extend((0..n).map(|_| word(&mut rng)));
                }
                2 => {
                    args.extend(["SADD".into(), key.clone()]);
                    args.extend((0..n).map(|_| word(&mut rng)));
                }
                3 => {
                    args.extend(["ZADD".into(), key.clone()]);
                    for _ in 0..n {
                        let score = match rng.u8(0..5) {
                            0 => "inf".to_string(),
                            1 => rng.i32(-50..50).to_string(),
                            _ => format!("{}", rng.f64() * 1000.0 - 500.0),
                        };
                        args.extend([score, word(&mut rng)]);
                    }
                }
                4 => {
                    args.extend(["HSET".into(), key.clone()]);
                    for _ in 0..n {
                        args.extend([word(&mut rng), word(&mut rng)]);
                    }
                }
                _ => {
                    for j in 0..n.min(20) {
                        let (f, v) = (word(&mut rng), word(&mut rng));
                        same(k, r, &["XADD", &key, &format!("{}-{j}", i + 1), &f, &v]);
                    }
                }
            }
            if !args.is_empty() {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                same(k, r, &args);
            }
            if rng.u8(0..4) == 0 {
                same(k, r, &["EXPIRE", &key, "1000"]);
            }
        }
    }
    same(k, r, &["SELECT", "0"]);
}

#[test]
fn digest_equals_redis_on_random_datasets_of_every_type() {
    let Some((keylock, redis)) = pair() else { return };
    let (mut k, mut r) = (Raw::connect(keylock.addr()), Raw::connect(redis.addr));
    for seed in 0..4 {
        same(&mut k, &mut r, &["FLUSHALL"]);
        same(&mut k, &mut r, &["DEBUG", "DIGEST"]);
        random_dataset(&mut k, &mut r, seed);
        let digest = same(&mut k, &mut r, &["DEBUG", "DIGEST"]);
        assert_ne!(digest, b"+0000000000000000000000000000000000000000\r\n".to_vec());
        let keys: Vec<String> = (0..40).map(|i| format!("k{i}")).chain(["missing".to_string()]).collect();
        let mut args = vec!["DEBUG", "DIGEST-VALUE"];
        args.extend(keys.iter().map(String::as_str));
        same(&mut k, &mut r, &args);
    }
}

#[test]
fn protocol_replies_are_redis_bytes_in_resp2_and_resp3() {
    let Some((keylock, redis)) = pair() else { return };
    let types = [
        "string",
        "integer",
        "double",
        "bignum",
        "null",
        "array",
        "set",
        "map",
        "attrib",
        "push",
        "verbatim",
        "true",
        "false",
        "nosuchtype",
    ];
    for resp3 in [false, true] {
        let (mut k, mut r) = (Raw::connect(keylock.addr()), Raw::connect(redis.addr));
        if resp3 {
            k.call(&["HELLO", "3"]);
            r.call(&["HELLO", "3"]);
        }
        for t in types {
            same(&mut k, &mut r, &["DEBUG", "PROTOCOL", t]);
            if resp3 && (t == "attrib" || t == "push") {
                // The real reply that follows the attribute or the push.
                let (a, b) = (k.reply(), r.reply());
                assert_eq!(a, b, "{t}: second reply");
            }
        }
    }
}

#[test]
fn populate_creates_redis_keys_and_skips_existing_ones() {
    let Some((keylock, redis)) = pair() else { return };
    let (mut k, mut r) = (Raw::connect(keylock.addr()), Raw::connect(redis.addr));
    same(&mut k, &mut r, &["SET", "key:3", "mine"]);
    same(&mut k, &mut r, &["DEBUG", "POPULATE", "10"]);
    same(&mut k, &mut r, &["DEBUG", "POPULATE", "5", "p", "3"]);
    same(&mut k, &mut r, &["DEBUG", "POPULATE", "2", "big", "20"]);
    same(&mut k, &mut r, &["DEBUG", "POPULATE", "0"]);
    for args in [
        &["DBSIZE"][..],
        &["GET", "key:3"],
        &["GET", "key:9"],
        &["GET", "p:4"],
        &["GET", "big:1"],
        &["DEBUG", "DIGEST"],
        &["DEBUG", "POPULATE", "-1"],
        &["DEBUG", "POPULATE", "x"],
        &["DEBUG", "POPULATE", "1", "a", "-2"],
        &["DEBUG", "POPULATE", "1", "a", "2", "extra"],
    ] {
        same(&mut k, &mut r, args);
    }
}

#[test]
fn errors_and_simple_subcommands_match_redis() {
    let Some((keylock, redis)) = pair() else { return };
    let (mut k, mut r) = (Raw::connect(keylock.addr()), Raw::connect(redis.addr));
    for args in [
        &["DEBUG", "nosuch"][..],
        &["DEBUG", "jmap"],
        &["DEBUG", "sleep"],
        &["DEBUG", "object", "missing"],
        &["DEBUG", "listpack", "missing"],
        &["DEBUG", "quicklist", "missing"],
        &["DEBUG", "reload", "bogus"],
        &["DEBUG", "quicklist-packed-threshold", "5gb"],
        &["DEBUG", "quicklist-packed-threshold", "0"],
        &["DEBUG", "quicklist-packed-threshold", "1k"],
        &["DEBUG", "replybuffer", "peak-reset-time", "never"],
        &["DEBUG", "replybuffer", "peak-reset-time", "x"],
        &["DEBUG", "replybuffer", "resizing", "0"],
        &["DEBUG", "replybuffer", "bogus", "0"],
        &["DEBUG", "set-active-expire", "1"],
        &["DEBUG", "pause-cron", "0"],
        &["DEBUG", "set-skip-checksum-validation", "0"],
        &["DEBUG", "log", "hello from a test"],
        &["DEBUG", "error", "CUSTOM an error"],
        &["DEBUG", "digest-value"],
        &["DEBUG", "change-repl-id"],
        &["SET", "s", "v"],
        &["DEBUG", "listpack", "s"],
        &["DEBUG", "quicklist", "s"],
        &["RPUSH", "l", "a"],
        &["DEBUG", "quicklist", "l"],
        &["DEBUG", "HELP"],
    ] {
        if args == ["DEBUG", "HELP"] {
            // Redis built with jemalloc lists MALLCTL, which keylock
            // (mimalloc) does not have: compare the rest.
            let (a, b) = (k.call(args), r.call(args));
            let text = |raw: &[u8]| {
                String::from_utf8_lossy(raw)
                    .split("\r\n")
                    .skip(1)
                    .filter(|l| !l.contains("MALLCTL") && !l.contains("malloc tuning"))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            };
            assert_eq!(text(&a), text(&b));
            continue;
        }
        same(&mut k, &mut r, args);
    }
}

#[test]
fn object_line_has_redis_fields() {
    let Some((keylock, redis)) = pair() else { return };
    let (mut k, mut r) = (Raw::connect(keylock.addr()), Raw::connect(redis.addr));
    let big: Vec<String> = (0..3000).map(|i| format!("element-{i}")).collect();
    let mut rpush = vec!["RPUSH", "biglist"];
    rpush.extend(big.iter().map(String::as_str));
    for args in [
        &["SET", "s", "hello"][..],
        &["SET", "n", "12345"],
        &["SET", "small", "42"],
        &["INCR", "small"],
        &["SET", "long", &"z".repeat(100)],
        &["RPUSH", "l", "a", "b", "1"],
        &rpush,
        &["HSET", "h", "f", "v"],
        &["SADD", "si", "1", "2"],
        &["SADD", "ss", "a", "b"],
        &["ZADD", "z", "1", "a"],
    ] {
        same(&mut k, &mut r, args);
    }
    same(&mut k, &mut r, &["OBJECT", "REFCOUNT", "small"]);
    same(&mut k, &mut r, &["OBJECT", "REFCOUNT", "n"]);
    // Everything but the address and the clock is Redis's.
    let shape = |raw: Vec<u8>| -> Vec<String> {
        let line = String::from_utf8(raw).unwrap();
        line.trim_end()
            .split(' ')
            .filter(|f| !f.starts_with("at:") && !f.starts_with("lru:") && !f.starts_with("lru_seconds_idle:"))
            .map(str::to_string)
            .collect()
    };
    for key in ["s", "n", "small", "long", "l", "biglist", "h", "si", "ss", "z"] {
        let line = k.call(&["DEBUG", "OBJECT", key]);
        let text = String::from_utf8_lossy(&line).to_string();
        assert!(text.starts_with("+Value at:0x"), "{text}");
        assert!(text.contains(" lru:") && text.contains(" lru_seconds_idle:"), "{text}");
        assert_eq!(shape(line), shape(r.call(&["DEBUG", "OBJECT", key])), "DEBUG OBJECT {key}");
    }
}

#[test]
fn debug_is_refused_unless_enable_debug_command_allows_it() {
    let refused = "-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n";
    let default = common::start();
    let mut c = Raw::connect(default.addr());
    assert_eq!(String::from_utf8_lossy(&c.call(&["DEBUG", "DIGEST"])), refused);
    let no = keylock_with_debug("no");
    let mut c = Raw::connect(no.addr());
    assert_eq!(String::from_utf8_lossy(&c.call(&["DEBUG", "HELP"])), refused);
    // `local` lets a loopback client run it.
    let local = keylock_with_debug("local");
    let mut c = Raw::connect(local.addr());
    assert_eq!(c.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
    if let Some(redis) = common::real_redis() {
        let mut r = Raw::connect(redis.addr);
        assert_eq!(String::from_utf8_lossy(&r.call(&["DEBUG", "DIGEST"])), refused);
    }
}

#[test]
fn sleep_blocks_other_clients() {
    let keylock = keylock_with_debug("yes");
    let mut sleeper = Raw::connect(keylock.addr());
    let mut other = Raw::connect(keylock.addr());
    sleeper.send_cmd(&[b"DEBUG", b"SLEEP", b"0.5"]);
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    assert_eq!(other.call(&["PING"]), b"+PONG\r\n");
    assert!(start.elapsed() >= Duration::from_millis(250), "PING answered during DEBUG SLEEP");
    assert_eq!(sleeper.reply(), b"+OK\r\n");
}

#[test]
fn set_active_expire_0_keeps_expired_keys_until_accessed() {
    let keylock = keylock_with_debug("yes");
    let mut c = Raw::connect(keylock.addr());
    assert_eq!(c.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    for i in 0..20 {
        c.call(&["SET", &format!("k{i}"), "v", "PX", "50"]);
    }
    std::thread::sleep(Duration::from_millis(400));
    // Still held: DBSIZE counts stored keys, as Redis's does, the digest
    // is not empty and INFO has no expiry yet.
    assert_eq!(c.call(&["DBSIZE"]), b":20\r\n");
    assert_ne!(
        c.call(&["DEBUG", "DIGEST"]),
        b"+0000000000000000000000000000000000000000\r\n".to_vec()
    );
    let info = String::from_utf8_lossy(&c.call(&["INFO", "stats"])).to_string();
    assert!(info.contains("expired_keys:0\r\n"), "{info}");
    // An access reclaims a key.
    assert_eq!(c.call(&["GET", "k0"]), b"$-1\r\n");
    assert_eq!(c.call(&["DBSIZE"]), b":19\r\n");
    let info = String::from_utf8_lossy(&c.call(&["INFO", "stats"])).to_string();
    assert!(info.contains("expired_keys:1\r\n"), "{info}");
    // Switched back on, the cron reclaims the rest.
    assert_eq!(c.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
    common::wait_until(5, "active expiry reclaims the keys", || {
        c.call(&["DEBUG", "DIGEST"]) == b"+0000000000000000000000000000000000000000\r\n".to_vec()
    });
}

#[test]
fn change_repl_id_gives_info_a_new_replid() {
    let keylock = keylock_with_debug("yes");
    let mut c = Raw::connect(keylock.addr());
    let replid = |c: &mut Raw| {
        let info = String::from_utf8_lossy(&c.call(&["INFO", "replication"])).to_string();
        info.lines().find(|l| l.starts_with("master_replid:")).unwrap().to_string()
    };
    let before = replid(&mut c);
    assert_eq!(c.call(&["DEBUG", "CHANGE-REPL-ID"]), b"+OK\r\n");
    assert_ne!(replid(&mut c), before);
}

#[test]
fn skip_checksum_validation_lets_restore_take_a_bad_crc() {
    let keylock = keylock_with_debug("yes");
    let mut c = Raw::connect(keylock.addr());
    c.call(&["SET", "k", "hello"]);
    let dump = c.call(&["DUMP", "k"]);
    // `$N\r\n` then the payload: spoil its last CRC byte.
    let start = dump.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut payload = dump[start..dump.len() - 2].to_vec();
    let last = payload.len() - 1;
    payload[last] ^= 0xff;
    let restore = |c: &mut Raw, key: &[u8]| {
        c.send_cmd(&[b"RESTORE", key, b"0", &payload]);
        c.reply()
    };
    assert_eq!(restore(&mut c, b"a"), b"-ERR DUMP payload version or checksum are wrong\r\n");
    c.call(&["DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1"]);
    assert_eq!(restore(&mut c, b"b"), b"+OK\r\n");
    assert_eq!(c.call(&["GET", "b"]), b"$5\r\nhello\r\n");
}

#[test]
fn crash_subcommands_answer_errors() {
    let keylock = keylock_with_debug("yes");
    let mut c = Raw::connect(keylock.addr());
    for sub in ["SEGFAULT", "PANIC", "ASSERT", "OOM"] {
        let reply = String::from_utf8_lossy(&c.call(&["DEBUG", sub])).to_string();
        assert!(reply.starts_with("-ERR") && reply.contains("does not crash"), "{sub}: {reply}");
    }
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
}

/// DEBUG RELOAD answers OK and leaves the data as
/// the round trip through an RDB would.
#[test]
fn reload_answers_ok_and_keeps_the_data() {
    let keylock = keylock_with_debug("yes");
    let mut c = Raw::connect(keylock.addr());
    c.call(&["SET", "k", "v"]);
    c.call(&["RPUSH", "l", "a", "b"]);
    let before = c.call(&["DEBUG", "DIGEST"]);
    assert_eq!(c.call(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(c.call(&["DEBUG", "DIGEST"]), before);
    assert_eq!(
        c.call(&["DEBUG", "RELOAD", "BOGUS"]),
        b"-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n"
    );
}

#[test]
fn protocol_attrib_and_push_inside_exec_and_with_replies_off_are_redis_bytes() {
    let Some((keylock, redis)) = pair() else { return };
    let script: &[&[&str]] = &[
        &["HELLO", "3"],
        &["MULTI"],
        &["DEBUG", "PROTOCOL", "attrib"],
        &["DEBUG", "PROTOCOL", "push"],
        &["DEBUG", "PROTOCOL", "map"],
        &["EXEC"],
        &["CLIENT", "REPLY", "OFF"],
        &["DEBUG", "PROTOCOL", "attrib"],
        &["DEBUG", "PROTOCOL", "push"],
        &["CLIENT", "REPLY", "ON"],
        &["PING"],
    ];
    let input: Vec<u8> = script
        .iter()
        .flat_map(|args| common::encode(&args.iter().map(|a| a.as_bytes()).collect::<Vec<_>>()))
        .collect();
    let strip_hello = |raw: Vec<u8>| {
        // HELLO's reply carries the connection id: compare what follows.
        let text = String::from_utf8_lossy(&raw).to_string();
        text[text.find("+OK").expect("MULTI's OK")..].to_string()
    };
    let quiet = Duration::from_millis(300);
    let (ours, _) = common::exchange_raw(keylock.addr(), &input, quiet);
    let (theirs, _) = common::exchange_raw(redis.addr, &input, quiet);
    assert_eq!(strip_hello(ours), strip_hello(theirs));
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS 1 lets a script run what scripts may
/// not (Redis's test suite reads DEBUG PROTOCOL from Lua this way), and a
/// RESP3 attribute reaches the script as the reply it annotates.
#[test]
fn disable_deny_scripts_lets_scripts_run_noscript_commands() {
    let Some((keylock, redis)) = pair() else { return };
    let script = "redis.setresp(3) return redis.call('debug', 'protocol', 'attrib')";
    for addr in [keylock.addr(), redis.addr] {
        let mut c = Raw::connect(addr);
        assert!(
            c.call(&["EVAL", script, "0"])
                .starts_with(b"-ERR This Redis command is not allowed from script")
        );
        assert_eq!(c.call(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]), b"+OK\r\n");
        assert_eq!(
            c.call(&["EVAL", script, "0"]),
            b"$39\r\nSome real reply following the attribute\r\n"
        );
        assert_eq!(c.call(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]), b"+OK\r\n");
    }
}

#[test]
fn htstats_show_the_tables_in_redis_format() {
    let s = keylock_with_debug("yes");
    let mut c = Raw::connect(s.addr());
    for key in ["a", "b", "c"] {
        c.call(&["SET", key, "v"]);
    }
    c.call(&["PEXPIRE", "a", "100000"]);
    let stats = text(c.call(&["DEBUG", "HTSTATS", "0"]));
    assert!(
        stats.contains("[Dictionary HT]\nHash table 0 stats (main hash table):\n table size: 4\n number of elements: 3\n"),
        "{stats}"
    );
    assert!(
        stats.contains("[Expires HT]\nHash table 0 stats (main hash table):\n table size: 4\n number of elements: 1\n"),
        "{stats}"
    );
    let members: Vec<String> = (0..600).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "big"];
    sadd.extend(members.iter().map(String::as_str));
    c.call(&sadd);
    let stats = text(c.call(&["DEBUG", "HTSTATS-KEY", "big"]));
    assert!(stats.contains(" table size: 1024\n number of elements: 600\n"), "{stats}");
}
