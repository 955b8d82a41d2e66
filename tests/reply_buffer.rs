//! Clients' reply buffers as Redis 7.0 sizes them (CLIENT LIST's `rbs`
//! and `rbp`, DEBUG REPLYBUFFER, INFO's `reply_buffer_shrinks` and
//! `reply_buffer_expands`), against redis-server 7.0.15: an idle client's
//! buffer shrinks to 1 KB, a client whose replies fill it doubles it back
//! to 16 KB step by step, RESIZING 0 stops both. And what a large reply
//! took goes back once it is written: a client whose buffer is small keeps
//! no more memory after it than before.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Raw, info_value, real_redis_with, text};

/// `rbs` and `rbp` of the client named `name`, as `admin` sees them.
fn reply_buffer_of(admin: &mut Raw, name: &str) -> (usize, usize) {
    let list = text(admin.call(&["CLIENT", "LIST"]));
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_else(|| panic!("no client {name} in {list}"));
    let field = |f: &str| -> usize {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
            .unwrap_or_else(|| panic!("no {f} in {line}"))
            .parse()
            .unwrap()
    };
    (field("rbs"), field("rbp"))
}

/// Polls `rbs` of `name` (running `between` before each look) until it is
/// `want` (or less, with `or_less`), recording every size seen on the
/// way; gives up after 10 s.
fn sizes_until(admin: &mut Raw, name: &str, want: usize, or_less: bool, mut between: impl FnMut()) -> Vec<usize> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        between();
        let (rbs, _) = reply_buffer_of(admin, name);
        if seen.last() != Some(&rbs) {
            seen.push(rbs);
        }
        if rbs == want || (or_less && rbs < want) || Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn scenario(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut admin = Raw::connect(addr);
    let mut tc = Raw::connect(addr);
    out.push(admin.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"]));
    out.push(tc.call(&["CLIENT", "SETNAME", "tc"]));
    // A new client's buffer is 16 KB; idle, it shrinks to its peak (a few
    // bytes), which is less than the least size: 1 KB.
    let idle = sizes_until(&mut admin, "tc", 1024, false, || {});
    out.push(format!("idle: {:?}", &idle[idle.len() - 1..]).into_bytes());
    out.push(admin.call(&["SET", "bigval", &"x".repeat(32768)]));
    out.push(admin.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "never"]));
    // Replies that fill it double it, one step per cron visit, up to 16 KB
    // (a loaded machine may let two visits pass between two looks).
    let busy = sizes_until(&mut admin, "tc", 16384, false, || {
        tc.call(&["GET", "bigval"]);
    });
    let steps = [1024, 2048, 4096, 8192, 16384];
    let in_order = busy.last() == Some(&16384) && busy.windows(2).all(|w| w[0] < w[1]) && busy.iter().all(|s| steps.contains(s));
    // The peak kept from before the last doubling may be 8192 until the
    // next reply fills the new size.
    tc.call(&["GET", "bigval"]);
    out.push(
        format!(
            "busy: doubled step by step {in_order}, peak {}",
            reply_buffer_of(&mut admin, "tc").1
        )
        .into_bytes(),
    );
    // With resizing off, an idle client's buffer stays as it is.
    out.push(admin.call(&["DEBUG", "REPLYBUFFER", "RESIZING", "0"]));
    out.push(admin.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"]));
    std::thread::sleep(Duration::from_millis(1500));
    out.push(format!("resizing off: {:?}", reply_buffer_of(&mut admin, "tc").0).into_bytes());
    out.push(admin.call(&["DEBUG", "REPLYBUFFER", "RESIZING", "1"]));
    let shrunk = sizes_until(&mut admin, "tc", 1024, false, || {});
    out.push(format!("resizing on: {:?}", &shrunk[shrunk.len() - 1..]).into_bytes());
    // The four doublings are counted; shrinks, of every client, at least
    // the two of tc.
    let mut fresh = Raw::connect(addr);
    out.push(format!("expands {}", info_value(&mut fresh, "stats", "reply_buffer_expands")).into_bytes());
    let shrinks: u64 = info_value(&mut fresh, "stats", "reply_buffer_shrinks").parse().unwrap();
    out.push(format!("shrinks >= 2: {}", shrinks >= 2).into_bytes());
    out.push(admin.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"]));
    out
}

#[test]
fn reply_buffers_shrink_when_idle_and_grow_when_filled_as_redis_s_do() {
    let Some(redis) = real_redis_with(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let keylock = common::start_with(|c| c.directives.push(("enable-debug-command".into(), vec!["yes".into()])));
    let show = |r: Vec<Vec<u8>>| r.into_iter().map(text).collect::<Vec<_>>();
    let theirs = show(scenario(redis.addr));
    let ours = show(scenario(keylock.addr()));
    assert_eq!(ours, theirs, "keylock (left) and redis-server (right) differ");
    assert!(ours.iter().any(|l| l == "busy: doubled step by step true, peak 16384"), "{ours:?}");
}

/// The memory a 60 KB reply took, on a client whose reply buffer shrank
/// below 2 KB, is given back once the reply is written (on redis-server too:
/// it lived in the reply list).
fn large_reply_leaves_nothing(addr: SocketAddr) {
    let mut c = Raw::connect(addr);
    c.call(&["CLIENT", "SETNAME", "reader"]);
    c.call(&["SET", "big", &"y".repeat(60_000)]);
    // A command's first run allocates its latency histogram.
    c.call(&["GET", "small"]);
    c.call(&["INFO", "memory"]);
    c.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"]);
    let mut admin = Raw::connect(addr);
    // Shrunk below 2 KB (to 1 KB, or to INFO's reply if the peak still
    // held it: a buffer smaller than 2 KB is not halved again).
    let sizes = sizes_until(&mut admin, "reader", 2048, true, || {});
    assert!(sizes.last().is_some_and(|&s| s < 2048), "{addr}: {sizes:?}");
    let used = |c: &mut Raw| info_value(c, "memory", "used_memory").parse::<i64>().unwrap();
    let before = used(&mut c);
    assert_eq!(c.call(&["GET", "big"]).len(), 60_000 + 10);
    let after = used(&mut c);
    c.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"]);
    assert!(after - before < 16 * 1024, "{addr}: used_memory went from {before} to {after}");
}

#[test]
fn a_large_reply_s_memory_goes_back_once_written() {
    // A process of its own: used_memory counts its allocations alone.
    let keylock = common::Binary::start(&["--enable-debug-command", "yes"]);
    large_reply_leaves_nothing(keylock.addr);
    if let Some(redis) = real_redis_with(&["--enable-debug-command", "yes"]) {
        large_reply_leaves_nothing(redis.addr);
    }
}
