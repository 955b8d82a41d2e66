//! COMMAND INFO, COMMAND DOCS, COMMAND GETKEYS and COMMAND LIST FILTERBY
//! against a real redis-server 7.0.15: for every command keylock serves
//! that Redis also knows, the replies must be the bytes Redis sends, in
//! RESP2 and in RESP3.
//!
//! One allowance, which Redis itself forces: a container's subcommands
//! come in the order of Redis's hash table, whose seed is random per
//! process, so a container's entry is compared with its subcommands
//! sorted by name. Its subcommands that only one side serves (keylock
//! serves CLIENT SETINFO of later versions; Redis serves FUNCTION LOAD,
//! which keylock does not) are left out of that entry, and each shared
//! subcommand is compared on its own anyway, as COMMAND LIST names it.
//! Without redis-server on PATH these tests skip with a message, unless
//! KEYLOCK_REQUIRE_REDIS=1 makes that a failure.

mod common;
use common::*;

use std::collections::BTreeSet;

/// A parsed RESP reply; maps are kept as their flat key, value list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Resp {
    Line(u8, Vec<u8>),
    Bulk(Vec<u8>),
    Null,
    Agg(u8, Vec<Resp>),
}

fn parse(bytes: &[u8]) -> Resp {
    let (value, rest) = parse_one(bytes);
    assert!(rest.is_empty(), "trailing bytes after a reply");
    value
}

fn parse_one(bytes: &[u8]) -> (Resp, &[u8]) {
    let end = bytes.windows(2).position(|w| w == b"\r\n").expect("a reply line");
    let (kind, head) = (bytes[0], &bytes[1..end]);
    let rest = &bytes[end + 2..];
    let n = || std::str::from_utf8(head).unwrap().parse::<i64>().unwrap();
    match kind {
        b'_' => (Resp::Null, rest),
        b'$' | b'=' if n() < 0 => (Resp::Null, rest),
        b'*' | b'~' | b'>' | b'%' if n() < 0 => (Resp::Null, rest),
        b'$' | b'=' => {
            let len = n() as usize;
            (Resp::Bulk(rest[..len].to_vec()), &rest[len + 2..])
        }
        b'*' | b'~' | b'>' | b'%' => {
            let count = if kind == b'%' { 2 * n() } else { n() };
            let mut items = Vec::new();
            let mut rest = rest;
            for _ in 0..count {
                let (item, after) = parse_one(rest);
                items.push(item);
                rest = after;
            }
            (Resp::Agg(kind, items), rest)
        }
        _ => (Resp::Line(kind, head.to_vec()), rest),
    }
}

fn name_of(r: &Resp) -> String {
    match r {
        Resp::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a name: {other:?}"),
    }
}

fn names(reply: &[u8]) -> BTreeSet<String> {
    match parse(reply) {
        Resp::Agg(_, items) => items.iter().map(name_of).collect(),
        other => panic!("not a list of names: {other:?}"),
    }
}

/// A COMMAND INFO entry with its subcommands (the tenth field) sorted by
/// name and restricted to those `keep` accepts.
fn normalize_info(entry: &mut Resp, keep: &dyn Fn(&str) -> bool) {
    let Resp::Agg(_, fields) = entry else { return };
    if let Some(Resp::Agg(_, subs)) = fields.get_mut(9) {
        subs.retain(|s| matches!(s, Resp::Agg(_, f) if keep(&name_of(&f[0]))));
        for s in subs.iter_mut() {
            normalize_info(s, keep);
        }
        subs.sort();
    }
}

/// A COMMAND DOCS entry (a flat map) with its `subcommands` map sorted by
/// name and restricted to those `keep` accepts.
fn normalize_docs(docs: &mut Resp, keep: &dyn Fn(&str) -> bool) {
    let Resp::Agg(_, fields) = docs else { return };
    let Some(at) = fields.iter().position(|f| *f == Resp::Bulk(b"subcommands".to_vec())) else {
        return;
    };
    if let Resp::Agg(_, flat) = &mut fields[at + 1] {
        let mut pairs: Vec<(Resp, Resp)> = flat.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
        pairs.retain(|(name, _)| keep(&name_of(name)));
        for (_, d) in pairs.iter_mut() {
            normalize_docs(d, keep);
        }
        pairs.sort();
        *flat = pairs.into_iter().flat_map(|(n, d)| [n, d]).collect();
    }
}

struct Pair {
    keylock: Raw,
    redis: Raw,
}

impl Pair {
    fn new(keylock: &ServerHandle, redis: &RealRedis, protocol: u8) -> Pair {
        let mut pair = Pair {
            keylock: Raw::connect(keylock.addr()),
            redis: Raw::connect(redis.addr),
        };
        if protocol == 3 {
            pair.keylock.call(&["HELLO", "3"]);
            pair.redis.call(&["HELLO", "3"]);
        }
        pair
    }

    fn both(&mut self, args: &[&str]) -> (Vec<u8>, Vec<u8>) {
        (self.keylock.call(args), self.redis.call(args))
    }
}

/// Every name keylock's COMMAND LIST has that redis-server knows, and
/// the set of names redis-server knows.
fn shared_names(pair: &mut Pair) -> (Vec<String>, BTreeSet<String>) {
    let (ours, theirs) = pair.both(&["COMMAND", "LIST"]);
    let (ours, theirs) = (names(&ours), names(&theirs));
    (ours.iter().filter(|n| theirs.contains(*n)).cloned().collect(), theirs)
}

fn compare_info_and_docs(protocol: u8) {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let mut pair = Pair::new(&keylock, &redis, protocol);
    let (shared, redis_names) = shared_names(&mut pair);
    let keylock_names = names(&pair.keylock.call(&["COMMAND", "LIST"]));
    assert!(shared.len() > 200, "only {} shared commands", shared.len());
    let ours_keep = |n: &str| redis_names.contains(n);
    let theirs_keep = |n: &str| keylock_names.contains(n);
    let mut differ = Vec::new();
    for name in &shared {
        let (ours, theirs) = pair.both(&["COMMAND", "INFO", name]);
        if ours != theirs {
            let (mut ours, mut theirs) = (parse(&ours), parse(&theirs));
            if let (Resp::Agg(_, o), Resp::Agg(_, t)) = (&mut ours, &mut theirs) {
                normalize_info(&mut o[0], &ours_keep);
                normalize_info(&mut t[0], &theirs_keep);
            }
            if ours != theirs {
                differ.push(format!("COMMAND INFO {name}:\n  keylock {ours:?}\n  redis   {theirs:?}"));
            }
        }
        let (ours, theirs) = pair.both(&["COMMAND", "DOCS", name]);
        if ours != theirs {
            let (mut ours, mut theirs) = (parse(&ours), parse(&theirs));
            if let (Resp::Agg(_, o), Resp::Agg(_, t)) = (&mut ours, &mut theirs) {
                normalize_docs(&mut o[1], &ours_keep);
                normalize_docs(&mut t[1], &theirs_keep);
            }
            if ours != theirs {
                differ.push(format!("COMMAND DOCS {name}:\n  keylock {ours:?}\n  redis   {theirs:?}"));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{} differ (RESP{protocol}):\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
fn command_info_and_docs_match_redis_for_every_shared_command_in_resp2() {
    compare_info_and_docs(2);
}

#[test]
fn command_info_and_docs_match_redis_for_every_shared_command_in_resp3() {
    compare_info_and_docs(3);
}

#[test]
fn command_info_of_several_names_and_command_errors_match_redis() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    for protocol in [2, 3] {
        let mut pair = Pair::new(&keylock, &redis, protocol);
        for args in [
            &["COMMAND", "INFO", "get", "nosuchcommand", "SET", "hset", "config|get"][..],
            &["COMMAND", "DOCS", "get", "nosuchcommand", "zadd", "client|kill"],
            &["COMMAND", "INFO", "client|nosuch"],
            &["COMMAND", "HELP"],
            &["COMMAND", "GETKEYSANDFLAGS"],
            &["COMMAND", "COUNT", "extra"],
            &["COMMAND", "NOSUCH"],
        ] {
            let (ours, theirs) = pair.both(args);
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "{args:?} in RESP{protocol}"
            );
        }
    }
}

#[test]
fn command_getkeys_and_getkeysandflags_match_redis() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let cases: &[&[&str]] = &[
        &["GET", "k"],
        &["SET", "k", "v", "EX", "10"],
        &["MSET", "a", "1", "b", "2"],
        &["MGET", "a", "b", "c"],
        &["DEL", "a", "b"],
        &["RENAME", "a", "b"],
        &["HSET", "h", "f", "v"],
        &["LMOVE", "a", "b", "LEFT", "RIGHT"],
        &["BLPOP", "a", "b", "0"],
        &["SINTERSTORE", "d", "a", "b"],
        &["SMOVE", "a", "b", "m"],
        &["ZADD", "z", "1", "m"],
        &["ZRANGESTORE", "d", "z", "0", "-1"],
        &["PFMERGE", "d", "a", "b"],
        &["BITOP", "AND", "d", "a", "b"],
        &["LCS", "a", "b"],
        &["COPY", "a", "b"],
        &["EXPIRE", "k", "10"],
        &["OBJECT", "ENCODING", "k"],
        &["MSET", "a", "1", "b"],
        &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
        &["ZUNIONSTORE", "d", "5", "a", "b"],
        &["ZUNIONSTORE", "d", "2abc", "a", "b"],
        &["ZINTER", "2", "a", "b"],
        &["ZDIFF", "0", "a"],
        &["SINTERCARD", "2", "a", "b", "LIMIT", "1"],
        &["LMPOP", "2", "a", "b", "LEFT"],
        &["BLMPOP", "0", "2", "a", "b", "LEFT"],
        &["BZMPOP", "0", "1", "z", "MIN"],
        &["EVAL", "return 1", "2", "a", "b", "x"],
        &["EVAL", "return 1", "0"],
        &["EVAL", "return 1", "3", "a"],
        &["EVAL_RO", "return 1", "1", "a"],
        &["BITFIELD", "k", "GET", "u8", "0"],
        &["SET", "k", "v", "GET"],
        &["SET", "k", "v", "NX"],
        &["BITFIELD", "k", "GET", "u8", "0", "OVERFLOW", "SAT"],
        &["BITFIELD", "k", "INCRBY", "u8", "0", "1"],
        &["BITFIELD_RO", "k", "GET", "u8", "0"],
        &["GETEX", "k", "PERSIST"],
        &["HELLO"],
        &["SUBSCRIBE", "ch"],
        &["WATCH", "a", "b"],
        &["OBJECT"],
        &["OBJECT", "NOSUCH", "k"],
        &["CONFIG", "GET", "maxmemory"],
        &["PUBLISH", "ch", "m"],
        &["PING"],
        &["GET"],
        &["NOSUCHCOMMAND", "k"],
    ];
    for protocol in [2, 3] {
        let mut pair = Pair::new(&keylock, &redis, protocol);
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            for case in cases {
                let mut args = vec!["COMMAND", sub];
                args.extend_from_slice(case);
                let (ours, theirs) = pair.both(&args);
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&theirs),
                    "{args:?} in RESP{protocol}"
                );
            }
        }
    }
}

#[test]
fn command_list_filterby_matches_redis_over_the_commands_keylock_serves() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let mut pair = Pair::new(&keylock, &redis, 2);
    let all = names(&pair.keylock.call(&["COMMAND", "LIST"]));
    let filters: &[&[&str]] = &[
        &["ACLCAT", "read"],
        &["ACLCAT", "write"],
        &["ACLCAT", "keyspace"],
        &["ACLCAT", "string"],
        &["ACLCAT", "fast"],
        &["ACLCAT", "slow"],
        &["ACLCAT", "admin"],
        &["ACLCAT", "dangerous"],
        &["ACLCAT", "connection"],
        &["ACLCAT", "scripting"],
        &["ACLCAT", "blocking"],
        &["ACLCAT", "pubsub"],
        &["ACLCAT", "sortedset"],
        &["ACLCAT", "nosuchcategory"],
        &["PATTERN", "z*"],
        &["PATTERN", "client|*"],
        &["PATTERN", "*get*"],
    ];
    for filter in filters {
        let mut args = vec!["COMMAND", "LIST", "FILTERBY"];
        args.extend_from_slice(filter);
        let (ours, theirs) = pair.both(&args);
        let ours = names(&ours);
        let theirs: BTreeSet<String> = names(&theirs).into_iter().filter(|n| all.contains(n)).collect();
        let keylock_only: BTreeSet<&String> = ours.difference(&theirs).collect();
        // keylock's own commands may match a pattern Redis has nothing for.
        assert!(
            keylock_only
                .iter()
                .all(|n| n.starts_with("keylock") || names_not_in_redis().contains(&n.as_str())),
            "{filter:?}: keylock lists {keylock_only:?} that Redis does not"
        );
        let missing: Vec<&String> = theirs.difference(&ours).collect();
        assert!(missing.is_empty(), "{filter:?}: keylock does not list {missing:?}");
    }
}

/// Commands keylock serves that Redis 7.0.15 does not have (later versions').
fn names_not_in_redis() -> &'static [&'static str] {
    &["client|capa", "client|no-touch", "client|setinfo", "waitaof"]
}

/// Every command redis-server 7.0.15 has, keylock has (the test names any
/// missing); keylock's extras are its own test controls and the commands
/// later Redis versions added that client libraries send on connect.
#[test]
fn command_list_is_redis_servers_plus_keylocks_own() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let mut pair = Pair::new(&keylock, &redis, 2);
    let (ours, theirs) = pair.both(&["COMMAND", "LIST"]);
    let (ours, theirs) = (names(&ours), names(&theirs));
    let missing: Vec<&String> = theirs.difference(&ours).collect();
    assert!(missing.is_empty(), "keylock lacks {missing:?}");
    let extra: BTreeSet<&str> = ours.difference(&theirs).map(String::as_str).collect();
    let own: BTreeSet<&str> = [
        "keylock",
        "keylock|addmember",
        "keylock|clock",
        "keylock|cluster",
        "keylock|delmember",
        "keylock|fault",
        "keylock|help",
        "keylock|lock",
        "keylock|locks",
        "keylock|reset",
        "keylock|restart",
        "client|capa",
        "client|no-touch",
        "client|setinfo",
        "waitaof",
    ]
    .into_iter()
    .collect();
    assert_eq!(extra, own);
    let (ours, theirs) = pair.both(&["COMMAND", "COUNT"]);
    // KEYLOCK and WAITAOF are the two top-level commands beyond Redis's.
    let count = |r: &[u8]| String::from_utf8_lossy(&r[1..r.len() - 2]).parse::<i64>().unwrap();
    assert_eq!(count(&ours), count(&theirs) + 2);
}
