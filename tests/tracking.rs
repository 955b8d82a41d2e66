//! Client-side caching (CLIENT TRACKING), compared byte for byte with a
//! real redis-server: each scenario drives a few named connections on
//! both servers, step by step, and what every connection received after
//! each step (replies, invalidation pushes, `__redis__:invalidate`
//! messages, in order) must be what the same connection received from
//! redis-server.
//!
//! Client ids differ between the servers: `{id:x}` in a step stands for
//! connection `x`'s id, and ids in what is received are shown as `{id:x}`.
//! `@lua:PATH` stands for the bytes of `lua/PATH` (a script clients send),
//! `""` for an empty argument.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a connection must stay silent for a step to be over.
const QUIET: Duration = Duration::from_millis(40);

struct Conn {
    stream: TcpStream,
    id: String,
}

/// Runs `steps` on `addr`. A step is `name: COMMAND args…` (`name` is
/// connected on first use; `name!` sends without recording the reply),
/// or `sleep <ms>`. Returns, per connection, what it received at each
/// step.
fn record(addr: SocketAddr, steps: &[&str]) -> BTreeMap<String, Vec<String>> {
    let mut conns: BTreeMap<String, Conn> = BTreeMap::new();
    let mut log: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut admin = Raw::connect(addr);
    admin.call(&["FLUSHALL"]);
    admin.call(&["CONFIG", "SET", "tracking-table-max-keys", "1000000"]);
    for (i, step) in steps.iter().enumerate() {
        if let Some(ms) = step.strip_prefix("sleep ") {
            std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
            continue;
        }
        let (name, command) = step.split_once(':').expect("name: command");
        let (name, quiet) = match name.strip_suffix('!') {
            Some(n) => (n.to_string(), true),
            None => (name.to_string(), false),
        };
        if !conns.contains_key(&name) {
            let mut raw = Raw::connect(addr);
            let reply = raw.call(&["CLIENT", "ID"]);
            let id = String::from_utf8_lossy(&reply[1..reply.len() - 2]).to_string();
            let stream = raw.writer.try_clone().unwrap();
            stream.set_read_timeout(Some(QUIET)).unwrap();
            conns.insert(name.clone(), Conn { stream, id });
        }
        let args: Vec<String> = command
            .split_whitespace()
            .map(|a| {
                let mut a = a.to_string();
                for (n, c) in &conns {
                    a = a.replace(&format!("{{id:{n}}}"), &c.id);
                }
                match a.strip_prefix("@lua:") {
                    Some(path) => std::fs::read_to_string(format!("{}/lua/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap(),
                    None if a == "\"\"" => String::new(),
                    None => a,
                }
            })
            .collect();
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        use std::io::Write;
        conns[&name].stream.try_clone().unwrap().write_all(&encode(&args)).unwrap();
        let blocks = args[0].to_ascii_uppercase().starts_with(b"BL");
        for (n, c) in conns.iter_mut() {
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            if *n == name && !blocks {
                // The sender's reply comes, however loaded the machine is;
                // what follows it is read until the connection is quiet.
                c.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                if let Ok(k) = c.stream.read(&mut buf) {
                    got.extend_from_slice(&buf[..k]);
                }
                c.stream.set_read_timeout(Some(QUIET)).unwrap();
            }
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => got.extend_from_slice(&buf[..k]),
                    Err(_) => break,
                }
            }
            if quiet && *n == name || got.is_empty() {
                continue;
            }
            let text = shown(command, &String::from_utf8_lossy(&got).replace("\r\n", " "));
            log.entry(n.clone()).or_default().push(format!("[{i}] {text}"));
        }
    }
    // Ids as names, so that the servers' numbering does not matter.
    let ids: Vec<(String, String)> = conns.iter().map(|(n, c)| (c.id.clone(), n.clone())).collect();
    for lines in log.values_mut() {
        for line in lines.iter_mut() {
            let names_ids = ["GETREDIR", "redirect", "tracking-redir-broken", "redir="]
                .iter()
                .any(|w| line.contains(w));
            if !names_ids {
                continue;
            }
            for (id, n) in &ids {
                *line = line.replace(&format!(":{id} "), &format!(":{{id:{n}}} "));
                *line = line.replace(&format!("redir={id} "), &format!("redir={{id:{n}}} "));
            }
        }
    }
    log
}

/// What of a reply the comparison looks at: CLIENT LIST and CLIENT INFO
/// lines by their tracking fields (`flags=`, `redir=`), INFO by its
/// `tracking_` lines; anything else whole. GETREDIR replies are marked
/// so that the id they carry is named.
fn shown(command: &str, text: &str) -> String {
    let upper = command.to_ascii_uppercase();
    if upper.contains("CLIENT LIST") || upper.contains("CLIENT INFO") {
        text.split_whitespace()
            .filter(|f| f.starts_with("flags=") || f.starts_with("redir="))
            .collect::<Vec<_>>()
            .join(" ")
            + " "
    } else if upper.starts_with(" INFO") || upper.starts_with("INFO") {
        text.split(' ').filter(|l| l.starts_with("tracking_")).collect::<Vec<_>>().join(" ")
    } else if upper.contains("GETREDIR") {
        format!("GETREDIR {text}")
    } else {
        text.to_string()
    }
}

/// Runs `steps` on both servers and compares what each connection got.
fn both(steps: &[&str]) {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let theirs = record(redis.addr, steps);
    let ours = record(keylock.addr(), steps);
    assert_eq!(ours, theirs, "\nkeylock:      {ours:#?}\nredis-server: {theirs:#?}");
}

#[test]
fn resp3_client_is_invalidated_when_another_client_writes_a_key_it_read() {
    both(&[
        "a!: HELLO 3",
        "a: CLIENT TRACKING on",
        "b: SET k1 1",
        "b: SET k2 1",
        "a: GET k1",
        "a: MGET k2 k3",
        "b: SET k1 2",
        "b: INCR k2",
        "b: SET k3 x",
        "b: SET k1 3",
        "a: GET k1",
        "b: DEL k1 k2",
    ]);
}

#[test]
fn own_write_is_invalidated_after_its_reply_unless_noloop() {
    both(&[
        "a!: HELLO 3",
        "a: CLIENT TRACKING on",
        "a: SET k 1",
        "a: GET k",
        "a: SET k 2",
        "a: GET k",
        "a: CLIENT TRACKING on NOLOOP",
        "a: SET k 3",
        "a: GET k",
        "b: SET k 4",
    ]);
}

#[test]
fn resp2_redirect_sends_messages_on_the_invalidate_channel() {
    both(&[
        "r: SUBSCRIBE __redis__:invalidate",
        "a: CLIENT TRACKING on REDIRECT {id:r}",
        "a: SET a{t} 1",
        "a: SET b{t} 1",
        "a: GET a{t}",
        "a: INCR b{t}",
        "a: INCR a{t}",
        "a: CLIENT GETREDIR",
        "a: CLIENT TRACKINGINFO",
        "a: GET a{t}",
        "b: FLUSHALL",
        "a: CLIENT TRACKING off",
        "a: CLIENT GETREDIR",
    ]);
}

#[test]
fn resp3_redirect_target_gets_invalidate_pushes() {
    both(&[
        "r!: HELLO 3",
        "a: CLIENT TRACKING on REDIRECT {id:r}",
        "a: GET k",
        "b: SET k 1",
        "a: GET k",
        "b: FLUSHDB",
    ]);
}

#[test]
fn redirect_to_a_client_gone_is_reported_as_broken() {
    both(&[
        "a!: HELLO 3",
        "r: PING",
        "a: CLIENT TRACKING on REDIRECT {id:r}",
        "a: GET k",
        "r: QUIT",
        "sleep 50",
        "b: SET k 1",
        "a: CLIENT TRACKINGINFO",
        "a: CLIENT LIST ID {id:a}",
    ]);
}

#[test]
fn bcast_prefixes_collect_keys_and_noloop_skips_own_writes() {
    both(&[
        "a!: HELLO 3",
        "a: CLIENT TRACKING on BCAST PREFIX user: PREFIX obj:",
        "b: SET user:1 x",
        "b: MSET obj:1 a obj:2 b other c",
        "b: SET other2 c",
        "a: SET user:2 y",
        "c!: HELLO 3",
        "c: CLIENT TRACKING on BCAST NOLOOP",
        "c: SET user:3 z",
        "b: SET user:4 z",
        "a: CLIENT TRACKINGINFO",
        "c: CLIENT TRACKINGINFO",
        "b: INFO stats",
    ]);
}

#[test]
fn optin_caches_only_after_caching_yes_and_optout_skips_after_caching_no() {
    both(&[
        "a!: HELLO 3",
        "a: CLIENT TRACKING on OPTIN",
        "a: GET k1",
        "a: CLIENT CACHING yes",
        "a: CLIENT TRACKINGINFO",
        "a: GET k2",
        "a: GET k3",
        "b: MSET k1 1 k2 2 k3 3",
        "a: CLIENT CACHING yes",
        "a: MULTI",
        "a: GET k1",
        "a: GET k3",
        "a: EXEC",
        "b: MSET k1 1 k2 2 k3 3",
        "a: CLIENT TRACKING off",
        "a: CLIENT TRACKING on OPTOUT",
        "a: GET k1",
        "a: CLIENT CACHING no",
        "a: CLIENT TRACKINGINFO",
        "a: GET k2",
        "b: MSET k1 1 k2 2 k3 3",
    ]);
}

#[test]
fn flush_inside_a_transaction_invalidates_after_exec_reply() {
    both(&[
        "a!: HELLO 3",
        "a: CLIENT TRACKING on",
        "a: SET a{t} 1",
        "a: GET a{t}",
        "a: MULTI",
        "a: GET a{t}",
        "a: SET a{t} 2",
        "a: FLUSHDB",
        "a: EXEC",
        "a: PING",
    ]);
}

#[test]
fn expired_keys_are_invalidated() {
    both(&[
        "a!: HELLO 3",
        "a: CLIENT TRACKING on",
        "b: SET k v PX 50",
        "a: GET k",
        "sleep 200",
        "b: GET k",
        "b: SET j v PX 50",
        "a: GET j",
        "sleep 200",
        "a: GET j",
        "a: PING",
    ]);
}

#[test]
fn scripts_track_their_declared_keys_for_the_caller() {
    both(&[
        "a!: HELLO 3",
        "a: CLIENT TRACKING on",
        "a: EVAL return(redis.call('get',KEYS[1])) 2 k1 k2",
        "b: SET k1 1",
        "b: SET k2 1",
        "a: EVAL redis.call('get',KEYS[1]);redis.call('set',KEYS[1],'x');return(1) 1 k3",
        "a: EVAL return(redis.call('set',KEYS[1],'x')) 1 k4",
        "b: SET k4 1",
        "a: EVAL_RO return(redis.call('get',KEYS[1])) 1 k5",
        "b: SET k5 1",
    ]);
}

#[test]
fn tracking_errors_and_states_are_redis_texts() {
    both(&[
        "a: CLIENT TRACKING on PREFIX x",
        "a: CLIENT TRACKING on OPTIN BCAST",
        "a: CLIENT TRACKING on OPTIN OPTOUT",
        "a: CLIENT TRACKING on REDIRECT 999999",
        "a: CLIENT TRACKING on REDIRECT x",
        "a: CLIENT TRACKING on REDIRECT {id:a} REDIRECT {id:a}",
        "a: CLIENT TRACKING maybe",
        "a: CLIENT TRACKING on FOO",
        "a: CLIENT CACHING yes",
        "a: CLIENT TRACKING on OPTIN",
        "a: CLIENT CACHING no",
        "a: CLIENT CACHING maybe",
        "a: CLIENT TRACKING on OPTOUT",
        "a: CLIENT TRACKING on BCAST",
        "a: CLIENT TRACKING off",
        "a: CLIENT TRACKING on BCAST PREFIX a PREFIX ab",
        "a: CLIENT TRACKING on BCAST PREFIX b PREFIX c PREFIX cd",
        "a: CLIENT TRACKING on BCAST PREFIX c",
        "a: CLIENT TRACKINGINFO",
        "a: CLIENT TRACKING on",
        "a: CLIENT LIST ID {id:a}",
        "a: INFO clients",
        "a: RESET",
        "a: CLIENT TRACKINGINFO",
    ]);
}

#[test]
fn info_counts_tracked_keys_items_and_prefixes() {
    both(&[
        "a: CLIENT TRACKING on",
        "b: CLIENT TRACKING on",
        "a: MGET k1 k2 k3",
        "b: GET k1",
        "c: CLIENT TRACKING on BCAST PREFIX p: PREFIX q:",
        "d: INFO stats",
        "d: SET k1 x",
        "d: INFO stats",
        "d: INFO clients",
        "c: QUIT",
        "sleep 50",
        "d: INFO stats",
    ]);
}

#[test]
fn tracking_table_max_keys_evicts_keys_with_invalidations() {
    // Which keys go is random (in Redis too): count them.
    let server = start();
    let mut sub = Raw::connect(server.addr());
    let id = String::from_utf8(sub.call(&["CLIENT", "ID"])).unwrap();
    let id = id.trim_start_matches(':').trim_end();
    sub.call(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut a = Raw::connect(server.addr());
    assert_eq!(a.call(&["CLIENT", "TRACKING", "on", "REDIRECT", id]), b"+OK\r\n");
    a.call(&["MGET", "k1", "k2", "k3"]);
    assert_eq!(a.call(&["CONFIG", "SET", "tracking-table-max-keys", "1"]), b"+OK\r\n");
    assert_eq!(a.call(&["PING"]), b"+PONG\r\n");
    for _ in 0..2 {
        let message = String::from_utf8(sub.reply()).unwrap();
        assert!(
            message.starts_with("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$2\r\nk"),
            "{message:?}"
        );
    }
    let info = String::from_utf8(a.call(&["INFO", "stats"])).unwrap();
    assert!(info.contains("tracking_total_keys:1\r\n"), "{info}");
    sub.send_cmd(&[b"PING"]);
    assert_eq!(sub.reply(), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

#[test]
fn unblocked_client_gets_its_invalidation_after_its_reply() {
    both(&[
        "a: RPUSH list2{t} a",
        "d!: HELLO 3",
        "d: CLIENT TRACKING on",
        "d: LRANGE list2{t} 0 -1",
        "d: BLMOVE list1{t} list2{t} LEFT LEFT 0",
        "sleep 50",
        "a: LPUSH list1{t} foo",
        "d: PING",
    ]);
}

#[test]
fn native_lock_scripts_track_their_keys_for_the_caller_as_lua_does() {
    both(&[
        "a!: HELLO 3",
        "a: CLIENT TRACKING on",
        "a: EVAL @lua:redisson/4.7.0/lock-acquire.lua 1 lock 30000 owner:1",
        "a: EVAL @lua:redisson/4.7.0/lock-acquire.lua 1 lock 30000 owner:1",
        "b: EVAL @lua:redisson/4.7.0/lock-acquire.lua 1 lock 30000 owner:1",
        "a: PING",
        "b: DEL lock",
        "a: PING",
    ]);
}

#[test]
fn writes_invalidate_exactly_the_keys_redis_signals() {
    // One tracking client reads every key before each write, so that each
    // write shows which keys it signalled (and a no-op write none).
    let read = "a: MGET s t u l h z set dst n";
    let writes: &[&str] = &[
        "b: SET s 1",
        "b: SETNX s 2",
        "b: SET s 3 NX",
        "b: SET s 3 XX",
        "b: APPEND t x",
        "b: SETRANGE u 0 \"\"",
        "b: RENAME s u",
        "b: RENAMENX u t",
        "b: COPY t dst",
        "b: COPY t dst",
        "b: MOVE t 1",
        "b: EXPIRE dst 100",
        "b: EXPIRE nosuch 100",
        "b: PERSIST dst",
        "b: PERSIST dst",
        "b: RPUSH l a b c",
        "b: LPOP l 0",
        "b: LREM l 0 zz",
        "b: LTRIM l 0 -1",
        "b: HSET h f v",
        "b: HSET h f v",
        "b: HDEL h nosuch",
        "b: ZADD z 1 m",
        "b: ZADD z 1 m",
        "b: ZINCRBY z 0 m",
        "b: SADD set a",
        "b: SADD set a",
        "b: SREM set nosuch",
        "b: SUNIONSTORE dst set nosuch",
        "b: SINTERSTORE dst nosuch",
        "b: INCR n",
        "b: INCRBYFLOAT n 0",
        "b: SETBIT n 100 0",
        "b: BITFIELD n GET u8 0",
        "b: BITFIELD n SET u8 0 1",
        "b: GETEX n PERSIST",
        "b: GETDEL n",
        "b: DEL s t u l h z set dst n",
        "b: SWAPDB 0 1",
        "b: SELECT 1",
        "b: SET s x",
        "b: SELECT 0",
        "b: FLUSHDB",
    ];
    let mut steps = vec!["a!: HELLO 3", "a!: CLIENT TRACKING on"];
    for w in writes {
        steps.push(read);
        steps.push(w);
    }
    steps.push("a: PING");
    both(&steps);
}

#[test]
fn invalidations_and_keyspace_notifications_keep_redis_order() {
    both(&[
        "x: CONFIG SET notify-keyspace-events KA",
        "a!: HELLO 3",
        "a: CLIENT TRACKING on",
        "a: PSUBSCRIBE __keyspace@0__:*",
        "a: GET k",
        "b: SET k 1",
        "a: GET k",
        "a: SET k 2",
        "a: GET k",
        "b: EXPIRE k 100",
        "a: GET k",
        "a: DEL k",
        "a: PING",
    ]);
}

#[test]
fn a_script_caller_receives_the_invalidations_redirected_to_it_before_its_reply() {
    both(&[
        "r!: HELLO 3",
        "a: CLIENT TRACKING on REDIRECT {id:r}",
        "a: GET k",
        "r: EVAL redis.call('set',KEYS[1],'x');return(1) 1 k",
        "a: GET k",
        "r: SET k y",
    ]);
}

#[test]
fn flush_nulls_are_written_in_the_tracking_clients_protocol() {
    both(&[
        // RESP3 tracking client, RESP2 subscriber; RESP2 client, RESP3 target.
        "r2: SUBSCRIBE __redis__:invalidate",
        "r3!: HELLO 3",
        "a!: HELLO 3",
        "a: CLIENT TRACKING on REDIRECT {id:r2}",
        "b: CLIENT TRACKING on REDIRECT {id:r3}",
        "c: CLIENT TRACKING on",
        "a: GET k",
        "b: GET k",
        "c: GET k",
        "x: SET k 1",
        "x: FLUSHALL",
        "c: PING",
    ]);
}

#[test]
fn read_only_commands_track_the_keys_redis_finds_in_them() {
    let setup = "b: EVAL redis.call('mset','k1','1','k2','2');redis.call('zadd','z1',1,'a');redis.call('zadd','z2',2,'b');redis.call('sadd','s1','a');redis.call('sadd','s2','a');redis.call('hset','h','f','v');redis.call('rpush','l','a');redis.call('xadd','x1','1-1','f','v');redis.call('xadd','x2','1-1','f','v');return(1) 0";
    let reads: &[&str] = &[
        "a: MGET k1 k2 nosuch",
        "a: EXISTS k1 k2",
        "a: TYPE k1",
        "a: TTL k1",
        "a: STRLEN k2",
        "a: GETRANGE k1 0 -1",
        "a: BITCOUNT k1",
        "a: LRANGE l 0 -1",
        "a: LINDEX l 0",
        "a: HGETALL h",
        "a: HGET h f",
        "a: SMEMBERS s1",
        "a: SINTER s1 s2",
        "a: SINTERCARD 2 s1 s2",
        "a: SISMEMBER s1 a",
        "a: ZRANGE z1 0 -1",
        "a: ZUNION 2 z1 z2",
        "a: ZINTER 2 z1 z2 WITHSCORES",
        "a: ZDIFF 2 z1 z2",
        "a: ZINTERCARD 2 z1 z2",
        "a: ZSCORE z1 a",
        "a: OBJECT ENCODING k1",
        "a: TOUCH k1 k2",
        "a: DBSIZE",
        "a: KEYS *",
        "a: SCAN 0 COUNT 1000",
        "a: RANDOMKEY",
        "a: GET k1",
        "a: XREAD COUNT 1 STREAMS x1 x2 0 0",
        "a: XRANGE x1 - +",
        "a: SORT_RO l ALPHA",
        "a: LCS k1 k2",
        "a: PFCOUNT k1 k2",
        "a: GEOSEARCH z1 FROMLONLAT 0 0 BYRADIUS 1 km",
    ];
    let mut steps = vec!["a!: HELLO 3", "a!: CLIENT TRACKING on"];
    for read in reads {
        steps.push(setup);
        steps.push(read);
        steps.push("b: DEL k1 k2 z1 z2 s1 s2 h l x1 x2");
    }
    steps.push("a: PING");
    let steps: Vec<&str> = steps
        .into_iter()
        .filter(|s| !s.contains("KEYS *") && !s.contains("SCAN") && !s.contains("RANDOMKEY"))
        .collect();
    both(&steps);
}

#[test]
fn keylock_reset_invalidates_every_key_as_flushall_does() {
    let server = start();
    let mut a = Raw::connect(server.addr());
    a.call(&["HELLO", "3"]);
    assert_eq!(a.call(&["CLIENT", "TRACKING", "on"]), b"+OK\r\n");
    a.call(&["GET", "k"]);
    let mut b = Raw::connect(server.addr());
    assert_eq!(b.call(&["KEYLOCK", "RESET"]), b"+OK\r\n");
    assert_eq!(a.reply(), b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    let info = String::from_utf8(b.call(&["INFO", "stats"])).unwrap();
    assert!(info.contains("tracking_total_keys:0\r\n"), "{info}");
}

#[test]
fn pushes_during_exec_go_between_its_replies_as_redis_writes_them() {
    both(&[
        "x: CONFIG SET notify-keyspace-events KA",
        "r!: HELLO 3",
        "a: CLIENT TRACKING on REDIRECT {id:r}",
        "a: MGET k j",
        "r: PSUBSCRIBE __keyspace@0__:*",
        "r: MULTI",
        "r: GET k",
        "r: SET k 1",
        "r: SET j 1",
        "r: PING",
        "r: EXEC",
        "r: PING",
    ]);
}
