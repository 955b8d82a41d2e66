//! What a slow log entry holds, compared with redis-server's: the
//! arguments (cut at 32 arguments and 128 bytes as Redis cuts them), the
//! client's address and name, and `?:0` for a script's commands. Ids,
//! times and durations differ between servers and are left out.

mod common;
use common::*;

/// The entries of SLOWLOG GET -1 without their id, time and duration.
fn entries(c: &mut redis::Connection) -> Vec<(Vec<String>, String, String)> {
    let raw: Vec<(i64, i64, i64, Vec<String>, String, String)> = q(c, &["SLOWLOG", "GET", "-1"]);
    raw.into_iter().map(|(_, _, _, args, peer, name)| (args, peer, name)).collect()
}

fn run(c: &mut redis::Connection) -> Vec<(Vec<String>, String, String)> {
    let addr: String = q(c, &["CLIENT", "INFO"]);
    let own = addr.split(' ').find_map(|f| f.strip_prefix("addr=")).unwrap().to_string();
    q::<()>(c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    q::<()>(c, &["CLIENT", "SETNAME", "slow-one"]);
    q::<()>(c, &["SLOWLOG", "RESET"]);
    let long = "x".repeat(200);
    q::<()>(c, &["SET", "k", &long]);
    let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let mut mset = vec!["DEL".to_string()];
    mset.extend(many);
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    q::<()>(c, &mset);
    q::<()>(c, &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"]);
    let mut found = entries(c);
    q::<()>(c, &["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    for (_, peer, _) in &mut found {
        if *peer == own {
            *peer = "<this client>".into();
        }
    }
    found
}

#[test]
fn slow_log_entries_hold_what_redis_entries_hold() {
    let Some(redis) = real_redis() else { return };
    let s = start();
    let ours = run(&mut conn(&s));
    let mut theirs_conn = redis::Client::open(format!("redis://{}", redis.addr))
        .and_then(|c| c.get_connection())
        .expect("connect to redis-server");
    let theirs = run(&mut theirs_conn);
    assert_eq!(ours, theirs);
    assert!(ours.iter().any(|(_, peer, _)| peer == "?:0"), "{ours:?}");
}

/// A blocked command is logged when its wait ends, not when it blocked,
/// as Redis's `updateStatsOnUnblock` logs it.
fn blocked_commands_log(addr: std::net::SocketAddr) -> Vec<Vec<String>> {
    let mut c = redis::Client::open(format!("redis://{addr}")).unwrap().get_connection().unwrap();
    let mut waiter = redis::Client::open(format!("redis://{addr}")).unwrap().get_connection().unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
    let waiter_thread = std::thread::spawn(move || {
        let _: Option<Vec<String>> = redis::cmd("BLPOP").arg("l").arg(0).query(&mut waiter).unwrap();
        let _: Option<Vec<String>> = redis::cmd("BLPOP").arg("l2").arg("0.05").query(&mut waiter).unwrap();
    });
    let blocked = || -> String {
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query(&mut redis::Client::open(format!("redis://{addr}")).unwrap().get_connection().unwrap())
            .unwrap();
        info.lines().find_map(|l| l.strip_prefix("blocked_clients:")).unwrap().to_string()
    };
    while blocked() != "1" {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    let _: () = redis::cmd("LPUSH").arg("l").arg("foo").query(&mut c).unwrap();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
    let _: redis::Value = redis::cmd("EXEC").query(&mut c).unwrap();
    waiter_thread.join().unwrap();
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").query(&mut c).unwrap();
    entries
        .iter()
        .map(|e| match e {
            redis::Value::Array(fields) => match &fields[3] {
                redis::Value::Array(args) => args.iter().map(|a| redis::from_redis_value::<String>(a.clone()).unwrap()).collect(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn blocked_commands_are_logged_when_their_wait_ends_as_redis_does() {
    let keylock = start();
    let ours = blocked_commands_log(keylock.addr());
    // Served: logged; timed out: not.
    assert_eq!(ours[0], ["BLPOP", "l", "0"]);
    assert_eq!(ours[1], ["SLOWLOG", "RESET"]);
    if let Some(redis) = real_redis() {
        assert_eq!(blocked_commands_log(redis.addr), ours);
    }
}
