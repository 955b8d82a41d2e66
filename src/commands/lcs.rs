//! LCS: the longest common subsequence of two string values, as Redis
//! 7.0.15's `lcsCommand` computes and reports it (the subsequence, its
//! length with LEN, or the matching ranges with IDX, filtered by
//! MINMATCHLEN and annotated by WITHMATCHLEN).
//!
//! Redis fills the whole (len1 + 1) × (len2 + 1) table of 32-bit lengths
//! and walks it back from the end; the walk decides which of several
//! equally long subsequences is reported and in which order the ranges
//! come (last first), so it is reproduced step for step. The table's size
//! is Redis's memory guard: past `proto-max-bulk-len` bytes the command
//! is refused before anything is allocated, and an allocation that fails
//! is refused too, as Redis's `ztrymalloc` failure is. Both keys are
//! looked up (counted as reads) before the options are read.

use bytes::Bytes;

use super::args::{c_keyword, parse_i64};
use super::table::{CommandSpec, cmd, flag::*};
use super::{Args, CmdError, CmdResult, Ctx, Reply};
use crate::db::Value;

pub const COMMANDS: &[CommandSpec] = &[cmd("lcs", -3, lcs).flags(READONLY)];

/// What LCS reports, from its options.
#[derive(Default)]
struct Options {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: i64,
}

fn parse_options(argv: &[Bytes]) -> CmdResult<Options> {
    let mut args = Args::new(argv);
    args.next();
    args.next();
    let mut o = Options::default();
    while let Some(opt) = args.next() {
        if c_keyword(opt, "idx") {
            o.idx = true;
        } else if c_keyword(opt, "len") {
            o.len = true;
        } else if c_keyword(opt, "withmatchlen") {
            o.with_match_len = true;
        } else if c_keyword(opt, "minmatchlen") && !args.is_empty() {
            o.min_match_len = parse_i64(args.req()?)?.max(0);
        } else {
            return Err(CmdError::syntax());
        }
    }
    if o.len && o.idx {
        return Err(CmdError::lcs_len_and_idx());
    }
    Ok(o)
}

/// A key's string for LCS (empty when missing); `None` for another type.
fn operand(ctx: &mut Ctx, key: &[u8]) -> Option<Bytes> {
    match ctx.read(key) {
        None => Some(Bytes::new()),
        Some(Value::Str(s)) => Some(s.clone()),
        Some(_) => None,
    }
}

/// The lengths table: `at(i, j)` is the LCS length of `a[..i]` and
/// `b[..j]`.
struct Table {
    lengths: Vec<u32>,
    width: usize,
}

impl Table {
    fn at(&self, i: usize, j: usize) -> u32 {
        self.lengths[j + i * self.width]
    }

    /// Redis's dynamic programming fill; `None` when the table cannot be
    /// allocated.
    fn fill(a: &[u8], b: &[u8]) -> Option<Table> {
        let width = b.len() + 1;
        let cells = (a.len() + 1).checked_mul(width)?;
        let mut lengths = Vec::new();
        lengths.try_reserve_exact(cells).ok()?;
        lengths.resize(width, 0);
        for i in 1..=a.len() {
            let row = i * width;
            lengths.push(0);
            for j in 1..=b.len() {
                let value = if a[i - 1] == b[j - 1] {
                    lengths[row - width + j - 1] + 1
                } else {
                    lengths[row - width + j].max(lengths[row + j - 1])
                };
                lengths.push(value);
            }
        }
        Some(Table { lengths, width })
    }
}

/// One IDX match: its ranges in `a` and in `b`, inclusive.
struct Match {
    a: (u32, u32),
    b: (u32, u32),
}

/// Redis's walk back through the table: the subsequence, and the
/// matching ranges from last to first.
fn walk(a: &[u8], b: &[u8], table: &Table) -> (Vec<u8>, Vec<Match>) {
    let mut idx = table.at(a.len(), b.len()) as usize;
    let mut result = vec![0u8; idx];
    let mut matches = Vec::new();
    let unset = a.len() as u32;
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (unset, 0u32, 0u32, 0u32);
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == unset {
                (a_start, a_end) = (i as u32 - 1, i as u32 - 1);
                (b_start, b_end) = (j as u32 - 1, j as u32 - 1);
            } else if a_start == i as u32 && b_start == j as u32 {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table.at(i - 1, j) > table.at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != unset {
                emit = true;
            }
        }
        if emit {
            matches.push(Match {
                a: (a_start, a_end),
                b: (b_start, b_end),
            });
            a_start = unset;
        }
    }
    (result, matches)
}

fn lcs(ctx: &mut Ctx, argv: &[Bytes]) -> CmdResult {
    let a = operand(ctx, &argv[1]);
    let b = operand(ctx, &argv[2]);
    let (Some(a), Some(b)) = (a, b) else {
        return Err(CmdError::lcs_not_strings());
    };
    let o = parse_options(argv)?;
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(CmdError::lcs_too_long());
    }
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells * 4 > ctx.state.runtime.proto_max_bulk_len as u64 {
        return Err(CmdError::lcs_over_proto_max_bulk_len());
    }
    let table = Table::fill(&a, &b).ok_or_else(CmdError::lcs_no_memory)?;
    let len = i64::from(table.at(a.len(), b.len()));
    if o.len {
        return Ok(Reply::Int(len));
    }
    let (result, matches) = walk(&a, &b, &table);
    if !o.idx {
        return Ok(Reply::Bulk(Bytes::from(result)));
    }
    ctx.defer_reply_len();
    let matches = matches
        .into_iter()
        .filter_map(|m| {
            let match_len = m.a.1.wrapping_sub(m.a.0).wrapping_add(1);
            if o.min_match_len != 0 && i64::from(match_len) < o.min_match_len {
                return None;
            }
            let range = |(start, end): (u32, u32)| Reply::Array(vec![Reply::Int(start.into()), Reply::Int(end.into())]);
            let mut entry = vec![range(m.a), range(m.b)];
            if o.with_match_len {
                entry.push(Reply::Int(match_len.into()));
            }
            Some(Reply::Array(entry))
        })
        .collect();
    Ok(Reply::Map(vec![
        (Reply::bulk_static("matches"), Reply::Array(matches)),
        (Reply::bulk_static("len"), Reply::Int(len)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each match's range in the first string, then in the second.
    type Ranges = Vec<((u32, u32), (u32, u32))>;

    fn lcs_of(a: &str, b: &str) -> (String, Ranges) {
        let table = Table::fill(a.as_bytes(), b.as_bytes()).unwrap();
        let (result, matches) = walk(a.as_bytes(), b.as_bytes(), &table);
        (
            String::from_utf8(result).unwrap(),
            matches.into_iter().map(|m| (m.a, m.b)).collect(),
        )
    }

    #[test]
    fn the_subsequence_and_ranges_are_redis_documented_ones() {
        let (result, matches) = lcs_of("ohmytext", "mynewtext");
        assert_eq!(result, "mytext");
        assert_eq!(matches, vec![((4, 7), (5, 8)), ((2, 3), (0, 1))]);
    }

    #[test]
    fn empty_operands_have_an_empty_subsequence() {
        assert_eq!(lcs_of("", "abc"), (String::new(), vec![]));
        assert_eq!(lcs_of("abc", ""), (String::new(), vec![]));
    }
}
