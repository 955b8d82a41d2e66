//! Blocking pops (BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP) and CLIENT UNBLOCK over TCP. Every scenario runs
//! against keylock and against a real redis-server, and the bytes each
//! connection receives must be the same.

mod common;
use common::*;

use std::io::Read;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Long enough for a blocking command sent on one connection to be parked
/// before another connection acts, on a loaded machine.
const SETTLE: Duration = Duration::from_millis(100);

fn connect(addr: SocketAddr) -> Raw {
    Raw::connect(addr)
}

/// Runs `scenario` against keylock and redis-server and compares what it
/// recorded; returns keylock's record (None without redis-server).
fn same_on_both_servers(scenario: fn(SocketAddr) -> Vec<Vec<u8>>) -> Option<Vec<Vec<u8>>> {
    let redis = real_redis()?;
    let keylock = start();
    let theirs = scenario(redis.addr);
    let ours = scenario(keylock.addr());
    let show = |r: &Vec<Vec<u8>>| r.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>();
    assert_eq!(show(&ours), show(&theirs), "keylock (left) and redis-server (right) differ");
    Some(ours)
}

#[test]
fn a_push_serves_the_blocked_clients_in_the_order_they_blocked() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut b, mut pusher) = (connect(addr), connect(addr), connect(addr));
        send_args(&mut a, &["BLPOP", "missing", "q", "0"]);
        std::thread::sleep(SETTLE);
        send_args(&mut b, &["BLPOP", "q", "0"]);
        std::thread::sleep(SETTLE);
        assert!(silent_for(&mut a, SETTLE), "a blocked client answers nothing");
        out.push(
            pusher
                .call(&["INFO", "clients"])
                .split(|&c| c == b'\n')
                .filter(|l| l.starts_with(b"blocked_clients"))
                .flatten()
                .copied()
                .collect(),
        );
        out.push(pusher.call(&["RPUSH", "q", "first", "second", "third"]));
        out.push(a.reply());
        out.push(b.reply());
        out.push(pusher.call(&["LRANGE", "q", "0", "-1"]));
        out.push(
            pusher
                .call(&["INFO", "clients"])
                .split(|&c| c == b'\n')
                .filter(|l| l.starts_with(b"blocked_clients"))
                .flatten()
                .copied()
                .collect(),
        );
        out
    });
}

#[test]
fn what_a_blocked_client_sent_after_the_blocking_command_runs_once_it_is_served() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut pusher) = (connect(addr), connect(addr));
        let mut pipeline = encode(&[b"BRPOP", b"q", b"0"]);
        pipeline.extend(encode(&[b"PING"]));
        pipeline.extend(encode(&[b"LLEN", b"q"]));
        a.send(&pipeline);
        std::thread::sleep(SETTLE);
        assert!(silent_for(&mut a, SETTLE));
        out.push(pusher.call(&["LPUSH", "q", "x", "y"]));
        out.push(a.reply());
        out.push(a.reply());
        out.push(a.reply());
        out
    });
}

#[test]
fn timeouts_answer_a_null_array_in_both_protocols_even_for_blmove() {
    let record = same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let mut a = connect(addr);
        for cmd in [
            &["BLPOP", "q", "0.05"][..],
            &["BRPOP", "q", "r", "0.05"],
            &["BLMOVE", "q", "d", "LEFT", "RIGHT", "0.05"],
            &["BRPOPLPUSH", "q", "d", "0.05"],
            &["BLMPOP", "0.05", "2", "q", "r", "LEFT", "COUNT", "3"],
            &["BZPOPMIN", "z", "0.05"],
            &["BZMPOP", "0.05", "1", "z", "MAX"],
        ] {
            let started = Instant::now();
            out.push(a.call(cmd));
            assert!(started.elapsed() >= Duration::from_millis(50), "{cmd:?} waited its timeout");
        }
        a.call(&["HELLO", "3"]);
        out.push(a.call(&["BLPOP", "q", "0.05"]));
        out.push(a.call(&["BLMOVE", "q", "d", "LEFT", "RIGHT", "0.05"]));
        out
    });
    if let Some(record) = record {
        assert_eq!(record[0], b"*-1\r\n");
        assert_eq!(record[2], b"*-1\r\n", "Redis answers a timed-out BLMOVE with a null array");
    }
}

#[test]
fn blmove_chains_serve_the_next_waiter_and_a_wrong_destination_fails_the_waiter() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut mover, mut taker, mut pusher) = (connect(addr), connect(addr), connect(addr));
        send_args(&mut mover, &["BLMOVE", "src", "mid", "RIGHT", "LEFT", "0"]);
        std::thread::sleep(SETTLE);
        send_args(&mut taker, &["BRPOP", "mid", "0"]);
        std::thread::sleep(SETTLE);
        out.push(pusher.call(&["LPUSH", "src", "a", "b"]));
        out.push(mover.reply());
        out.push(taker.reply());
        out.push(pusher.call(&["LRANGE", "src", "0", "-1"]));
        out.push(pusher.call(&["EXISTS", "mid"]));
        // The destination holds a string: the waiter gets WRONGTYPE and
        // nothing moves.
        out.push(pusher.call(&["SET", "dst", "string"]));
        send_args(&mut mover, &["BRPOPLPUSH", "src2", "dst", "0"]);
        std::thread::sleep(SETTLE);
        out.push(pusher.call(&["RPUSH", "src2", "v"]));
        out.push(mover.reply());
        out.push(pusher.call(&["LRANGE", "src2", "0", "-1"]));
        out.push(pusher.call(&["INFO", "errorstats"]));
        out
    });
}

#[test]
fn sorted_set_waiters_are_served_by_zadd_with_key_member_and_score() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut b, mut c, mut pusher) = (connect(addr), connect(addr), connect(addr), connect(addr));
        send_args(&mut a, &["BZPOPMIN", "z1", "z2", "0"]);
        std::thread::sleep(SETTLE);
        send_args(&mut b, &["BZPOPMAX", "z2", "0"]);
        std::thread::sleep(SETTLE);
        out.push(pusher.call(&["ZADD", "z2", "1", "one", "2.5", "two", "3", "three"]));
        out.push(a.reply());
        out.push(b.reply());
        out.push(b.call(&["PING"]));
        c.call(&["HELLO", "3"]);
        send_args(&mut c, &["BZMPOP", "0", "2", "z3", "z2", "MIN", "COUNT", "5"]);
        std::thread::sleep(SETTLE);
        out.push(c.reply());
        out.push(pusher.call(&["EXISTS", "z2"]));
        out
    });
}

#[test]
fn blmpop_takes_up_to_its_count_and_a_list_created_in_a_transaction_or_script_serves_after_it() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut b, mut pusher) = (connect(addr), connect(addr), connect(addr));
        send_args(&mut a, &["BLMPOP", "0", "2", "l1", "l2", "RIGHT", "COUNT", "2"]);
        std::thread::sleep(SETTLE);
        out.push(pusher.call(&["MULTI"]));
        out.push(pusher.call(&["RPUSH", "l2", "a", "b", "c"]));
        out.push(pusher.call(&["LPOP", "l2"]));
        out.push(pusher.call(&["EXEC"]));
        out.push(a.reply());
        send_args(&mut b, &["BLPOP", "l3", "0"]);
        std::thread::sleep(SETTLE);
        out.push(pusher.call(&[
            "EVAL",
            "redis.call('rpush', KEYS[1], 'x', 'y') return redis.call('llen', KEYS[1])",
            "1",
            "l3",
        ]));
        out.push(b.reply());
        out.push(pusher.call(&["LRANGE", "l3", "0", "-1"]));
        out
    });
}

#[test]
fn nothing_blocks_in_a_transaction_or_a_script() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let mut a = connect(addr);
        out.push(a.call(&["MULTI"]));
        out.push(a.call(&["BLPOP", "q", "0"]));
        out.push(a.call(&["BLMOVE", "q", "d", "LEFT", "LEFT", "0"]));
        out.push(a.call(&["BZPOPMIN", "z", "0"]));
        out.push(a.call(&["EXEC"]));
        out.push(a.call(&["EVAL", "return redis.call('blmpop', 0, 1, 'q', 'LEFT')", "0"]));
        out.push(a.call(&["EVAL", "return redis.call('bzmpop', 0, 1, 'z', 'MIN')", "0"]));
        out.push(a.call(&["EVAL", "return redis.call('blpop', 'q', 0)", "0"]));
        out
    });
}

#[test]
fn a_key_created_as_another_type_does_not_wake_a_list_waiter() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut pusher) = (connect(addr), connect(addr));
        send_args(&mut a, &["BLPOP", "k", "0"]);
        std::thread::sleep(SETTLE);
        out.push(pusher.call(&["SET", "k", "string"]));
        out.push(pusher.call(&["ZADD", "k2", "1", "m"]));
        assert!(silent_for(&mut a, SETTLE), "a string at the key serves nobody");
        out.push(pusher.call(&["DEL", "k"]));
        out.push(pusher.call(&["RPUSH", "k", "v"]));
        out.push(a.reply());
        out
    });
}

#[test]
fn swapdb_brings_a_waited_list_in() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut other) = (connect(addr), connect(addr));
        send_args(&mut a, &["BLPOP", "k", "0"]);
        std::thread::sleep(SETTLE);
        out.push(other.call(&["SELECT", "1"]));
        out.push(other.call(&["RPUSH", "k", "from-db-1"]));
        out.push(other.call(&["SWAPDB", "0", "1"]));
        out.push(a.reply());
        out.push(other.call(&["LLEN", "k"]));
        out
    });
}

#[test]
fn client_unblock_ends_a_wait_as_its_timeout_or_with_an_error() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut admin) = (connect(addr), connect(addr));
        let id = String::from_utf8(a.call(&["CLIENT", "ID"])).unwrap();
        let id = id.trim_start_matches(':').trim_end().to_string();
        send_args(&mut a, &["BLPOP", "q", "0"]);
        std::thread::sleep(SETTLE);
        let list = String::from_utf8(admin.call(&["CLIENT", "LIST", "ID", &id])).unwrap();
        out.push(
            list.split(' ')
                .filter(|f| f.starts_with("flags=") || f.starts_with("cmd="))
                .collect::<Vec<_>>()
                .join(" ")
                .into_bytes(),
        );
        out.push(admin.call(&["CLIENT", "UNBLOCK", &id]));
        out.push(a.reply());
        out.push(admin.call(&["CLIENT", "UNBLOCK", &id]));
        send_args(&mut a, &["BZPOPMAX", "z", "0"]);
        std::thread::sleep(SETTLE);
        out.push(admin.call(&["CLIENT", "UNBLOCK", &id, "ERROR"]));
        out.push(a.reply());
        out.push(admin.call(&["CLIENT", "UNBLOCK", &id, "sometime"]));
        out.push(admin.call(&["CLIENT", "UNBLOCK", "nan"]));
        let stats = String::from_utf8(admin.call(&["INFO", "commandstats"])).unwrap();
        // Redis lists commandstats in its dict's order: compare sorted.
        let mut lines: Vec<&str> = stats
            .lines()
            .filter(|l| l.starts_with("cmdstat_blpop") || l.starts_with("cmdstat_bzpopmax"))
            .collect();
        lines.sort_unstable();
        for line in lines {
            let fields: Vec<&str> = line.split(',').filter(|f| !f.starts_with("usec")).collect();
            out.push(fields.join(",").into_bytes());
        }
        out.push(admin.call(&["INFO", "errorstats"]));
        out
    });
}

#[test]
fn a_blocked_client_that_leaves_takes_nothing() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut pusher) = (connect(addr), connect(addr));
        send_args(&mut a, &["BLPOP", "q", "0"]);
        std::thread::sleep(SETTLE);
        drop(a);
        std::thread::sleep(SETTLE);
        out.push(pusher.call(&["RPUSH", "q", "kept"]));
        out.push(pusher.call(&["LRANGE", "q", "0", "-1"]));
        out
    });
}

#[test]
fn bad_arguments_are_refused_as_redis_refuses_them() {
    same_on_both_servers(|addr| {
        let mut a = connect(addr);
        let mut out = Vec::new();
        a.call(&["SET", "str", "v"]);
        a.call(&["RPUSH", "list", "v"]);
        for cmd in [
            &["BLPOP", "q", "abc"][..],
            &["BLPOP", "q", "-1"],
            &["BLPOP", "q", "inf"],
            &["BLPOP", "q", "1e17"],
            &["BLPOP", "q", ""],
            &["BLPOP", "q"],
            &["BLPOP", "str", "0"],
            &["BRPOP", "q", "str", "0"],
            &["BLMOVE", "q", "d", "UP", "LEFT", "0"],
            &["BLMOVE", "q", "d", "LEFT", "LEFT", "x"],
            &["BLMOVE", "str", "d", "LEFT", "LEFT", "0"],
            &["BLMOVE", "list", "str", "LEFT", "LEFT", "0"],
            &["BRPOPLPUSH", "q", "d"],
            &["BLMPOP", "0", "0", "q", "LEFT"],
            &["BLMPOP", "0", "2", "q", "LEFT"],
            &["BLMPOP", "0", "1", "q", "UP"],
            &["BLMPOP", "0", "1", "q", "LEFT", "COUNT", "0"],
            &["BLMPOP", "0", "1", "q", "LEFT", "COUNT"],
            &["BLMPOP", "x", "1", "q", "LEFT"],
            &["BLMPOP", "0", "1", "str", "LEFT"],
            &["BZPOPMIN", "str", "0"],
            &["BZMPOP", "0", "1", "z", "LOW"],
            &["BZMPOP", "-1", "1", "z", "MIN"],
            &["CLIENT", "UNBLOCK"],
        ] {
            out.push(a.call(cmd));
        }
        // Data present: the blocking commands pop at once.
        a.call(&["RPUSH", "l", "1", "2", "3"]);
        a.call(&["ZADD", "z", "1", "a", "2", "b"]);
        out.push(a.call(&["BLPOP", "missing", "l", "0"]));
        out.push(a.call(&["BRPOP", "l", "0"]));
        out.push(a.call(&["BLMPOP", "0", "1", "l", "LEFT", "COUNT", "10"]));
        out.push(a.call(&["BZPOPMAX", "z", "0"]));
        out.push(a.call(&["BZMPOP", "0", "1", "z", "MIN", "COUNT", "10"]));
        out.push(a.call(&["EXISTS", "l", "z"]));
        let mut rest = Vec::new();
        a.reader.get_mut().set_nonblocking(true).unwrap();
        let _ = a.reader.get_mut().read_to_end(&mut rest);
        out.push(rest);
        out
    });
}

#[test]
fn blocked_clients_show_in_info_and_client_list() {
    let s = start();
    let mut a = connect(s.addr());
    let mut admin = conn(&s);
    send_args(&mut a, &["BLPOP", "q", "10"]);
    std::thread::sleep(SETTLE);
    let info: String = q(&mut admin, &["INFO", "clients"]);
    assert!(info.contains("blocked_clients:1\r\n"), "{info}");
    assert!(info.contains("clients_in_timeout_table:1\r\n"), "{info}");
    let list: String = q(&mut admin, &["CLIENT", "LIST"]);
    assert!(list.lines().any(|l| l.contains("flags=b ") && l.contains("cmd=blpop")), "{list}");
    q::<i64>(&mut admin, &["RPUSH", "q", "v"]);
    assert_eq!(a.reply(), b"*2\r\n$1\r\nq\r\n$1\r\nv\r\n");
    let info: String = q(&mut admin, &["INFO", "clients"]);
    assert!(info.contains("blocked_clients:0\r\n"), "{info}");
}

#[test]
fn client_kill_of_a_blocked_client_removes_its_wait() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut a, mut admin) = (connect(addr), connect(addr));
        let id = String::from_utf8(a.call(&["CLIENT", "ID"])).unwrap();
        let id = id.trim_start_matches(':').trim_end().to_string();
        send_args(&mut a, &["BLPOP", "q", "0"]);
        std::thread::sleep(SETTLE);
        out.push(admin.call(&["CLIENT", "KILL", "ID", &id]));
        assert!(a.is_closed(), "the killed client's connection closes");
        std::thread::sleep(SETTLE);
        let info = String::from_utf8(admin.call(&["INFO", "clients"])).unwrap();
        out.push(
            info.lines()
                .filter(|l| l.starts_with("blocked_clients"))
                .collect::<String>()
                .into_bytes(),
        );
        out.push(admin.call(&["RPUSH", "q", "kept"]));
        out.push(admin.call(&["LLEN", "q"]));
        out
    });
}

/// Raises this process's open-file limit (the binary inherits it; never
/// lowered, as tests run side by side); how many connections both sides
/// can afford, at most `want`.
fn affordable_connections(want: usize) -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(want as u64 + 256).max(limit.rlim_cur);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    want.min((limit.rlim_cur as usize).saturating_sub(256))
}

/// CPU time (user + system) the process has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn a_thousand_clients_blocked_forever_cost_the_server_no_cpu() {
    let n = affordable_connections(1000);
    assert!(n >= 500, "too few file descriptors for this test ({n})");
    let server = Binary::start(&[]);
    // What the server costs with no one waiting (its cron), to compare.
    let idle_started = cpu_ticks(server.pid());
    std::thread::sleep(Duration::from_secs(5));
    let idle = cpu_ticks(server.pid()) - idle_started;
    let mut waiters = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = connect(server.addr);
        send_args(&mut c, &["BLPOP", &format!("q{i}"), "0"]);
        waiters.push(c);
    }
    let mut admin = connect(server.addr);
    wait_until(30, "every client blocked", || {
        let info = String::from_utf8(admin.call(&["INFO", "clients"])).unwrap();
        info.contains(&format!("blocked_clients:{n}\r\n"))
    });
    let before = cpu_ticks(server.pid());
    std::thread::sleep(Duration::from_secs(5));
    let used = cpu_ticks(server.pid()) - before;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    // Under 1% of a core more than the idle server over 5 s: 0.05 s of
    // CPU. (The idle server's own cron is most of an absolute budget in
    // a debug build.)
    let extra = used.saturating_sub(idle);
    assert!(
        extra * 20 < per_second,
        "{n} blocked clients cost {used} ticks in 5 s, the idle server {idle} ({per_second}/s)"
    );
    // And they are all still waiting, in order.
    assert_eq!(admin.call(&["RPUSH", "q7", "v"]), b":1\r\n");
    assert_eq!(waiters[7].reply(), b"*2\r\n$2\r\nq7\r\n$1\r\nv\r\n");
}

#[test]
fn a_push_made_by_serving_brpoplpush_touches_watchers_of_its_destination() {
    same_on_both_servers(|addr| {
        let mut out = Vec::new();
        let (mut blocked, mut watcher, mut pusher) = (connect(addr), connect(addr), connect(addr));
        out.push(pusher.call(&["SET", "somekey", "somevalue"]));
        send_args(&mut blocked, &["BRPOPLPUSH", "src", "dst", "0"]);
        std::thread::sleep(SETTLE);
        out.push(watcher.call(&["WATCH", "dst"]));
        out.push(watcher.call(&["MULTI"]));
        out.push(watcher.call(&["GET", "somekey"]));
        out.push(pusher.call(&["LPUSH", "src", "element"]));
        out.push(watcher.call(&["EXEC"]));
        out.push(blocked.reply());
        out
    });
}
