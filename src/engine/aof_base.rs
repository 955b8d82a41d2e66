//! The dataset as commands: an append-only file's base with
//! `aof-use-rdb-preamble no`, as Redis's `rewriteAppendOnlyFileRio` writes
//! it. The function libraries first (`FUNCTION LOAD`), then, for each
//! database with keys, a SELECT and each key rebuilt: SET, RPUSH / SADD /
//! ZADD / HMSET in batches of 64 items, a stream as its XADDs, its XSETID
//! and its groups (XGROUP CREATE … ENTRIESREAD, XGROUP CREATECONSUMER for
//! a consumer with nothing pending, XCLAIM … FORCE for each pending entry),
//! and PEXPIREAT for a key with a deadline. A `#TS:` annotation comes
//! first with `aof-timestamp-enabled`.

use std::io::Write;

use bytes::Bytes;

use super::State;
use crate::db::Value;
use crate::db::stream::StreamId;

/// Redis's AOF_REWRITE_ITEMS_PER_CMD.
const ITEMS_PER_COMMAND: usize = 64;

/// Writes one command.
fn command<W: Write>(out: &mut W, args: &[&[u8]]) -> std::io::Result<()> {
    write!(out, "*{}\r\n", args.len())?;
    for arg in args {
        write!(out, "${}\r\n", arg.len())?;
        out.write_all(arg)?;
        out.write_all(b"\r\n")?;
    }
    Ok(())
}

/// `name key` followed by `items` (each one or more arguments), in
/// commands of at most [`ITEMS_PER_COMMAND`] items.
fn batched<'a, W: Write>(out: &mut W, name: &[u8], key: &[u8], items: impl Iterator<Item = Vec<&'a [u8]>>) -> std::io::Result<()> {
    let mut args: Vec<&[u8]> = Vec::new();
    let mut count = 0;
    for item in items {
        if count == 0 {
            args.clear();
            args.extend([name, key]);
        }
        args.extend(item);
        count += 1;
        if count == ITEMS_PER_COMMAND {
            command(out, &args)?;
            count = 0;
        }
    }
    if count > 0 {
        command(out, &args)?;
    }
    Ok(())
}

fn id_text(id: StreamId) -> String {
    format!("{}-{}", id.ms, id.seq)
}

impl State {
    /// Writes the dataset and the libraries (`codes`) as commands.
    pub fn write_commands<W: Write>(&self, out: &mut W, codes: &[Bytes]) -> std::io::Result<()> {
        if self.params.value("aof-timestamp-enabled") == Some("yes") {
            write!(out, "#TS:{}\r\n", self.clock.now_ms() / 1000)?;
        }
        for code in codes {
            command(out, &[b"FUNCTION", b"LOAD", code])?;
        }
        let now = self.clock.now_ms();
        let key_save_delay = self.params.int("rdb-key-save-delay").unwrap_or(0);
        for (index, db) in self.dbs.iter().enumerate() {
            if db.is_empty() {
                continue;
            }
            command(out, &[b"SELECT", index.to_string().as_bytes()])?;
            for (key, value, deadline) in db.entries() {
                // A key already past its deadline is not written, as a
                // snapshot leaves it out.
                if deadline.is_some_and(|at| at <= now) {
                    continue;
                }
                write_value(out, key, value)?;
                if let Some(at) = deadline {
                    command(out, &[b"PEXPIREAT", key, at.to_string().as_bytes()])?;
                }
                crate::rdb::debug_delay(key_save_delay);
            }
        }
        Ok(())
    }
}

fn write_value<W: Write>(out: &mut W, key: &[u8], value: &Value) -> std::io::Result<()> {
    match value {
        Value::Str(s) => command(out, &[b"SET", key, s]),
        Value::List(l) => batched(out, b"RPUSH", key, l.iter().map(|item| vec![&item[..]])),
        Value::Set(s) => batched(out, b"SADD", key, s.iter().map(|m| vec![&m[..]])),
        Value::ZSet(z) => {
            let scores: Vec<(String, &Bytes)> = z.iter().map(|(m, score)| (crate::numfmt::printf_g17(score), m)).collect();
            batched(out, b"ZADD", key, scores.iter().map(|(score, m)| vec![score.as_bytes(), &m[..]]))
        }
        Value::Hash(h) => batched(out, b"HMSET", key, h.iter().map(|(f, v)| vec![f, v])),
        Value::Stream(s) => {
            let everything = s.range(
                StreamId { ms: 0, seq: 0 },
                StreamId {
                    ms: u64::MAX,
                    seq: u64::MAX,
                },
                false,
            );
            if !s.is_empty() {
                for (id, fields) in everything {
                    let id = id_text(id);
                    let mut args: Vec<&[u8]> = vec![b"XADD", key, id.as_bytes()];
                    args.extend(fields.iter().map(|f| &f[..]));
                    command(out, &args)?;
                }
            } else {
                // An empty stream: XADD MAXLEN 0 leaves the key with no entry.
                command(out, &[b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"])?;
            }
            command(
                out,
                &[
                    b"XSETID",
                    key,
                    id_text(s.last_id).as_bytes(),
                    b"ENTRIESADDED",
                    s.entries_added.to_string().as_bytes(),
                    b"MAXDELETEDID",
                    id_text(s.max_deleted_id).as_bytes(),
                ],
            )?;
            for (name, group) in &s.groups {
                command(
                    out,
                    &[
                        b"XGROUP",
                        b"CREATE",
                        key,
                        name,
                        id_text(group.last_id).as_bytes(),
                        b"ENTRIESREAD",
                        group.entries_read.to_string().as_bytes(),
                    ],
                )?;
                for (consumer_name, consumer) in &group.consumers {
                    if consumer.pel.is_empty() {
                        command(out, &[b"XGROUP", b"CREATECONSUMER", key, name, consumer_name])?;
                        continue;
                    }
                    for id in &consumer.pel {
                        let Some(nack) = group.pel.get(id) else { continue };
                        command(
                            out,
                            &[
                                b"XCLAIM",
                                key,
                                name,
                                consumer_name,
                                b"0",
                                id_text(*id).as_bytes(),
                                b"TIME",
                                nack.delivery_time.to_string().as_bytes(),
                                b"RETRYCOUNT",
                                nack.delivery_count.to_string().as_bytes(),
                                b"JUSTID",
                                b"FORCE",
                            ],
                        )?;
                    }
                }
            }
            Ok(())
        }
    }
}
