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

use bytes::Bytes;

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
    let fail = |what: &str| LoadError(what.to_string(), 0);
    if file.len() < 9 || &file[..5] != b"REDIS" {
        return Err(fail("Wrong signature trying to load DB from file"));
    }
    let version: u16 = std::str::from_utf8(&file[5..9])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| fail("Wrong signature trying to load DB from file"))?;
    if !(1..=RDB_VERSION).contains(&version) {
        return Err(LoadError(format!("Can't handle RDB format version {version}"), 0));
    }
    let mut r = Reader::new(file, options);
    r.bytes(9);
    read_body(file, version, &mut r, databases, now_ms, progress).map_err(|text| LoadError(text, r.position()))
}

/// The file after its header: the error is Redis's text.
fn read_body(
    file: &[u8],
    version: u16,
    r: &mut Reader,
    databases: usize,
    now_ms: u64,
    progress: &mut dyn FnMut(usize) -> bool,
) -> Result<Loaded, String> {
    let fail = |what: &str| what.to_string();
    let short = || fail("Short read or OOM loading DB. Unrecoverable error, aborting now.");
    let mut loaded = Loaded {
        dbs: (0..databases).map(|_| Vec::new()).collect(),
        ..Loaded::default()
    };
    let mut db = 0usize;
    let mut deadline: Option<u64> = None;
    loop {
        let op = r.u8().ok_or_else(short)?;
        match op {
            OP_EXPIRETIME => {
                let secs = r.bytes(4).ok_or_else(short)?;
                deadline = Some(u32::from_le_bytes(secs.try_into().unwrap_or_default()) as u64 * 1000);
            }
            OP_EXPIRETIME_MS => {
                let ms = r.bytes(8).ok_or_else(short)?;
                deadline = Some(u64::from_le_bytes(ms.try_into().unwrap_or_default()));
            }
            OP_FREQ => {
                r.u8().ok_or_else(short)?;
            }
            OP_IDLE => {
                r.length().ok_or_else(short)?;
            }
            OP_EOF => break,
            OP_SELECTDB => {
                let n = r.length().ok_or_else(short)? as usize;
                if n >= databases {
                    return Err(format!(
                        "FATAL: Data file was created with a Redis server configured to handle more than {databases} databases. Exiting"
                    ));
                }
                db = n;
            }
            OP_RESIZEDB => {
                r.length().ok_or_else(short)?;
                r.length().ok_or_else(short)?;
            }
            OP_AUX => {
                let key = r.string().ok_or_else(short)?;
                let value = r.string().ok_or_else(short)?;
                let text = || std::str::from_utf8(&value).ok();
                match &key[..] {
                    b"repl-stream-db" => loaded.stream_db = text().and_then(|v| v.parse().ok()),
                    // Redis takes an ID only of its length.
                    b"repl-id" if value.len() == 40 => loaded.repl_id = text().map(str::to_string),
                    b"repl-offset" => loaded.repl_offset = text().and_then(|v| v.parse::<i64>().ok()).and_then(|v| u64::try_from(v).ok()),
                    _ => {}
                }
            }
            OP_MODULE_AUX => return Err(fail("The RDB file contains AUX module data I can't load: no matching module")),
            OP_FUNCTION2 => loaded.libraries.push(r.string().ok_or_else(short)?),
            OP_FUNCTION => return Err(fail("Pre-release function format not supported.")),
            kind => {
                let key = r.string().ok_or_else(short)?;
                let value = decode::read_typed(kind, r)
                    .ok_or_else(|| format!("Bad data format loading key '{}'", String::from_utf8_lossy(&key)))?;
                match deadline.take() {
                    Some(at) if at <= now_ms => {
                        loaded.expired += 1;
                        loaded.expired_keys.push((db, key));
                    }
                    at => loaded.dbs[db].push((key, value, at)),
                }
                if !progress(r.position()) {
                    return Err(fail("Loading stopped"));
                }
            }
        }
    }
    if version >= 5 {
        let end = r.position();
        let stored = r.bytes(8).ok_or_else(short)?;
        let stored = u64::from_le_bytes(stored.try_into().unwrap_or_default());
        if stored != 0 && stored != super::crc64(&file[..end]) {
            return Err(fail("Wrong RDB checksum. Aborting now."));
        }
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
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
}
