//! Keyspace notifications (`notify-keyspace-events`), compared byte for
//! byte with a real redis-server: a subscriber PSUBSCRIBEs `__key*__:*`,
//! a writer runs a corpus of commands, and what the subscriber received
//! (every message, in order) must be what redis-server's subscriber
//! received. Each corpus runs with every class (`KEA`) and with partial
//! class sets.

mod common;
use common::*;

use std::net::SocketAddr;
use std::time::Duration;

/// A corpus line: a command, `SLEEP <ms>` (the writer waits), `BLOCK
/// <command…>` (a second connection sends it without waiting for its
/// reply) or `UNBLOCKED` (that connection's reply is read).
type Corpus = &'static [&'static [&'static str]];

/// Runs `corpus` on `addr` with `classes` enabled; returns what the
/// subscriber received, then the writer's replies.
fn record(addr: SocketAddr, classes: &str, corpus: Corpus) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut writer = Raw::connect(addr);
    writer.call(&["FLUSHALL"]);
    writer.call(&["CONFIG", "SET", "notify-keyspace-events", classes]);
    let mut sub = Raw::connect(addr);
    sub.call(&["PSUBSCRIBE", "__key*__:*"]);
    sub.call(&["SUBSCRIBE", "corpus-end"]);
    let mut blocker = Raw::connect(addr);
    let mut replies = Vec::new();
    for line in corpus {
        match line[0] {
            "SLEEP" => std::thread::sleep(Duration::from_millis(line[1].parse().unwrap())),
            "BLOCK" => {
                let args: Vec<&[u8]> = line[1..].iter().map(|a| a.as_bytes()).collect();
                blocker.send_cmd(&args);
                std::thread::sleep(Duration::from_millis(100));
            }
            "UNBLOCKED" => replies.extend(blocker.reply()),
            _ => replies.extend(writer.call(line)),
        }
    }
    writer.call(&["PUBLISH", "corpus-end", "."]);
    let mut received = Vec::new();
    loop {
        let message = sub.reply();
        if message.windows(10).any(|w| w == b"corpus-end") {
            break;
        }
        received.push(message);
    }
    writer.call(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    (received, replies)
}

fn both_with(extra: &[&str], keylock_directives: &[(&str, &str)], classes: &[&str], corpus: Corpus) {
    let Some(redis) = real_redis_with(extra) else { return };
    let directives: Vec<(String, Vec<String>)> = keylock_directives
        .iter()
        .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
        .collect();
    let keylock = start_with(|c| c.directives.extend(directives));
    for classes in classes {
        let (theirs, their_replies) = record(redis.addr, classes, corpus);
        let (ours, our_replies) = record(keylock.addr(), classes, corpus);
        let show = |b: &[u8]| String::from_utf8_lossy(b).replace("\r\n", " ");
        assert_eq!(show(&our_replies), show(&their_replies), "replies differ with {classes:?}");
        if ours != theirs {
            let first = ours.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
            let around = |m: &[Vec<u8>]| m.iter().skip(first.saturating_sub(2)).take(5).map(|b| show(b)).collect::<Vec<_>>();
            panic!(
                "messages differ with {classes:?} from message {first} ({} vs {} messages)\nkeylock:      {:#?}\nredis-server: {:#?}",
                ours.len(),
                theirs.len(),
                around(&ours),
                around(&theirs)
            );
        }
    }
}

fn both(classes: &[&str], corpus: Corpus) {
    both_with(&[], &[], classes, corpus)
}

const PARTIAL: &[&str] = &["KEA", "AKEn", "Kl", "Eg$", "Ex", "En", "Ks", "Eh", "Kz", "KEgx"];

#[test]
fn generic_and_string_commands_publish_what_redis_publishes() {
    both(
        PARTIAL,
        &[
            &["SET", "s", "1"],
            &["SET", "s", "2", "NX"],
            &["SET", "s", "3", "XX", "EX", "100"],
            &["SET", "s2", "v", "GET"],
            &["SETNX", "s", "x"],
            &["SETNX", "s3", "x"],
            &["SETEX", "s4", "100", "v"],
            &["PSETEX", "s5", "100000", "v"],
            &["MSET", "m1", "a", "m2", "b"],
            &["MSETNX", "m1", "a", "m3", "b"],
            &["MSETNX", "m4", "a", "m5", "b"],
            &["APPEND", "s", "tail"],
            &["APPEND", "ap", "new"],
            &["SETRANGE", "s", "1", "xy"],
            &["SETRANGE", "sr", "2", "xy"],
            &["SETRANGE", "sr2", "0", ""],
            &["INCR", "n"],
            &["INCRBY", "n", "5"],
            &["DECR", "n"],
            &["DECRBY", "n", "2"],
            &["INCRBYFLOAT", "n", "1.5"],
            &["INCR", "s"],
            &["GETSET", "n", "9"],
            &["GETDEL", "n"],
            &["GETDEL", "n"],
            &["GETEX", "s", "EX", "100"],
            &["GETEX", "s", "PERSIST"],
            &["GETEX", "s"],
            &["GETEX", "m1", "PX", "0"],
            &["DEL", "missing"],
            &["DEL", "m2", "m3", "missing"],
            &["UNLINK", "m4"],
            &["EXPIRE", "s", "100"],
            &["EXPIRE", "s", "50", "GT"],
            &["PEXPIRE", "s", "200000"],
            &["EXPIREAT", "s", "99999999999"],
            &["PERSIST", "s"],
            &["PERSIST", "s"],
            &["EXPIRE", "missing", "10"],
            &["EXPIRE", "s2", "-1"],
            &["RENAME", "s", "r"],
            &["RENAME", "r", "r"],
            &["SET", "o", "1"],
            &["RENAMENX", "r", "o"],
            &["RENAMENX", "r", "q"],
            &["RENAME", "q", "o"],
            &["COPY", "o", "c"],
            &["COPY", "o", "c"],
            &["COPY", "o", "c", "REPLACE"],
            &["COPY", "o", "c", "DB", "1"],
            &["MOVE", "c", "2"],
            &["MOVE", "o", "2"],
            &["SET", "lazy", "v", "PX", "50"],
            &["SLEEP", "120"],
            &["GET", "lazy"],
            &["SET", "active", "v", "PX", "20"],
            &["SLEEP", "600"],
            &["SELECT", "2"],
            &["SET", "indb2", "v"],
            &["SWAPDB", "0", "2"],
            &["SELECT", "0"],
        ],
    );
}

#[test]
fn list_commands_publish_what_redis_publishes() {
    both(
        PARTIAL,
        &[
            &["LPUSH", "l", "a", "b"],
            &["RPUSH", "l", "c"],
            &["LPUSHX", "l", "d"],
            &["LPUSHX", "nol", "d"],
            &["RPUSHX", "l", "e"],
            &["LINSERT", "l", "BEFORE", "a", "x"],
            &["LINSERT", "l", "AFTER", "nope", "x"],
            &["LSET", "l", "0", "y"],
            &["LREM", "l", "0", "x"],
            &["LREM", "l", "0", "nope"],
            &["LTRIM", "l", "0", "10"],
            &["LTRIM", "l", "1", "-2"],
            &["LPOP", "l"],
            &["RPOP", "l", "1"],
            &["RPOPLPUSH", "l", "l2"],
            &["LMOVE", "l2", "l3", "LEFT", "RIGHT"],
            &["LMOVE", "l", "l", "LEFT", "LEFT"],
            &["LMPOP", "2", "none", "l", "RIGHT", "COUNT", "5"],
            &["BLPOP", "l3", "1"],
            &["RPUSH", "t", "a", "b"],
            &["LTRIM", "t", "5", "10"],
            &["RPUSH", "t", "a"],
            &["LREM", "t", "1", "a"],
            &["LPOP", "missing"],
        ],
    );
}

#[test]
fn hash_set_and_sorted_set_commands_publish_what_redis_publishes() {
    both(
        PARTIAL,
        &[
            &["HSET", "h", "a", "1", "b", "2"],
            &["HSETNX", "h", "a", "1"],
            &["HSETNX", "h", "c", "1"],
            &["HMSET", "h", "d", "1"],
            &["HINCRBY", "h", "a", "2"],
            &["HINCRBYFLOAT", "h", "a", "2.5"],
            &["HDEL", "h", "nope"],
            &["HDEL", "h", "a", "b"],
            &["HDEL", "h", "c", "d"],
            &["SADD", "s", "a", "b", "c", "d"],
            &["SADD", "s", "a"],
            &["SREM", "s", "a", "nope"],
            &["SREM", "s", "nope"],
            &["SMOVE", "s", "s2", "b"],
            &["SMOVE", "s", "s2", "nope"],
            &["SPOP", "s2"],
            &["SADD", "s3", "x", "y"],
            &["SPOP", "s3", "0"],
            &["SREM", "s3", "x"],
            &["SPOP", "s3", "1"],
            &["SADD", "s3", "z"],
            &["SPOP", "s3", "5"],
            &["SADD", "s4", "x", "y", "z"],
            &["SREM", "s4", "x", "y"],
            &["SPOP", "s4"],
            &["SADD", "a", "1", "2", "3"],
            &["SADD", "b", "2", "3", "4"],
            &["SINTERSTORE", "i", "a", "b"],
            &["SUNIONSTORE", "u", "a", "b"],
            &["SDIFFSTORE", "d", "a", "b"],
            &["SINTERSTORE", "i", "a", "missing"],
            &["SDIFFSTORE", "none", "missing", "a"],
            &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"],
            &["ZADD", "z", "NX", "1", "a"],
            &["ZADD", "z", "XX", "CH", "5", "a"],
            &["ZADD", "z", "INCR", "1", "a"],
            &["ZINCRBY", "z", "2", "b"],
            &["ZREM", "z", "nope"],
            &["ZREM", "z", "a"],
            &["ZREMRANGEBYSCORE", "z", "0", "2"],
            &["ZREMRANGEBYRANK", "z", "0", "0"],
            &["ZADD", "z", "0", "m", "0", "n", "0", "o"],
            &["ZREMRANGEBYLEX", "z", "[m", "[m"],
            &["ZPOPMIN", "z"],
            &["ZPOPMAX", "z", "5"],
            &["ZADD", "z1", "1", "a", "2", "b"],
            &["ZADD", "z2", "1", "b", "3", "c"],
            &["ZUNIONSTORE", "zu", "2", "z1", "z2"],
            &["ZINTERSTORE", "zi", "2", "z1", "z2"],
            &["ZDIFFSTORE", "zd", "2", "z1", "z2"],
            &["ZINTERSTORE", "zi", "2", "z1", "missing"],
            &["ZRANGESTORE", "zr", "z1", "0", "-1"],
            &["ZRANGESTORE", "zr", "missing", "0", "-1"],
            &["ZMPOP", "1", "z1", "MIN"],
            &["BZPOPMIN", "z1", "1"],
            &["SETBIT", "bits", "7", "1"],
            &["SETBIT", "bits", "7", "1"],
            &["BITOP", "OR", "bo", "bits", "missing"],
            &["BITOP", "OR", "bo", "missing"],
            &["BITFIELD", "bf", "SET", "u8", "0", "255"],
            &["BITFIELD", "bf", "GET", "u8", "0"],
        ],
    );
}

#[test]
fn transactions_and_scripts_publish_what_redis_publishes() {
    both(
        &["KEA", "Kg", "Eh"],
        &[
            &["MULTI"],
            &["SET", "a", "1"],
            &["INCR", "a"],
            &["LPUSH", "l", "x"],
            &["EXEC"],
            &[
                "EVAL",
                "redis.call('set', KEYS[1], 'v'); redis.call('hset', KEYS[2], 'f', 'v'); redis.call('publish', 'x', 'y'); redis.call('del', KEYS[1]); return 1",
                "2",
                "k",
                "h",
            ],
            &[
                "EVAL",
                "redis.call('set', KEYS[1], 'v'); return redis.call('incr', KEYS[1])",
                "1",
                "k",
            ],
        ],
    );
}

const LOCK_ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/lock-acquire.lua");
const LOCK_UNLOCK: &str = include_str!("../lua/redisson/4.7.0/lock-unlock.lua");

fn lock_corpus() -> Corpus {
    let c: Vec<&'static [&'static str]> = vec![
        Box::leak(Box::new(["EVAL", LOCK_ACQUIRE, "1", "lock", "30000", "id:1"])),
        Box::leak(Box::new(["EVAL", LOCK_ACQUIRE, "1", "lock", "30000", "id:1"])),
        Box::leak(Box::new([
            "EVAL",
            LOCK_UNLOCK,
            "3",
            "lock",
            "channel",
            "latch",
            "0",
            "30000",
            "id:1",
            "PUBLISH",
            "10",
        ])),
        Box::leak(Box::new(["DEL", "latch"])),
        Box::leak(Box::new([
            "EVAL",
            LOCK_UNLOCK,
            "3",
            "lock",
            "channel",
            "latch",
            "0",
            "30000",
            "id:1",
            "PUBLISH",
            "10",
        ])),
    ];
    Box::leak(c.into_boxed_slice())
}

#[test]
fn redisson_lock_scripts_publish_what_redis_publishes_natively() {
    both(&["KEA", "KEAn"], lock_corpus());
}

#[test]
fn redisson_lock_scripts_publish_what_redis_publishes_through_lua() {
    both_with(&[], &[("native-scripts", "no")], &["KEA"], lock_corpus());
}

/// The start-up directive enables notifications as CONFIG SET does; `n`
/// beside `A` is not shown (as Redis shows it) but is on.
#[test]
fn start_up_flag_enables_notifications() {
    let keylock = start_with(|c| c.directives.push(("notify-keyspace-events".into(), vec!["KEAn".into()])));
    let mut c = Raw::connect(keylock.addr());
    assert_eq!(
        c.call(&["CONFIG", "GET", "notify-keyspace-events"]),
        b"*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n"
    );
    let mut sub = Raw::connect(keylock.addr());
    sub.call(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    c.call(&["SET", "k", "v"]);
    assert_eq!(
        sub.reply(),
        b"*4\r\n$8\r\npmessage\r\n$16\r\n__keyevent@0__:*\r\n$18\r\n__keyevent@0__:new\r\n$1\r\nk\r\n"
    );
    assert_eq!(
        sub.reply(),
        b"*4\r\n$8\r\npmessage\r\n$16\r\n__keyevent@0__:*\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nk\r\n"
    );
}

#[test]
fn serving_blocked_clients_publishes_what_redis_publishes() {
    both(
        &["KEA", "AKEn", "Kl", "Ez"],
        &[
            &["BLOCK", "BLPOP", "q", "0"],
            &["RPUSH", "q", "a", "b"],
            &["UNBLOCKED"],
            &["BLOCK", "BRPOP", "q2", "0"],
            &["RPUSH", "q2", "only"],
            &["UNBLOCKED"],
            &["BLOCK", "BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"],
            &["LPUSH", "src", "x"],
            &["UNBLOCKED"],
            &["BLOCK", "BRPOPLPUSH", "src2", "dst", "0"],
            &["MULTI"],
            &["LPUSH", "src2", "y", "z"],
            &["SET", "other", "1"],
            &["EXEC"],
            &["UNBLOCKED"],
            &["BLOCK", "BLMPOP", "0", "1", "m", "RIGHT", "COUNT", "5"],
            &["RPUSH", "m", "1", "2", "3"],
            &["UNBLOCKED"],
            &["BLOCK", "BZPOPMIN", "z", "0"],
            &["ZADD", "z", "1", "a", "2", "b"],
            &["UNBLOCKED"],
            &["BLOCK", "BZMPOP", "0", "1", "z2", "MAX", "COUNT", "3"],
            &["ZADD", "z2", "1", "a"],
            &["UNBLOCKED"],
            &["BLOCK", "BLPOP", "gone", "0"],
            &[
                "EVAL",
                "redis.call('lpush', KEYS[1], 'v'); redis.call('del', KEYS[1]); redis.call('rpush', KEYS[1], 'w'); return 1",
                "1",
                "gone",
            ],
            &["UNBLOCKED"],
        ],
    );
}

#[test]
fn stream_commands_publish_what_redis_publishes() {
    both(
        &["KEA", "AKEn", "Kt", "Et", "Eg", "Em", "Kgt"],
        &[
            &["XADD", "s", "1-0", "f", "v"],
            &["XADD", "s", "2-0", "f", "v"],
            &["XADD", "s", "1-0", "f", "v"],
            &["XADD", "s", "MAXLEN", "1", "3-0", "f", "v"],
            &["XADD", "s", "MAXLEN", "5", "4-0", "f", "v"],
            &["XADD", "nokey", "NOMKSTREAM", "1-0", "f", "v"],
            &["XDEL", "s", "3-0"],
            &["XDEL", "s", "3-0"],
            &["XTRIM", "s", "MAXLEN", "5"],
            &["XTRIM", "s", "MAXLEN", "0"],
            &["XLEN", "missing"],
            &["XRANGE", "missing", "-", "+"],
            &["XGROUP", "CREATE", "s", "g", "0"],
            &["XGROUP", "CREATE", "s", "g", "0"],
            &["XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"],
            &["XGROUP", "CREATECONSUMER", "s", "g", "c1"],
            &["XGROUP", "CREATECONSUMER", "s", "g", "c1"],
            &["XADD", "s", "5-0", "f", "v"],
            &["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"],
            &["XREADGROUP", "GROUP", "g", "c2", "NOACK", "STREAMS", "s", "0"],
            &["XCLAIM", "s", "g", "c3", "0", "5-0"],
            &["XAUTOCLAIM", "s", "g", "c4", "0", "0"],
            &["XACK", "s", "g", "5-0"],
            &["XGROUP", "SETID", "s", "g", "0"],
            &["XGROUP", "DELCONSUMER", "s", "g", "c1"],
            &["XGROUP", "DELCONSUMER", "s", "g", "nobody"],
            &["XSETID", "s", "10-0"],
            &["XGROUP", "DESTROY", "s", "g"],
            &["XGROUP", "DESTROY", "s", "g"],
            &["XGROUP", "CREATE", "s", "g2", "$"],
            &["BLOCK", "XREADGROUP", "GROUP", "g2", "c9", "BLOCK", "0", "STREAMS", "s", ">"],
            &["XADD", "s", "11-0", "f", "v"],
            &["UNBLOCKED"],
            &["BLOCK", "XREAD", "BLOCK", "0", "STREAMS", "s", "$"],
            &["XADD", "s", "12-0", "f", "v"],
            &["UNBLOCKED"],
            &["DEL", "s", "new"],
        ],
    );
}

#[test]
fn read_misses_publish_keymiss_as_redis_does() {
    both(
        &["KEAm", "Em", "Km", "KEA"],
        &[
            &["GET", "missing"],
            &["MGET", "a", "missing"],
            &["EXISTS", "missing"],
            &["TYPE", "missing"],
            &["TTL", "missing"],
            &["PTTL", "missing"],
            &["OBJECT", "ENCODING", "missing"],
            &["OBJECT", "IDLETIME", "missing"],
            &["SET", "k", "v"],
            &["GET", "k"],
            &["STRLEN", "missing"],
            &["LRANGE", "missing", "0", "-1"],
            &["LLEN", "missing"],
            &["HGET", "missing", "f"],
            &["HGETALL", "missing"],
            &["SMEMBERS", "missing"],
            &["SINTER", "k2", "missing"],
            &["ZSCORE", "missing", "m"],
            &["ZRANGE", "missing", "0", "-1"],
            &["ZUNIONSTORE", "dst", "2", "missing", "missing2"],
            &["GETBIT", "missing", "0"],
            &["BITCOUNT", "missing"],
            &["LCS", "missing", "k"],
            &["LCS", "k", "missing2", "LEN"],
            &["COPY", "missing", "x"],
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "missing"],
            &["SET", "gone", "v", "PX", "1"],
            &["SLEEP", "30"],
            &["GET", "gone"],
        ],
    );
}

#[test]
fn hyperloglog_commands_publish_what_redis_publishes() {
    both(
        &["KEA", "KEAnm", "E$", "Kg", "En", "Em"],
        &[
            &["PFADD", "h"],
            &["PFADD", "h"],
            &["PFADD", "h", "a", "b"],
            &["PFADD", "h", "a"],
            &["PFCOUNT", "h"],
            &["PFCOUNT", "h"],
            &["PFCOUNT", "h", "missing"],
            &["PFCOUNT", "missing"],
            &["PFMERGE", "d", "h", "missing"],
            &["PFMERGE", "d"],
            &["PFMERGE", "d2"],
            &["PFDEBUG", "TODENSE", "h"],
            &["PFDEBUG", "GETREG", "d"],
            &["PFDEBUG", "ENCODING", "missing"],
            &["PFADD", "h", "c"],
            &["SET", "s", "x"],
            &["PFADD", "s", "a"],
            &["PFMERGE", "d", "s"],
            &["APPEND", "d2", "x"],
            &["PFADD", "d2", "a"],
            &["PFCOUNT", "d2"],
            // 20 ms, not 1: Redis checks whether the deadline already
            // passed with a second clock read, and on a loaded machine a
            // millisecond can pass between the two (it then deletes the
            // key: `del`, not `expire`).
            &["PFADD", "gone", "a"],
            &["PEXPIRE", "gone", "20"],
            &["SLEEP", "60"],
            &["PFADD", "gone", "b"],
            &["PEXPIRE", "gone", "20"],
            &["SLEEP", "60"],
            &["PFMERGE", "gone", "h"],
            &["EVAL", "return redis.call('pfadd', KEYS[1], 'z')", "1", "h"],
        ],
    );
}

#[test]
fn lock_scripts_publish_keymiss_as_redis_does() {
    both(&["KEAm"], lock_corpus());
    both_with(&[], &[("native-scripts", "no")], &["KEAm"], lock_corpus());
}

/// A RESP3 client subscribed to the events its own write causes receives
/// them ahead of the write's reply, as Redis publishes them inside the
/// command.
#[test]
fn a_resp3_subscriber_sees_its_own_events_before_the_reply() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let run = |addr: SocketAddr| {
        let mut c = Raw::connect(addr);
        c.call(&["HELLO", "3"]);
        c.call(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        c.call(&["PSUBSCRIBE", "__key*__:*"]);
        let mut out = Vec::new();
        for line in [&["SET", "k", "v"][..], &["INCR", "n"], &["DEL", "k", "n"], &["GET", "missing"]] {
            out.push(c.call(line));
            // What follows the first reply up to the command's own.
            while !out.last().unwrap().starts_with(b"+") && !out.last().unwrap().starts_with(b":") && !out.last().unwrap().starts_with(b"_")
            {
                out.push(c.reply());
            }
        }
        c.call(&["CONFIG", "SET", "notify-keyspace-events", ""]);
        out.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>()
    };
    assert_eq!(run(keylock.addr()), run(redis.addr));
}

/// KEYLOCK CLOCK ADVANCE expires what the jump made due through the same
/// removal as lazy and active expiry: each key publishes `expired`.
#[test]
fn clock_advance_publishes_expired() {
    let keylock = start();
    let mut c = Raw::connect(keylock.addr());
    c.call(&["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    let mut sub = Raw::connect(keylock.addr());
    sub.call(&["SUBSCRIBE", "__keyevent@0__:expired"]);
    c.call(&["KEYLOCK", "CLOCK", "FREEZE"]);
    c.call(&["SET", "k", "v", "EX", "100"]);
    c.call(&["KEYLOCK", "CLOCK", "ADVANCE", "100001"]);
    assert_eq!(sub.reply(), b"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:expired\r\n$1\r\nk\r\n");
}

/// Nothing is published while notifications are off, nor with classes
/// but neither K nor E, nor with K and E but no class.
#[test]
fn nothing_is_published_without_both_a_channel_kind_and_a_class() {
    both(
        &["", "g", "A", "KE"],
        &[
            &["SET", "k", "v"],
            &["LPUSH", "l", "a"],
            &["DEL", "k", "l"],
            &["SET", "t", "v", "PX", "1"],
            &["SLEEP", "20"],
            &["GET", "t"],
        ],
    );
}

/// Failed commands and writes that change nothing publish nothing; the
/// writes at the edges of each family publish what Redis's do.
#[test]
fn failed_and_no_op_writes_publish_what_redis_publishes() {
    both(
        &["KEAn", "KEA"],
        &[
            &["ZADD", "z", "XX", "1", "a"],
            &["ZADD", "z", "INCR", "1", "a"],
            &["ZADD", "z", "INCR", "+inf", "a"],
            &["ZADD", "z", "INCR", "-inf", "a"],
            &["ZADD", "z", "GT", "1", "a"],
            &["ZADD", "z", "LT", "CH", "1", "a"],
            &["ZINCRBY", "z", "1", "b"],
            &["ZPOPMIN", "z", "0"],
            &["ZPOPMIN", "missing"],
            &["ZREMRANGEBYSCORE", "z", "100", "200"],
            &["ZRANGESTORE", "z", "missing", "0", "-1"],
            &["SET", "str", "abc"],
            &["ZADD", "str", "1", "a"],
            &["HSET", "str", "f", "v"],
            &["HINCRBY", "h", "f", "1"],
            &["HSET", "h", "s", "x"],
            &["HINCRBY", "h", "s", "1"],
            &["HINCRBYFLOAT", "h", "s", "1"],
            &["HDEL", "missing", "f"],
            &["HSETNX", "h", "f", "2"],
            &["LSET", "missing", "0", "x"],
            &["RPUSH", "l", "a"],
            &["LSET", "l", "5", "x"],
            &["LPUSH", "str", "x"],
            &["LINSERT", "missing", "BEFORE", "a", "b"],
            &["LTRIM", "missing", "0", "1"],
            &["LREM", "l", "0", "zz"],
            &["LMOVE", "l", "str", "LEFT", "LEFT"],
            &["LMOVE", "missing", "l", "LEFT", "LEFT"],
            &["RPOPLPUSH", "l", "l"],
            &["INCR", "str"],
            &["INCRBYFLOAT", "str", "1"],
            &["SET", "big", "9223372036854775807"],
            &["INCR", "big"],
            &["SETRANGE", "str", "0", ""],
            &["SETRANGE", "nothing", "0", ""],
            &["APPEND", "str", ""],
            &["GETEX", "missing", "EX", "10"],
            &["GETEX", "str", "EX", "0"],
            &["GETDEL", "missing"],
            &["EXPIRE", "str", "100", "XX"],
            &["EXPIRE", "str", "100", "NX"],
            &["EXPIRE", "str", "100", "NX"],
            &["EXPIRE", "str", "50", "GT"],
            &["EXPIRE", "str", "500", "LT"],
            &["PEXPIREAT", "str", "1"],
            &["RENAME", "missing", "x"],
            &["COPY", "missing", "x"],
            &["SET", "src", "v"],
            &["COPY", "src", "str"],
            &["MOVE", "missing", "1"],
            &["SET", "inone", "x"],
            &["MOVE", "inone", "1"],
            &["SET", "inone", "y"],
            &["MOVE", "inone", "1"],
            &["SADD", "s", "a"],
            &["SMOVE", "s", "str", "a"],
            &["SMOVE", "s", "s", "a"],
            &["SMOVE", "s", "t", "a"],
            &["SREM", "missing", "a"],
            &["SPOP", "missing"],
            &["SINTERSTORE", "s", "missing"],
            &["SUNIONSTORE", "dst", "str"],
            &["SETBIT", "bits", "3", "0"],
            &["SETBIT", "bits", "3", "0"],
            &["SETBIT", "bits", "100", "0"],
            &["SETBIT", "str", "1", "2"],
            &["BITOP", "NOT", "nb", "bits"],
            &["BITFIELD", "bf", "GET", "u8", "0"],
            &["BITFIELD", "bf2", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "10"],
            &["BITFIELD", "bits", "SET", "u8", "0", "0"],
            &["BITFIELD", "bits", "INCRBY", "u8", "0", "0"],
            &["MSET", "a", "1", "a", "2"],
            &["SET", "k", "v", "EXAT", "1"],
            &["SET", "k2", "v", "KEEPTTL"],
            &["SET", "k2", "w", "XX", "GET"],
            &["SET", "str", "v", "NX", "GET"],
            &[
                "EVAL",
                "redis.call('set', KEYS[1], 'v'); return redis.call('lpush', KEYS[1], 'x')",
                "1",
                "ev",
            ],
            &[
                "EVAL",
                "redis.pcall('incr', KEYS[1]); redis.call('rpush', KEYS[2], 'a'); return 1",
                "2",
                "str",
                "evl",
            ],
            &["MULTI"],
            &["SET", "m", "1"],
            &["LPUSH", "m", "x"],
            &["EXPIRE", "m", "10"],
            &["EXEC"],
        ],
    );
}

const RW_READ_ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/rwlock-read-acquire.lua");
const RW_WRITE_ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/rwlock-write-acquire.lua");
const RW_WRITE_UNLOCK: &str = include_str!("../lua/redisson/4.7.0/rwlock-write-unlock.lua");
const SEM_TRYACQUIRE: &str = include_str!("../lua/redisson/4.7.0/semaphore-tryacquire.lua");
const SEM_RELEASE: &str = include_str!("../lua/redisson/4.7.0/semaphore-release.lua");
const FAIR_ACQUIRE: &str = include_str!("../lua/redisson/4.7.0/fairlock-acquire.lua");

const SYNCHRONIZERS: Corpus = &[
    &["EVAL", RW_WRITE_ACQUIRE, "1", "rw", "30000", "o1:write"],
    &["EVAL", RW_WRITE_ACQUIRE, "1", "rw", "30000", "o1:write"],
    &[
        "EVAL",
        RW_WRITE_UNLOCK,
        "3",
        "rw",
        "redisson_rwlock:{rw}",
        "latch1",
        "0",
        "30000",
        "o1:write",
        "PUBLISH",
        "8600",
    ],
    &[
        "EVAL",
        RW_WRITE_UNLOCK,
        "3",
        "rw",
        "redisson_rwlock:{rw}",
        "latch2",
        "0",
        "30000",
        "o1:write",
        "PUBLISH",
        "8600",
    ],
    &[
        "EVAL",
        RW_READ_ACQUIRE,
        "2",
        "rw",
        "{rw}:o2:rwlock_timeout",
        "30000",
        "o2",
        "o2:write",
    ],
    &["SET", "sem", "3"],
    &["EVAL", SEM_TRYACQUIRE, "1", "sem", "2"],
    &["EVAL", SEM_TRYACQUIRE, "1", "sem", "2"],
    &["EVAL", SEM_RELEASE, "2", "sem", "semchannel", "1", "PUBLISH"],
    &[
        "EVAL",
        FAIR_ACQUIRE,
        "3",
        "fair",
        "fairq",
        "fairt",
        "30000",
        "f1",
        "5000",
        "1700000000000",
    ],
    &[
        "EVAL",
        FAIR_ACQUIRE,
        "3",
        "fair",
        "fairq",
        "fairt",
        "30000",
        "f1",
        "5000",
        "1700000000000",
    ],
];

#[test]
fn redisson_synchronizer_scripts_publish_what_redis_publishes() {
    both(&["KEA", "KEAnm"], SYNCHRONIZERS);
    both_with(&[], &[("native-scripts", "no")], &["KEAnm"], SYNCHRONIZERS);
}
