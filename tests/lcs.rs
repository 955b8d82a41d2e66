//! LCS over TCP where the text corpus cannot reach: random binary strings
//! (NULs and high bytes included) with random options, sent to keylock and
//! to a real redis-server, which must give the same raw replies; and the
//! two key lookups counted as reads, as Redis counts them.
//!
//! `KEYLOCK_LCS_CASES` sets the number of random cases (default
//! [`CASES`]). Without redis-server on PATH the differential test skips
//! with a message, unless KEYLOCK_REQUIRE_REDIS=1 makes that a failure.

mod common;
use common::*;

const CASES: usize = 200;

/// A random string over a small alphabet of arbitrary bytes, so that
/// matches are frequent and ties many.
fn random_string(rng: &mut fastrand::Rng, alphabet: &[u8]) -> Vec<u8> {
    let len = rng.usize(0..120);
    (0..len).map(|_| alphabet[rng.usize(0..alphabet.len())]).collect()
}

/// Random LCS options, valid or not, in random order.
fn random_options(rng: &mut fastrand::Rng) -> Vec<Vec<u8>> {
    let mut options = Vec::new();
    for _ in 0..rng.usize(0..4) {
        let option: &[&[u8]] = match rng.u8(0..8) {
            0 => &[b"LEN"],
            1 | 2 => &[b"IDX"],
            3 | 4 => &[b"WITHMATCHLEN"],
            5 => &[b"MINMATCHLEN", b"2"],
            6 => &[b"minmatchlen", b"-1"],
            _ => &[b"MINMATCHLEN\0x", b"3"],
        };
        options.extend(option.iter().map(|o| o.to_vec()));
    }
    options
}

#[test]
fn random_binary_strings_give_redis_replies() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let mut ours = Raw::connect(keylock.addr());
    let mut theirs = Raw::connect(redis.addr);
    let cases = std::env::var("KEYLOCK_LCS_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES);
    let mut rng = fastrand::Rng::with_seed(0x004c_4353);
    for _ in 0..cases {
        let alphabet: Vec<u8> = (0..rng.usize(1..5)).map(|_| rng.u8(..)).collect();
        let (a, b) = (random_string(&mut rng, &alphabet), random_string(&mut rng, &alphabet));
        let options = random_options(&mut rng);
        let mut lcs: Vec<&[u8]> = vec![b"LCS", b"a", b"b"];
        lcs.extend(options.iter().map(Vec::as_slice));
        for c in [&mut ours, &mut theirs] {
            c.send_cmd(&[b"SET", b"a", &a]);
            c.reply();
            c.send_cmd(&[b"SET", b"b", &b]);
            c.reply();
        }
        for version in ["2", "3"] {
            ours.call(&["HELLO", version]);
            theirs.call(&["HELLO", version]);
            ours.send_cmd(&lcs);
            theirs.send_cmd(&lcs);
            let (got, want) = (ours.reply(), theirs.reply());
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "LCS of {a:?} and {b:?} with {options:?} (RESP{version})"
            );
        }
    }
}

/// `keyspace_hits` and `keyspace_misses` from INFO stats.
fn hits_and_misses(c: &mut redis::Connection) -> (u64, u64) {
    let info: String = q(c, &["INFO", "stats"]);
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    (field("keyspace_hits:"), field("keyspace_misses:"))
}

#[test]
fn lcs_counts_both_keys_as_reads() {
    let s = start();
    let mut c = conn(&s);
    let _: () = q(&mut c, &["SET", "a", "ohmytext"]);
    let before = hits_and_misses(&mut c);
    let _: String = q(&mut c, &["LCS", "a", "missing"]);
    let _: i64 = q(&mut c, &["LCS", "a", "a", "LEN"]);
    let after = hits_and_misses(&mut c);
    assert_eq!((after.0 - before.0, after.1 - before.1), (3, 1));
}

#[test]
fn lcs_looks_both_keys_up_before_reading_its_options() {
    let s = start();
    let mut c = conn(&s);
    let _: () = q(&mut c, &["SET", "a", "x"]);
    let _: () = q(&mut c, &["RPUSH", "l", "x"]);
    assert_eq!(
        q_err(&mut c, &["LCS", "a", "l", "NOSUCH"]),
        "ERR The specified keys must contain string values"
    );
    assert_eq!(q_err(&mut c, &["LCS", "a", "a", "NOSUCH"]), "ERR syntax error");
}
