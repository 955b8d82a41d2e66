//! Bitmap commands over TCP: a few behaviours spelled out; arguments
//! holding a NUL (which the text corpus cannot write) compared with
//! redis-server, which reads keywords and field types as C strings; and a
//! differential property test that sends random sequences of SETBIT,
//! GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO (with bad
//! arguments, extreme numbers and every field width mixed in) to keylock
//! and to a real redis-server, and requires the same raw replies.
//!
//! Written offsets stay small so no case allocates much: the limits are
//! reached with offsets that are refused, or with reads, which allocate
//! nothing. `KEYLOCK_BITMAP_CASES` sets the number of random cases
//! (default [`CASES`]). Without redis-server on PATH the differential
//! test skips with a message, unless KEYLOCK_REQUIRE_REDIS=1 makes that a
//! failure.

mod common;
use common::*;

use proptest::prelude::*;

const CASES: u32 = 300;

#[test]
fn setbit_past_the_end_grows_the_string_with_zeros() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "k", "a"]);
    assert_eq!(c.call(&["SETBIT", "k", "31", "1"]), b":0\r\n");
    assert_eq!(c.call(&["GET", "k"]), b"$4\r\na\x00\x00\x01\r\n");
}

#[test]
fn bitpos_for_a_clear_bit_in_all_ones_depends_on_an_end() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["BITFIELD", "k", "SET", "u8", "0", "255", "SET", "u8", "8", "255"]);
    assert_eq!(c.call(&["BITPOS", "k", "0"]), b":16\r\n");
    assert_eq!(c.call(&["BITPOS", "k", "0", "1"]), b":16\r\n");
    assert_eq!(c.call(&["BITPOS", "k", "0", "0", "-1"]), b":-1\r\n");
}

#[test]
fn bitop_with_an_empty_result_deletes_the_destination() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SET", "dest", "v"]);
    assert_eq!(c.call(&["BITOP", "OR", "dest", "nokey"]), b":0\r\n");
    assert_eq!(c.call(&["EXISTS", "dest"]), b":0\r\n");
}

#[test]
fn bitfield_overflow_fail_answers_nil_and_writes_nothing() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(
        c.call(&[
            "BITFIELD", "k", "SET", "u8", "0", "250", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "10", "GET", "u8", "0"
        ]),
        b"*3\r\n:0\r\n$-1\r\n:250\r\n"
    );
}

#[test]
fn bitfield_ro_refuses_writes_after_parsing_everything() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(
        c.call(&["BITFIELD_RO", "k", "SET", "u8", "0", "1"]),
        b"-ERR BITFIELD_RO only supports the GET subcommand\r\n"
    );
    assert_eq!(
        c.call(&["BITFIELD_RO", "k", "SET", "u64", "0", "1"]),
        b"-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n"
    );
    assert_eq!(c.call(&["EXISTS", "k"]), b":0\r\n");
}

#[test]
fn offsets_whose_byte_reaches_proto_max_bulk_len_are_refused() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    let refused = b"-ERR bit offset is not an integer or out of range\r\n";
    assert_eq!(c.call(&["SETBIT", "k", "4294967296", "1"]), refused);
    assert_eq!(c.call(&["BITFIELD", "k", "GET", "u8", "#536870912"]), refused);
    assert_eq!(c.call(&["GETBIT", "k", "4294967295"]), b":0\r\n");
    assert_eq!(c.call(&["CONFIG", "SET", "proto-max-bulk-len", "1048576"]), b"+OK\r\n");
    assert_eq!(c.call(&["SETBIT", "k", "8388608", "1"]), refused);
    assert_eq!(c.call(&["SETBIT", "k", "8388607", "1"]), b":0\r\n");
    assert_eq!(c.call(&["STRLEN", "k"]), b":1048576\r\n");
}

#[test]
fn keywords_and_field_types_are_read_up_to_a_nul_as_redis_reads_them() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let mut ours = Raw::connect(keylock.addr());
    let mut theirs = Raw::connect(redis.addr);
    let cases: &[&[&[u8]]] = &[
        &[b"SET", b"k", b"foobar"],
        &[b"BITFIELD", b"k", b"GET\0x", b"u8", b"0"],
        &[b"BITFIELD", b"k", b"GET", b"i8\0zz", b"0"],
        &[b"BITFIELD", b"k", b"GET", b"i\08", b"0"],
        &[b"BITFIELD", b"k", b"GET", b"\0", b"0"],
        &[b"BITFIELD", b"k", b"GET", b"u8", b"0\0"],
        &[b"BITFIELD", b"k", b"OVERFLOW", b"SAT\0", b"INCRBY", b"u8", b"0", b"1000"],
        &[b"BITCOUNT", b"k", b"0", b"-1", b"BIT\0junk"],
        &[b"BITPOS", b"k", b"0", b"0", b"-1", b"byte\0"],
        &[b"BITOP", b"AND\0", b"d", b"k"],
        &[b"BITOP", b"\0", b"d", b"k"],
        &[b"SETBIT", b"k", b"0\0", b"1"],
        &[b"SETBIT", b"k", b"0", b"1\0"],
        &[b"GET", b"k"],
    ];
    for words in cases {
        ours.send_cmd(words);
        theirs.send_cmd(words);
        assert_eq!(
            String::from_utf8_lossy(&ours.reply()),
            String::from_utf8_lossy(&theirs.reply()),
            "{words:?}"
        );
    }
}

/// Numbers near the edges every parser and overflow check has.
const EXTREMES: &[&str] = &[
    "-9223372036854775808",
    "9223372036854775807",
    "-9223372036854775807",
    "9223372036854775806",
    "4611686018427387903",
    "-4611686018427387904",
    "4294967295",
    "4294967296",
    "2147483647",
    "-2147483648",
    "65535",
    "65536",
    "32767",
    "-32768",
    "255",
    "256",
    "127",
    "128",
    "-128",
    "-129",
    "9223372036854775808",
    "x",
    "",
    "1.5",
];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(&["a", "b", "c", "l", "nokey"][..]).prop_map(str::to_string)
}

fn pick(items: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(items).prop_map(str::to_string)
}

/// An offset for a read: small, or anything at all.
fn read_offset() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u32..400).prop_map(|n| n.to_string()),
        1 => pick(&["-1", "4294967295", "4294967296", "9223372036854775807", "-9223372036854775808", "x", "", "#1"]),
    ]
}

/// An offset for a write: small, or refused (never a large allocation).
fn write_offset() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u32..400).prop_map(|n| n.to_string()),
        1 => pick(&["-1", "4294967296", "9223372036854775807", "x", ""]),
    ]
}

/// A BITFIELD offset: plain, `#N`, or one of the edges (a `#N` whose
/// product wraps lands small or is refused).
fn field_offset() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u32..300).prop_map(|n| n.to_string()),
        3 => (0u32..40).prop_map(|n| format!("#{n}")),
        1 => pick(&["#-1", "#", "#x", "#4611686018427387905", "#9223372036854775807", "-1", "4294967296", "x"]),
    ]
}

fn field_type() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (1u32..=64).prop_map(|n| format!("i{n}")),
        4 => (1u32..=63).prop_map(|n| format!("u{n}")),
        1 => pick(&["i0", "u0", "u64", "i65", "I8", "x8", "i", "", "i08"]),
    ]
}

fn field_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (-300i64..300).prop_map(|n| n.to_string()),
        2 => pick(EXTREMES),
    ]
}

fn index() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (-40i64..40).prop_map(|n| n.to_string()),
        1 => pick(&["-9223372036854775808", "9223372036854775807", "x", "9223372036854775808"]),
    ]
}

fn unit() -> impl Strategy<Value = String> {
    pick(&["BIT", "BYTE", "bit", "byte", "FOO"])
}

fn bitfield_op() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        3 => (field_type(), field_offset()).prop_map(|(t, o)| vec!["GET".into(), t, o]),
        3 => (field_type(), field_offset(), field_value()).prop_map(|(t, o, v)| vec!["SET".into(), t, o, v]),
        3 => (field_type(), field_offset(), field_value()).prop_map(|(t, o, v)| vec!["INCRBY".into(), t, o, v]),
        2 => pick(&["WRAP", "SAT", "FAIL", "wrap", "FOO"]).prop_map(|k| vec!["OVERFLOW".into(), k]),
        1 => pick(&["GET", "SET", "INCRBY", "OVERFLOW", "FOO"]).prop_map(|w| vec![w]),
    ]
}

/// One command line.
fn command() -> impl Strategy<Value = Vec<String>> {
    let value = pick(&[
        "",
        "a",
        "foobar",
        "12345",
        "-1",
        "\u{ff}",
        "\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}",
        "\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{fe}\u{ff}\u{ff}",
        "\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{1}",
        "\u{f0}\u{0f}",
        "The quick brown fox jumps over the lazy dog!",
    ]);
    prop_oneof![
        2 => (key(), value).prop_map(|(k, v)| vec!["SET".into(), k, v]),
        1 => key().prop_map(|k| vec!["GET".into(), k]),
        4 => (key(), write_offset(), pick(&["0", "1", "1", "2", "-1", "x"]))
            .prop_map(|(k, o, v)| vec!["SETBIT".into(), k, o, v]),
        2 => (key(), read_offset()).prop_map(|(k, o)| vec!["GETBIT".into(), k, o]),
        3 => (key(), prop::collection::vec(index(), 0..=2), prop::option::of(unit()), 0usize..10).prop_map(
            |(k, range, unit, odd)| {
                let mut cmd = vec!["BITCOUNT".into(), k];
                cmd.extend(range);
                cmd.extend(unit);
                if odd == 0 {
                    cmd.push("extra".into());
                }
                cmd
            }
        ),
        4 => (key(), pick(&["0", "1", "0", "1", "2", "x"]), prop::collection::vec(index(), 0..=2), prop::option::of(unit()))
            .prop_map(|(k, bit, range, unit)| {
                let mut cmd = vec!["BITPOS".into(), k, bit];
                cmd.extend(range);
                cmd.extend(unit);
                cmd
            }),
        2 => (pick(&["AND", "OR", "XOR", "NOT", "not", "FOO"]), key(), prop::collection::vec(key(), 0..4))
            .prop_map(|(op, dest, sources)| {
                let mut cmd = vec!["BITOP".into(), op, dest];
                cmd.extend(sources);
                cmd
            }),
        4 => (
            pick(&["BITFIELD", "BITFIELD_RO"]),
            key(),
            prop::option::of(pick(&["WRAP", "SAT", "FAIL"])),
            prop::collection::vec(bitfield_op(), 0..5)
        )
            .prop_map(|(name, k, overflow, ops)| {
                let mut cmd = vec![name, k];
                if let Some(overflow) = overflow {
                    cmd.extend(["OVERFLOW".into(), overflow]);
                }
                cmd.extend(ops.into_iter().flatten());
                cmd
            }),
    ]
}

/// Sends `words` and returns the raw reply. A word is Latin-1, one byte
/// a character, so values can hold any byte (`\u{ff}` is 0xFF).
fn send(c: &mut Raw, words: &[String]) -> Vec<u8> {
    let bytes: Vec<Vec<u8>> = words.iter().map(|w| w.chars().map(|ch| ch as u8).collect()).collect();
    let words: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
    c.send_cmd(&words);
    c.reply()
}

#[test]
fn random_bitmap_commands_answer_as_redis() {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let mut ours = Raw::connect(keylock.addr());
    let mut theirs = Raw::connect(redis.addr);
    let mut runner = case_runner("KEYLOCK_BITMAP_CASES", CASES);
    let servers = std::cell::RefCell::new((&mut ours, &mut theirs));
    let result = runner.run(&(any::<bool>(), prop::collection::vec(command(), 1..30)), |(resp3, case)| {
        let mut servers = servers.borrow_mut();
        let (ours, theirs) = &mut *servers;
        for c in [&mut **ours, &mut **theirs] {
            send(c, &["HELLO".into(), if resp3 { "3" } else { "2" }.into()]);
            send(c, &["FLUSHALL".into()]);
            send(c, &["RPUSH".into(), "l".into(), "x".into()]);
        }
        // Each case ends by reading every key, so a write that answered
        // alike but stored differently is seen.
        let reads = ["a", "b", "c", "nokey"].map(|k| vec!["GET".to_string(), k.to_string()]);
        for words in case.iter().chain(&reads) {
            let want = send(theirs, words);
            let got = send(ours, words);
            prop_assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "{:?} (RESP{})",
                words,
                if resp3 { 3 } else { 2 }
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
