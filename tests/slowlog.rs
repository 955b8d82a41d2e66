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
