//! RDB files: the whole dataset in Redis 7.0's format (`rdbSaveRio` and
//! `rdbLoadRio`), so that redis-server 7.0.15 loads what keylock saves and
//! keylock loads what redis-server saves.
//!
//! A file is the magic `REDIS0010`, auxiliary fields (`redis-ver`,
//! `redis-bits`, `ctime`, `used-mem`, `aof-base`), each function library
//! (`RDB_OPCODE_FUNCTION2` and its code), then for every database that has
//! keys `SELECTDB` and `RESIZEDB`, and each key: its deadline
//! (`EXPIRETIME_MS`) if any, its type byte, its name and its value as
//! [`super::encode::write_object`] writes it (the same as DUMP). `EOF` and
//! the CRC64 of everything before it (zero with `rdbchecksum no`) end it.
//!
//! Loading reads every opcode Redis 7.0 writes, older deadlines in seconds,
//! LRU idle times and LFU counters (skipped: keylock keeps its own), and
//! refuses a module's data and anything malformed with an error naming
//! why. Keys whose deadline has passed are left out, as a master does.

use std::io::{self, Write};

use bytes::{Bytes, BytesMut};

use super::decode::{self, Reader};
use super::encode::{self, write_len, write_string};
use super::{DecodeOptions, EncodeOptions, RDB_VERSION};
use crate::db::Value;

const OP_FUNCTION2: u8 = 245;
const OP_FUNCTION: u8 = 246;
const OP_MODULE_AUX: u8 = 247;
const OP_IDLE: u8 = 248;
const OP_FREQ: u8 = 249;
const OP_AUX: u8 = 250;
const OP_RESIZEDB: u8 = 251;
const OP_EXPIRETIME_MS: u8 = 252;
const OP_EXPIRETIME: u8 = 253;
const OP_SELECTDB: u8 = 254;
const OP_EOF: u8 = 255;

/// What a file's header says about the server that wrote it.
pub struct Aux {
    /// Unix time of the save, seconds.
    pub ctime: u64,
    /// Memory in use when saving.
    pub used_mem: u64,
    /// Written as the base of an append-only file (`aof-base`).
    pub aof_base: bool,
    /// The replication history the data is at (Redis's `rdbSaveInfo`):
    /// the database the stream is in, the replication ID and offset
    /// (`repl-stream-db`, `repl-id`, `repl-offset`).
    pub repl: Option<(usize, String, u64)>,
}

/// One database to save: its number, its key count and how many have a
/// deadline, and its keys.
pub struct DbSource<'a, I: Iterator<Item = (&'a [u8], &'a Value, Option<u64>)>> {
    pub index: usize,
    pub keys: usize,
    pub expires: usize,
    pub entries: I,
}

/// Writes a whole RDB file to `out`; `checksum` is `rdbchecksum`.
pub fn write<'a, W: Write, I: Iterator<Item = (&'a [u8], &'a Value, Option<u64>)>>(
    out: W,
    aux: &Aux,
    libraries: &[&[u8]],
    dbs: impl Iterator<Item = DbSource<'a, I>>,
    options: &EncodeOptions,
    checksum: bool,
) -> io::Result<()> {
    let mut out = Checksummed::new(out, checksum);
    let mut buf = Vec::with_capacity(64 * 1024);
    buf.extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
    let aux_field = |buf: &mut Vec<u8>, key: &str, value: &[u8]| {
        buf.push(OP_AUX);
        write_string(buf, key.as_bytes(), options);
        write_string(buf, value, options);
    };
    aux_field(&mut buf, "redis-ver", crate::REDIS_VERSION.as_bytes());
    aux_field(&mut buf, "redis-bits", b"64");
    aux_field(&mut buf, "ctime", aux.ctime.to_string().as_bytes());
    aux_field(&mut buf, "used-mem", aux.used_mem.to_string().as_bytes());
    if let Some((db, id, offset)) = &aux.repl {
        aux_field(&mut buf, "repl-stream-db", db.to_string().as_bytes());
        aux_field(&mut buf, "repl-id", id.as_bytes());
        aux_field(&mut buf, "repl-offset", offset.to_string().as_bytes());
    }
    aux_field(&mut buf, "aof-base", if aux.aof_base { b"1" } else { b"0" });
    for code in libraries {
        buf.push(OP_FUNCTION2);
        write_string(&mut buf, code, options);
    }
    for db in dbs {
        if db.keys == 0 {
            continue;
        }
        buf.push(OP_SELECTDB);
        write_len(&mut buf, db.index as u64);
        buf.push(OP_RESIZEDB);
        write_len(&mut buf, db.keys as u64);
        write_len(&mut buf, db.expires as u64);
        for (key, value, deadline) in db.entries {
            if let Some(at) = deadline {
                buf.push(OP_EXPIRETIME_MS);
                buf.extend_from_slice(&at.to_le_bytes());
            }
            // The type byte, then the key, then the value.
            let start = buf.len();
            encode::write_object(&mut buf, value, options);
            let body = buf.split_off(start + 1);
            write_string(&mut buf, key, options);
            buf.extend_from_slice(&body);
            if buf.len() >= 64 * 1024 {
                out.write_all(&buf)?;
                buf.clear();
            }
            super::debug_delay(options.key_save_delay);
        }
    }
    buf.push(OP_EOF);
    out.write_all(&buf)?;
    out.finish()
}

/// A writer that keeps the CRC64 of what went through it and appends it.
struct Checksummed<W: Write> {
    out: W,
    digest: Option<crc::Digest<'static, u64, crc::Table<16>>>,
}

impl<W: Write> Checksummed<W> {
    fn new(out: W, checksum: bool) -> Checksummed<W> {
        Checksummed {
            out,
            digest: checksum.then(|| super::CRC.digest()),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        if let Some(d) = self.digest.as_mut() {
            d.update(bytes);
        }
        self.out.write_all(bytes)
    }

    fn finish(mut self) -> io::Result<()> {
        let crc = self.digest.take().map_or(0, |d| d.finalize());
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.flush()
    }
}

/// A loaded file: each database's keys with their deadlines, and the
/// function libraries' codes.
#[derive(Default)]
pub struct Loaded {
    pub dbs: Vec<Vec<(Bytes, Value, Option<u64>)>>,
    pub libraries: Vec<Bytes>,
    /// Keys left out because their deadline had passed.
    pub expired: u64,
    /// Those keys, by database (a master that continues a replication
    /// history tells its replicas they are gone).
    pub expired_keys: Vec<(usize, Bytes)>,
    /// `repl-stream-db`: the database the stream after this snapshot
    /// starts in.
    pub stream_db: Option<usize>,
    /// `repl-id` and `repl-offset`: the replication history the data is at.
    pub repl_id: Option<String>,
    pub repl_offset: Option<u64>,
}

/// Why a file did not load, in the words Redis logs, and the offset in
/// the file where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError(pub String, pub usize);

/// Reads a whole RDB file. `databases` is how many there are (a key in a
/// database past them is an error, as in Redis); `now_ms` decides which
/// keys have expired.
pub fn read(file: &[u8], databases: usize, options: &DecodeOptions, now_ms: u64) -> Result<Loaded, LoadError> {
    read_with_progress(file, databases, options, now_ms, &mut |_| true)
}

/// [`read`], telling `progress` how many bytes were read after each key;
/// it returns false to stop the load (an error).
pub fn read_with_progress(
    file: &[u8],
    databases: usize,
    options: &DecodeOptions,
    now_ms: u64,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Result<Loaded, LoadError> {
    let mut loader = Loader::new(databases, options, now_ms);
    loader.feed(file, true, progress)?;
    Ok(loader.loaded)
}

/// Reads an RDB file as it arrives (a master's snapshot parsed from the
/// socket, Redis's diskless load): `next` gives the next bytes, waiting
/// for them, or None when there are no more. Only the key being read is
/// held, not the file. Returns what was loaded and the bytes `next` gave
/// past the file's end.
pub fn read_streamed(
    next: &mut dyn FnMut() -> Option<Bytes>,
    databases: usize,
    options: &DecodeOptions,
    now_ms: u64,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Result<(Loaded, BytesMut), LoadError> {
    let mut loader = Loader::new(databases, options, now_ms);
    let mut pending = BytesMut::new();
    // An item that did not parse is read again once the bytes it needs at
    // least are in, and twice as many as at the last try: a value arriving
    // in many reads is parsed about twice, not once a read.
    let mut plenty = 1;
    let mut complete = false;
    loop {
        while !complete && pending.len() < plenty {
            match next() {
                Some(bytes) => pending.extend_from_slice(&bytes),
                None => complete = true,
            }
        }
        let used = loader.feed(&pending, complete, progress)?;
        let _ = pending.split_to(used);
        if loader.done {
            return Ok((loader.loaded, pending));
        }
        plenty = pending.len().saturating_mul(2).max(loader.wanted).max(pending.len() + 1);
    }
}

/// Where a [`Loader`] is in the file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Header,
    Body,
    Checksum,
}

/// An RDB file read item by item (an opcode and what follows it), from
/// bytes given as they come: an item that is not all there is read again
/// when more is.
struct Loader<'o> {
    options: &'o DecodeOptions,
    databases: usize,
    now_ms: u64,
    part: Part,
    version: u16,
    loaded: Loaded,
    db: usize,
    deadline: Option<u64>,
    /// The CRC64 of every byte read so far.
    digest: crc::Digest<'static, u64, crc::Table<16>>,
    /// Bytes read so far.
    at: usize,
    /// When the last [`Loader::feed`] stopped at an item not all there:
    /// how many bytes after those read it needs, at least.
    wanted: usize,
    done: bool,
}

/// What one item of the body is.
enum Item {
    Deadline(u64),
    Skip,
    End,
    SelectDb(u64),
    Aux(Bytes, Bytes),
    Function(Bytes),
    Key(Bytes, Value),
}

impl<'o> Loader<'o> {
    fn new(databases: usize, options: &'o DecodeOptions, now_ms: u64) -> Loader<'o> {
        Loader {
            options,
            databases,
            now_ms,
            part: Part::Header,
            version: RDB_VERSION,
            loaded: Loaded {
                dbs: (0..databases).map(|_| Vec::new()).collect(),
                ..Loaded::default()
            },
            db: 0,
            deadline: None,
            digest: super::CRC.digest(),
            at: 0,
            wanted: 0,
            done: false,
        }
    }

    /// Reads the whole items `buf` holds (the bytes after those read so
    /// far); `complete` says no more will come, so an item cut short is
    /// an error. Returns how many bytes were read.
    fn feed(&mut self, buf: &[u8], complete: bool, progress: &mut dyn FnMut(usize) -> bool) -> Result<usize, LoadError> {
        let mut used = 0;
        while !self.done {
            let rest = &buf[used..];
            let read = match self.part {
                Part::Header => self.header(rest, complete),
                Part::Body => self.item(rest, complete, progress),
                Part::Checksum => self.checksum(rest, complete),
            }
            .map_err(|(text, at)| LoadError(text, self.at + at))?;
            let Some(n) = read else {
                break;
            };
            self.digest.update(&rest[..n]);
            self.at += n;
            used += n;
        }
        Ok(used)
    }

    /// `REDIS` and a version Redis 7.0 reads.
    fn header(&mut self, buf: &[u8], complete: bool) -> Result<Option<usize>, (String, usize)> {
        let wrong = || ("Wrong signature trying to load DB from file".to_string(), 0);
        if buf.len() < 9 {
            self.wanted = 9;
            return if complete { Err(wrong()) } else { Ok(None) };
        }
        if &buf[..5] != b"REDIS" {
            return Err(wrong());
        }
        let version: u16 = std::str::from_utf8(&buf[5..9])
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(wrong)?;
        if !(1..=RDB_VERSION).contains(&version) {
            return Err((format!("Can't handle RDB format version {version}"), 0));
        }
        self.version = version;
        self.part = Part::Body;
        Ok(Some(9))
    }

    /// The CRC64 of everything before it (from version 5; zero is none).
    fn checksum(&mut self, buf: &[u8], complete: bool) -> Result<Option<usize>, (String, usize)> {
        if self.version < 5 {
            self.done = true;
            return Ok(Some(0));
        }
        let Some(stored) = buf.get(..8) else {
            self.wanted = 8;
            return if complete {
                Err((SHORT_READ.to_string(), buf.len()))
            } else {
                Ok(None)
            };
        };
        let stored = u64::from_le_bytes(stored.try_into().unwrap_or_default());
        if stored != 0 && stored != self.digest.clone().finalize() {
            // Redis names the offset after the checksum read.
            return Err(("Wrong RDB checksum. Aborting now.".to_string(), 8));
        }
        self.done = true;
        Ok(Some(8))
    }

    /// One item of the body, read and then applied: None if `buf` does
    /// not hold all of it yet.
    fn item(&mut self, buf: &[u8], complete: bool, progress: &mut dyn FnMut(usize) -> bool) -> Result<Option<usize>, (String, usize)> {
        let mut r = Reader::new(buf, self.options);
        let item = match parse_item(&mut r) {
            Ok(item) => item,
            // Cut short: read again when more is in.
            Err(_) if r.wanted().is_some() && !complete => {
                self.wanted = r.wanted().unwrap_or(0);
                return Ok(None);
            }
            // Cut short for good: Redis's short read.
            Err(_) if r.wanted().is_some() => return Err((SHORT_READ.to_string(), r.position())),
            Err(text) => return Err((text, r.position())),
        };
        let used = r.position();
        match item {
            Item::Deadline(at) => self.deadline = Some(at),
            Item::Skip => {}
            Item::End => self.part = Part::Checksum,
            Item::SelectDb(n) => {
                if n >= self.databases as u64 {
                    return Err((
                        format!(
                            "FATAL: Data file was created with a Redis server configured to handle more than {} databases. Exiting",
                            self.databases
                        ),
                        used,
                    ));
                }
                self.db = n as usize;
            }
            Item::Aux(key, value) => {
                let loaded = &mut self.loaded;
                let text = || std::str::from_utf8(&value).ok();
                match &key[..] {
                    b"repl-stream-db" => loaded.stream_db = text().and_then(|v| v.parse().ok()),
                    // Redis takes an ID only of its length.
                    b"repl-id" if value.len() == 40 => loaded.repl_id = text().map(str::to_string),
                    b"repl-offset" => loaded.repl_offset = text().and_then(|v| v.parse::<i64>().ok()).and_then(|v| u64::try_from(v).ok()),
                    _ => {}
                }
            }
            Item::Function(code) => self.loaded.libraries.push(code),
            Item::Key(key, value) => {
                match self.deadline.take() {
                    Some(at) if at <= self.now_ms => {
                        self.loaded.expired += 1;
                        self.loaded.expired_keys.push((self.db, key));
                    }
                    at => self.loaded.dbs[self.db].push((key, value, at)),
                }
                if !progress(self.at + used) {
                    return Err(("Loading stopped".to_string(), used));
                }
            }
        }
        Ok(Some(used))
    }
}

/// Why a file cut short did not load, Redis's text.
pub const SHORT_READ: &str = "Short read or OOM loading DB. Unrecoverable error, aborting now.";

/// One opcode and what follows it; the error is Redis's text.
fn parse_item(r: &mut Reader) -> Result<Item, String> {
    let short = || SHORT_READ.to_string();
    let op = r.u8().ok_or_else(short)?;
    Ok(match op {
        OP_EXPIRETIME => {
            let secs = r.bytes(4).ok_or_else(short)?;
            Item::Deadline(u32::from_le_bytes(secs.try_into().unwrap_or_default()) as u64 * 1000)
        }
        OP_EXPIRETIME_MS => {
            let ms = r.bytes(8).ok_or_else(short)?;
            Item::Deadline(u64::from_le_bytes(ms.try_into().unwrap_or_default()))
        }
        OP_FREQ => {
            r.u8().ok_or_else(short)?;
            Item::Skip
        }
        OP_IDLE => {
            r.length().ok_or_else(short)?;
            Item::Skip
        }
        OP_EOF => Item::End,
        OP_SELECTDB => Item::SelectDb(r.length().ok_or_else(short)?),
        OP_RESIZEDB => {
            r.length().ok_or_else(short)?;
            r.length().ok_or_else(short)?;
            Item::Skip
        }
        OP_AUX => {
            let key = r.string().ok_or_else(short)?;
            let value = r.string().ok_or_else(short)?;
            Item::Aux(key, value)
        }
        OP_MODULE_AUX => return Err("The RDB file contains AUX module data I can't load: no matching module".into()),
        OP_FUNCTION2 => Item::Function(r.string().ok_or_else(short)?),
        OP_FUNCTION => return Err("Pre-release function format not supported.".into()),
        kind => {
            let key = r.string().ok_or_else(short)?;
            let value =
                decode::read_typed(kind, r).ok_or_else(|| format!("Bad data format loading key '{}'", String::from_utf8_lossy(&key)))?;
            Item::Key(key, value)
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    fn save(entries: &[(&[u8], Value, Option<u64>)], libraries: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        let source = DbSource {
            index: 3,
            keys: entries.len(),
            expires: entries.iter().filter(|e| e.2.is_some()).count(),
            entries: entries.iter().map(|(k, v, at)| (*k, v, *at)),
        };
        let aux = Aux {
            ctime: 1,
            used_mem: 2,
            aof_base: false,
            repl: None,
        };
        write(&mut out, &aux, libraries, std::iter::once(source), &EncodeOptions::default(), true).unwrap();
        out
    }

    #[test]
    fn what_is_saved_loads_back_with_deadlines_and_libraries() {
        let file = save(
            &[
                (b"s", Value::Str(Bytes::from("hello")), None),
                (b"n", Value::Str(Bytes::from("12345")), Some(5_000)),
                (b"gone", Value::Str(Bytes::from("x")), Some(10)),
            ],
            &[b"#!lua name=lib\nredis.register_function('f', function() return 1 end)"],
        );
        assert!(file.starts_with(b"REDIS0010"));
        let loaded = read(&file, 16, &DecodeOptions::default(), 100).unwrap();
        assert_eq!(loaded.expired, 1);
        assert_eq!(loaded.libraries.len(), 1);
        let keys: Vec<_> = loaded.dbs[3].iter().map(|(k, _, at)| (k.clone(), *at)).collect();
        assert_eq!(keys, vec![(Bytes::from("s"), None), (Bytes::from("n"), Some(5_000))]);
    }

    #[test]
    fn a_damaged_file_is_refused() {
        let mut file = save(&[(b"s", Value::Str(Bytes::from("hello")), None)], &[]);
        let at = file.len() - 12;
        file[at] ^= 0xff;
        assert!(read(&file, 16, &DecodeOptions::default(), 0).is_err());
        assert!(read(b"RADIS0010", 16, &DecodeOptions::default(), 0).is_err());
        let truncated = save(&[(b"s", Value::Str(Bytes::from("hello")), None)], &[]);
        assert!(read(&truncated[..truncated.len() - 9], 16, &DecodeOptions::default(), 0).is_err());
    }

    /// `file` read by [`read_streamed`] in pieces of `size` bytes, then
    /// `after`; also how many pieces were asked for. The bytes past the
    /// file are those read past it and then those not asked for.
    fn streamed(file: &[u8], size: usize, after: &[u8]) -> (Result<(Loaded, BytesMut), LoadError>, usize) {
        let mut pieces: VecDeque<Bytes> = file.chunks(size).map(Bytes::copy_from_slice).collect();
        if !after.is_empty() {
            pieces.push_back(Bytes::copy_from_slice(after));
        }
        let mut asked = 0;
        let result = read_streamed(
            &mut || {
                asked += 1;
                pieces.pop_front()
            },
            16,
            &DecodeOptions::default(),
            100,
            &mut |_| true,
        )
        .map(|(loaded, mut rest)| {
            pieces.iter().for_each(|p| rest.extend_from_slice(p));
            (loaded, rest)
        });
        (result, asked)
    }

    fn big_file() -> Vec<u8> {
        let long = Value::Str(Bytes::from(vec![b'x'; 100_000]));
        let list = Box::new((0..2000).map(|i| Bytes::from(format!("item-{i}"))).collect());
        save(
            &[
                (b"s", Value::Str(Bytes::from("hello")), None),
                (b"long", long, Some(5_000)),
                (b"list", Value::List(list), None),
                (b"gone", Value::Str(Bytes::from("x")), Some(10)),
            ],
            &[b"#!lua name=lib\nredis.register_function('f', function() return 1 end)"],
        )
    }

    fn summary(loaded: &Loaded) -> Vec<(Bytes, Option<u64>)> {
        loaded.dbs[3].iter().map(|(k, _, at)| (k.clone(), *at)).collect()
    }

    #[test]
    fn a_file_read_as_it_arrives_loads_as_the_whole_file_and_keeps_what_follows() {
        let file = big_file();
        let whole = read(&file, 16, &DecodeOptions::default(), 100).unwrap();
        for size in [1, 7, 100, 4096, 65536, file.len()] {
            let (result, _) = streamed(&file, size, b"MARK+stream");
            let (loaded, rest) = result.unwrap();
            assert_eq!(summary(&loaded), summary(&whole), "pieces of {size}");
            let dumps = |l: &Loaded| -> Vec<Vec<u8>> {
                l.dbs[3]
                    .iter()
                    .map(|(_, v, _)| crate::rdb::dump(v, &EncodeOptions::default()))
                    .collect()
            };
            assert_eq!(dumps(&loaded), dumps(&whole));
            assert_eq!(loaded.libraries, whole.libraries);
            assert_eq!(loaded.expired, 1);
            assert_eq!(&rest[..], b"MARK+stream", "pieces of {size}");
        }
    }

    #[test]
    fn a_file_read_as_it_arrives_is_refused_when_cut_short_or_damaged() {
        let file = big_file();
        let (result, _) = streamed(&file[..5], 1000, b"");
        assert_eq!(result.err().unwrap().0, "Wrong signature trying to load DB from file");
        // Cut anywhere after the header (inside a key or between two): a
        // short read, as Redis names it.
        for cut in [9, 20, 100, file.len() / 2, file.len() - 1] {
            let (result, _) = streamed(&file[..cut], 1000, b"");
            assert_eq!(result.err().map(|e| e.0), Some(SHORT_READ.to_string()), "cut at {cut}");
        }
        let mut damaged = file.clone();
        let at = damaged.len() - 3;
        damaged[at] ^= 0xff;
        let (result, _) = streamed(&damaged, 1000, b"");
        assert_eq!(result.err().unwrap().0, "Wrong RDB checksum. Aborting now.");
    }

    #[test]
    fn damage_is_found_where_it_is_without_waiting_for_the_rest() {
        let mut file = big_file();
        // The first key's type byte becomes one no file has.
        let at = file.windows(2).position(|w| w == [0, 1]).unwrap();
        assert_eq!(&file[at + 1..at + 3], b"\x01s");
        file[at] = 0xf0;
        let (result, asked) = streamed(&file, 100, b"");
        let error = result.err().unwrap();
        assert_eq!(error.0, "Bad data format loading key 's'");
        assert!(asked < file.len() / 100 / 2, "read {asked} pieces of {}", file.len() / 100);
        assert_eq!(read(&file, 16, &DecodeOptions::default(), 0).err().unwrap(), error);
    }
}
