//! `maxmemory` eviction, as Redis's: each policy removes the keys it
//! should (the idle longest, the least used, the nearest deadline, any,
//! or only keys with a deadline), memory is kept under the limit, and an
//! eviction is an `evicted` event, a tracking invalidation and INFO
//! `evicted_keys`; OBJECT FREQ and RESTORE … FREQ under LFU answer as
//! Redis's. Run against the binary, whose allocator counts used memory.

mod common;

use common::{Binary, Raw, text};

fn info_int(c: &mut Raw, section: &str, field: &str) -> u64 {
    common::info_value(c, section, field).parse().unwrap()
}

fn keylock() -> (Binary, Raw) {
    let keylock = Binary::start(&["--clock", "frozen", "--enable-debug-command", "yes"]);
    let c = Raw::connect(keylock.addr);
    (keylock, c)
}

/// Writes `n` keys `prefix:i` of 1 KB each, pipelined; `ttl` gives each a
/// deadline `ttl(i)` seconds away.
fn fill(c: &mut Raw, prefix: &str, n: usize, ttl: Option<&dyn Fn(usize) -> u64>) {
    let value = "x".repeat(1000);
    for i in 0..n {
        let key = format!("{prefix}:{i}");
        match ttl {
            Some(ttl) => common::send_args(c, &["SET", &key, &value, "EX", &ttl(i).to_string()]),
            None => common::send_args(c, &["SET", &key, &value]),
        }
    }
    for _ in 0..n {
        c.reply();
    }
}

fn count(c: &mut Raw, prefix: &str, n: usize) -> usize {
    (0..n)
        .filter(|i| c.call(&["EXISTS", &format!("{prefix}:{i}")]) == b":1\r\n")
        .count()
}

/// Sets maxmemory to what is used now plus `room` bytes.
fn limit_to_used_plus(c: &mut Raw, room: u64) -> u64 {
    let limit = info_int(c, "memory", "used_memory") + room;
    assert_eq!(c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]), b"+OK\r\n");
    limit
}

#[test]
fn allkeys_lru_evicts_the_keys_idle_longest_and_keeps_memory_under_the_limit() {
    let (_keylock, mut c) = keylock();
    c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    fill(&mut c, "old", 1000, None);
    c.call(&["KEYLOCK", "CLOCK", "ADVANCE", "100000"]);
    let limit = limit_to_used_plus(&mut c, 300_000);
    fill(&mut c, "new", 1000, None);
    let evicted = info_int(&mut c, "stats", "evicted_keys");
    assert!(evicted >= 500, "{evicted} evicted");
    let used = info_int(&mut c, "memory", "used_memory");
    assert!(used <= limit + 100_000, "used {used} over {limit}");
    // The old keys went first: almost every new key is still there.
    let new_left = count(&mut c, "new", 1000);
    let old_left = count(&mut c, "old", 1000);
    assert!(new_left >= 950, "{new_left} new keys left, {old_left} old");
    // Every command may evict first, the EXISTS of the count too.
    let evicted_after = info_int(&mut c, "stats", "evicted_keys");
    let left = new_left + old_left;
    assert!(
        (2000 - evicted_after as usize..=2000 - evicted as usize).contains(&left),
        "{left} left"
    );
}

#[test]
fn allkeys_lfu_keeps_the_keys_used_most() {
    let (_keylock, mut c) = keylock();
    c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    fill(&mut c, "hot", 200, None);
    for _ in 0..30 {
        for i in 0..200 {
            common::send_args(&mut c, &["GET", &format!("hot:{i}")]);
        }
        for _ in 0..200 {
            c.reply();
        }
    }
    fill(&mut c, "cold", 800, None);
    limit_to_used_plus(&mut c, 0);
    fill(&mut c, "more", 500, None);
    assert!(info_int(&mut c, "stats", "evicted_keys") >= 300);
    let hot_left = count(&mut c, "hot", 200);
    assert!(hot_left >= 190, "{hot_left} hot keys left");
}

#[test]
fn volatile_policies_evict_only_keys_with_a_deadline_then_refuse_writes() {
    for policy in ["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"] {
        let (_keylock, mut c) = keylock();
        c.call(&["CONFIG", "SET", "maxmemory-policy", policy]);
        fill(&mut c, "kept", 300, None);
        fill(&mut c, "leased", 300, Some(&|_| 10_000));
        limit_to_used_plus(&mut c, 0);
        let value = "x".repeat(1000);
        let mut refused = None;
        for i in 0..1000 {
            let reply = c.call(&["SET", &format!("more:{i}"), &value]);
            if reply != b"+OK\r\n" {
                refused = Some(text(reply));
                break;
            }
        }
        assert_eq!(
            refused.as_deref(),
            Some("-OOM command not allowed when used memory > 'maxmemory'.\r\n"),
            "{policy}"
        );
        assert_eq!(count(&mut c, "kept", 300), 300, "{policy}: a key without a deadline went");
        assert_eq!(count(&mut c, "leased", 300), 0, "{policy}: leased keys left");
        // Reads still work.
        assert_eq!(c.call(&["EXISTS", "kept:0"]), b":1\r\n");
    }
}

#[test]
fn volatile_ttl_evicts_the_nearest_deadlines_first() {
    let (_keylock, mut c) = keylock();
    c.call(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]);
    fill(&mut c, "leased", 1000, Some(&|i| 10_000 + i as u64 * 10));
    limit_to_used_plus(&mut c, 0);
    fill(&mut c, "more", 300, None);
    // What went is mostly the first (shortest) leases.
    let early_left = (0..300)
        .filter(|i| c.call(&["EXISTS", &format!("leased:{i}")]) == b":1\r\n")
        .count();
    let late_left = (700..1000)
        .filter(|i| c.call(&["EXISTS", &format!("leased:{i}")]) == b":1\r\n")
        .count();
    assert!(late_left >= 290 && early_left < 200, "early {early_left}, late {late_left}");
}

#[test]
fn allkeys_random_evicts_and_noeviction_refuses() {
    let (_keylock, mut c) = keylock();
    c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    fill(&mut c, "a", 500, None);
    let limit = limit_to_used_plus(&mut c, 0);
    fill(&mut c, "b", 500, None);
    assert!(info_int(&mut c, "stats", "evicted_keys") >= 400);
    assert!(info_int(&mut c, "memory", "used_memory") <= limit + 100_000);
    c.call(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let before = info_int(&mut c, "stats", "evicted_keys");
    assert_eq!(
        c.call(&["SET", "one-more", &"x".repeat(100_000)]),
        b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(info_int(&mut c, "stats", "evicted_keys"), before);
}

#[test]
fn an_eviction_is_an_evicted_event_a_del_in_the_append_only_file_and_an_invalidation() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = common::keylock_in_dir(dir.path(), &["--appendonly", "yes"]);
    let mut c = Raw::connect(keylock.addr);
    c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    c.call(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    fill(&mut c, "k", 100, None);
    let mut sub = Raw::connect(keylock.addr);
    sub.call(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    let mut tracked = Raw::connect(keylock.addr);
    tracked.call(&["HELLO", "3"]);
    tracked.call(&["CLIENT", "TRACKING", "ON", "BCAST"]);
    limit_to_used_plus(&mut c, 0);
    fill(&mut c, "more", 20, None);
    let message = text(sub.reply());
    assert!(
        message.starts_with("*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:evicted\r\n"),
        "{message}"
    );
    let invalidation = text(tracked.reply());
    assert!(invalidation.starts_with(">2\r\n$10\r\ninvalidate\r\n"), "{invalidation}");
    // Replayed as DELs.
    c.call(&["PING"]);
    let incr = common::aof_incr_file(dir.path());
    let file = String::from_utf8_lossy(&std::fs::read(incr).unwrap()).into_owned();
    assert!(file.contains("$3\r\nDEL\r\n"), "no DEL of an evicted key");
}

/// OBJECT FREQ, IDLETIME and RESTORE … FREQ under LFU and LRU policies.
fn frequencies(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = Raw::connect(addr);
    let mut out = Vec::new();
    for args in [
        &["CONFIG", "SET", "maxmemory", "1gb"][..],
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        &["SET", "k", "v"],
        &["OBJECT", "FREQ", "k"],
        &["GET", "k"],
        &["OBJECT", "FREQ", "k"],
        &["OBJECT", "IDLETIME", "k"],
        &["OBJECT", "FREQ", "missing"],
        &["RPUSH", "l", "a"],
        &["OBJECT", "FREQ", "l"],
    ] {
        out.push(c.call(args));
    }
    let dump = c.call(&["DUMP", "k"]);
    let payload = &dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..dump.len() - 2];
    let send = |c: &mut Raw, args: &[&[u8]]| {
        c.send_cmd(args);
        c.reply()
    };
    out.push(send(&mut c, &[b"RESTORE", b"r", b"0", payload, b"FREQ", b"100"]));
    out.push(c.call(&["OBJECT", "FREQ", "r"]));
    out.push(send(&mut c, &[b"RESTORE", b"r2", b"0", payload, b"IDLETIME", b"100"]));
    out.push(c.call(&["OBJECT", "FREQ", "r2"]));
    out.push(c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]));
    out.push(c.call(&["OBJECT", "FREQ", "k"]));
    out.push(send(&mut c, &[b"RESTORE", b"r3", b"0", payload, b"IDLETIME", b"100"]));
    out.push(c.call(&["OBJECT", "IDLETIME", "r3"]));
    out
}

#[test]
fn object_freq_and_restore_freq_answer_as_redis_does() {
    let Some(redis) = common::real_redis() else { return };
    let expected = frequencies(redis.addr);
    let (keylock, _c) = keylock();
    assert_eq!(frequencies(keylock.addr), expected);
    assert_eq!(expected[3], b":5\r\n");
    assert_eq!(expected[11], b":100\r\n");
}

/// A client tracking a key that is evicted to make room for its own next
/// command: the invalidation, then the reply.
fn invalidation_before_reply(addr: std::net::SocketAddr) -> Vec<Vec<u8>> {
    let mut c = Raw::connect(addr);
    c.call(&["HELLO", "3"]);
    c.call(&["CLIENT", "TRACKING", "ON"]);
    let used = info_int(&mut c, "memory", "used_memory") - info_int(&mut c, "memory", "mem_not_counted_for_evict");
    c.call(&["CONFIG", "SET", "maxmemory", &(used + 100 * 1024).to_string()]);
    c.call(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]);
    c.call(&["SETEX", "volatile-key", "10000", "x"]);
    c.call(&["GET", "volatile-key"]);
    // 200 KB at once, over the limit: the next command evicts first.
    c.call(&["SETBIT", "big-key", "1600000", "0"]);
    common::send_args(&mut c, &["GETBIT", "big-key", "0"]);
    vec![c.reply(), c.reply()]
}

#[test]
fn the_invalidation_of_an_evicted_key_comes_before_the_reply_as_redis_sends_it() {
    let Some(redis) = common::real_redis() else { return };
    let expected = invalidation_before_reply(redis.addr);
    assert_eq!(
        text(expected[0].clone()),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$12\r\nvolatile-key\r\n"
    );
    let (keylock, _c) = keylock();
    assert_eq!(invalidation_before_reply(keylock.addr), expected);
}

/// Lowering `maxmemory` under what is used evicts at once, without
/// waiting for a write, as Redis's eviction timer does.
fn evicted_by_config_set(addr: std::net::SocketAddr) -> Vec<u8> {
    let mut c = Raw::connect(addr);
    c.call(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let mut subscriber = Raw::connect(addr);
    subscriber.call(&["PSUBSCRIBE", "*"]);
    c.call(&["SET", "foo", "bar"]);
    c.call(&["CONFIG", "SET", "maxmemory", "1"]);
    let message = subscriber.reply();
    c.call(&["CONFIG", "SET", "maxmemory", "0"]);
    message
}

#[test]
fn lowering_maxmemory_evicts_at_once_as_redis_does() {
    let keylock = common::start();
    let ours = evicted_by_config_set(keylock.addr());
    assert_eq!(
        text(ours.clone()),
        "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$22\r\n__keyevent@0__:evicted\r\n$3\r\nfoo\r\n"
    );
    if let Some(redis) = common::real_redis() {
        assert_eq!(evicted_by_config_set(redis.addr), ours);
    }
}

/// Redis's "is the memory limit honoured?": with 100 KB of room, small
/// keys are added one at a time until used memory is within 4 KB of the
/// limit, which it reaches a key at a time rather than in jumps (the key
/// table grows and shrinks a few kilobytes at a time); as many again keep
/// it under the limit, and eviction removes about as many keys as are
/// added, not a large part of the table at once.
#[test]
fn small_keys_fill_the_memory_up_to_the_limit_and_evictions_follow_insertions() {
    for policy in ["allkeys-lru", "allkeys-random", "volatile-ttl"] {
        let (_keylock, mut c) = keylock();
        let limit = limit_to_used_plus(&mut c, 100 * 1024);
        c.call(&["CONFIG", "SET", "maxmemory-policy", policy]);
        let mut added = 0;
        loop {
            c.call(&["SETEX", &format!("k{added}"), "10000", "x"]);
            added += 1;
            if info_int(&mut c, "memory", "used_memory") + 4096 > limit {
                break;
            }
            assert!(added < 20_000, "{policy}: used memory never came near the limit");
        }
        assert!(added > 10, "{policy}: {added}");
        assert_eq!(info_int(&mut c, "stats", "evicted_keys"), 0, "{policy}");
        for i in 0..added {
            c.call(&["SETEX", &format!("more{i}"), "10000", "x"]);
        }
        let used = info_int(&mut c, "memory", "used_memory");
        assert!(used < limit + 4096, "{policy}: {used} used, limit {limit}");
        let dbsize: usize = text(c.call(&["DBSIZE"])).trim_start_matches(':').trim().parse().unwrap();
        assert!(dbsize * 10 >= added * 8, "{policy}: {dbsize} keys left of {added} that fit");
    }
}
