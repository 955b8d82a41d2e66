//! The `seed-2018` bodies re-derived from the articles that quote them, so
//! that "byte-exact from the quote" is checked, not just asserted.
//!
//! `lua/redisson/seed-2018/quoted/<seed>.txt` holds, verbatim, the lines of
//! each article that quote Redisson's scripts: Java methods whose script is
//! a chain of string literals joined by `+` (a `//` comment may sit between
//! two of them), and MONITOR lines whose EVAL body is one quoted string. A
//! client sends the literals' concatenation, no separator added.

use crate::scripting::sha1_hex;

use super::NativeTable;

/// The quoted passages, by seed file name.
const QUOTES: &[(&str, &str)] = &[
    (
        "001_276ecc45e424aff2.txt",
        include_str!("../../../lua/redisson/seed-2018/quoted/001_276ecc45e424aff2.txt"),
    ),
    (
        "003_9c5d48ba726a268f.txt",
        include_str!("../../../lua/redisson/seed-2018/quoted/003_9c5d48ba726a268f.txt"),
    ),
];

const INDEX: &str = include_str!("../../../lua/redisson/seed-2018/INDEX.tsv");

/// Every chain of string literals in `text` (`"a" + "b"`, with whitespace
/// and `//` comments allowed around each `+`), each as the bytes of the
/// concatenated, unescaped string.
fn literal_chains(text: &str) -> Vec<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut chains = Vec::new();
    let mut at = 0;
    while let Some(open) = bytes[at..].iter().position(|&c| c == b'"').map(|i| at + i) {
        let (mut chain, mut end) = literal(bytes, open);
        loop {
            let plus = skip_blank(bytes, end);
            if bytes.get(plus) != Some(&b'+') {
                break;
            }
            let next = skip_blank(bytes, plus + 1);
            if bytes.get(next) != Some(&b'"') {
                break;
            }
            let (more, after) = literal(bytes, next);
            chain.extend(more);
            end = after;
        }
        chains.push(chain);
        at = end;
    }
    chains
}

/// The string literal opening at `open`: its unescaped bytes and the
/// position after its closing quote (the end of the line if unclosed).
fn literal(bytes: &[u8], open: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut i = open + 1;
    while let Some(&c) = bytes.get(i) {
        match c {
            b'"' => return (out, i + 1),
            b'\n' => return (out, i),
            b'\\' => {
                out.push(match bytes.get(i + 1) {
                    Some(b'n') => b'\n',
                    Some(b't') => b'\t',
                    Some(&e @ (b'"' | b'\\' | b'\'')) => e,
                    other => panic!("unexpected escape {other:?} at byte {i}"),
                });
                i += 2;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    (out, i)
}

/// Past whitespace and `//` line comments.
fn skip_blank(bytes: &[u8], mut i: usize) -> usize {
    loop {
        match bytes.get(i..) {
            Some([c, ..]) if c.is_ascii_whitespace() => i += 1,
            Some([b'/', b'/', ..]) => {
                i = bytes[i..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |n| i + n);
            }
            _ => return i,
        }
    }
}

/// The scripts a passage quotes: chains that call Redis.
fn quoted_scripts(text: &str) -> Vec<Vec<u8>> {
    literal_chains(text)
        .into_iter()
        .filter(|c| c.windows(10).any(|w| w == b"redis.call"))
        .collect()
}

/// `(file, sha1, seeds quoting it)` for every body in the INDEX.
fn index_rows() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    INDEX
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 6, "seed-2018/INDEX.tsv row: {line}");
            (cols[0], cols[1], cols[5].split(' ').collect())
        })
        .collect()
}

#[test]
fn chains_join_literals_across_lines_and_comments() {
    let java = "eval(\"if a \" +\n  // why\n  \"then b \" + \"end\",\n  keys, \"other\");";
    assert_eq!(literal_chains(java), [b"if a then b end".to_vec(), b"other".to_vec()]);
    assert_eq!(literal_chains(r#""say \"hi\"\\" + "!""#), [br#"say "hi"\!"#.to_vec()]);
}

#[test]
fn every_seed_body_is_its_quote_byte_for_byte() {
    let rows = index_rows();
    assert_eq!(rows.len(), 3);
    for (file, sha, seeds) in rows {
        for seed in seeds {
            let (_, text) = QUOTES
                .iter()
                .find(|(name, _)| *name == seed)
                .unwrap_or_else(|| panic!("{file}: no quoted/{seed}"));
            let found = quoted_scripts(text).iter().filter(|s| sha1_hex(s) == sha).count();
            assert!(found > 0, "{file} ({sha}) is not quoted in {seed}");
        }
    }
}

#[test]
fn the_monitor_capture_saw_the_quoted_java_bodies() {
    // Seed 003 quotes both the Java source and a MONITOR capture: six EVAL
    // lines, each one of the two bodies its Java concatenates.
    let (_, text) = QUOTES[1];
    let monitored: Vec<String> = text
        .lines()
        .filter(|l| l.contains("\"EVAL\""))
        .flat_map(quoted_scripts)
        .map(|s| sha1_hex(&s))
        .collect();
    assert_eq!(monitored.len(), 6);
    let java: Vec<String> = text
        .lines()
        .filter(|l| !l.contains("\"EVAL\""))
        .flat_map(quoted_scripts)
        .map(|s| sha1_hex(&s))
        .collect();
    assert!(monitored.iter().all(|sha| java.contains(sha)), "{monitored:?} vs {java:?}");
}

#[test]
fn every_script_the_seeds_quote_is_recognized() {
    let table = NativeTable::get();
    let mut quoted = 0;
    for (seed, text) in QUOTES {
        for script in quoted_scripts(text) {
            let sha = sha1_hex(&script);
            let known = table.recognize(&sha);
            assert!(
                known.is_some(),
                "{seed}: {sha} not recognized: {}",
                String::from_utf8_lossy(&script)
            );
            quoted += 1;
        }
    }
    // Seed 001: lock acquire and unlock, read and write acquire and unlock;
    // seed 003: acquire, renewal and unlock, and six captured EVALs.
    assert_eq!(quoted, 6 + 3 + 6);
}
