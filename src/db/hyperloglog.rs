//! HyperLogLog values as Redis 7.0.15 lays them out, byte for byte: a
//! plain string (GET returns it) of a 16-byte header — `HYLL`, the
//! encoding, three reserved bytes, the cached cardinality (little endian,
//! its top bit set when stale) — then 16384 six-bit registers, either
//! dense (12288 bytes) or sparse (run-length opcodes ZERO, XZERO and VAL).
//!
//! This module owns the representation only: hashing (MurmurHash64A with
//! Redis's seed), register updates in both encodings, sparse-to-dense
//! promotion, merging, the estimator of Redis 7 (Otmar Ertl's, through
//! `hllSigma` / `hllTau`) and the self test. The commands, keyspace
//! lookups and replies live in `commands::hyperloglog`.
//!
//! Every routine is a transcription of `hyperloglog.c`, including what it
//! does with corrupted values, because clients see the result: PFADD on a
//! damaged sparse value edits it in place up to the opcode where the damage
//! is found, and the bytes left behind are Redis's. C reads one byte past
//! the string (the NUL every sds string ends with) when an XZERO opcode is
//! cut short at the end, and may write there while splitting such an
//! opcode; [`Hll`] keeps that byte, so those edits match too. Redis would
//! keep such a written byte across commands; here every command starts
//! with a zero there, which only a value damaged in exactly that way could
//! show.

use bytes::Bytes;

/// Header bytes before the registers.
pub const HEADER_LEN: usize = 16;
/// Registers in every HyperLogLog (Redis's `HLL_REGISTERS`, P = 14).
pub const REGISTERS: usize = 1 << P;
/// A dense value's exact length (`HLL_DENSE_SIZE`).
pub const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * BITS).div_ceil(8);

const P: u32 = 14;
/// Hash bits left for the run of zeros.
const Q: usize = 64 - P as usize;
const BITS: usize = 6;
const REGISTER_MAX: u64 = (1 << BITS) - 1;
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const ENCODING_AT: usize = 4;
const CARD_AT: usize = 8;
/// The byte holding the cached cardinality's "stale" bit.
const CARD_TOP: usize = CARD_AT + 7;

const XZERO_BIT: u8 = 0x40;
const VAL_BIT: u8 = 0x80;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;

/// 0.5 / ln(2), Redis's `HLL_ALPHA_INF`.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
const SEED: u32 = 0xadc8_3b19;

/// How a valid value stores its registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

impl Encoding {
    /// PFDEBUG ENCODING's word.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// A sparse value whose opcodes do not cover the 16384 registers exactly
/// (Redis's `INVALIDOBJ Corrupted HLL object detected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupted;

/// Redis's `isHLLObjectOrReply` for a string: the encoding when `bytes`
/// look like a HyperLogLog (magic, known encoding, a dense one of the
/// exact length), `None` otherwise.
pub fn encoding_of(bytes: &[u8]) -> Option<Encoding> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != b"HYLL" {
        return None;
    }
    match bytes[ENCODING_AT] {
        DENSE if bytes.len() == DENSE_LEN => Some(Encoding::Dense),
        SPARSE => Some(Encoding::Sparse),
        _ => None,
    }
}

/// The cached cardinality of a valid value, when it is not stale.
pub fn cached_cardinality(bytes: &[u8]) -> Option<u64> {
    if bytes[CARD_TOP] & 0x80 != 0 {
        return None;
    }
    let card: [u8; 8] = bytes[CARD_AT..CARD_AT + 8].try_into().ok()?;
    Some(u64::from_le_bytes(card))
}

/// Stores `card` as the cached cardinality (which makes it current).
pub fn cache_cardinality(bytes: &mut [u8], card: u64) {
    bytes[CARD_AT..CARD_AT + 8].copy_from_slice(&card.to_le_bytes());
}

/// MurmurHash2, 64-bit version, as Redis modified it (endian neutral).
pub fn murmurhash64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = u64::from(seed) ^ (key.len() as u64).wrapping_mul(M);
    let (words, tail) = key.as_chunks::<8>();
    for word in words {
        let mut k = u64::from_le_bytes(*word);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// Redis's `hllPatLen`: the register `element` maps to, and the length
/// of the `000…1` pattern of its hash (1 to Q + 1).
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmurhash64a(element, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------
// Dense registers: six bits each, from the least significant bit of each
// byte upwards. Writes need one byte past the last register's (C writes
// the string's NUL there, unchanged); reads do not (the bits read from it
// are masked off).

fn dense_get(regs: &[u8], index: usize) -> u8 {
    let byte = index * BITS / 8;
    let fb = (index * BITS) & 7;
    let b0 = u64::from(regs[byte]);
    let b1 = u64::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX) as u8
}

fn dense_set(regs: &mut [u8], index: usize, value: u8) {
    let byte = index * BITS / 8;
    let fb = (index * BITS) & 7;
    let fb8 = 8 - fb;
    let v = u64::from(value);
    regs[byte] &= !(REGISTER_MAX << fb) as u8;
    regs[byte] |= (v << fb) as u8;
    regs[byte + 1] &= !(REGISTER_MAX >> fb8) as u8;
    regs[byte + 1] |= (v >> fb8) as u8;
}

/// `hllDenseSet`: raises the register to `count`; true if it changed.
fn dense_raise(regs: &mut [u8], index: usize, count: u8) -> bool {
    if count > dense_get(regs, index) {
        dense_set(regs, index, count);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------
// Sparse opcodes.

fn is_zero(op: u8) -> bool {
    op & 0xc0 == 0
}

fn is_xzero(op: u8) -> bool {
    op & 0xc0 == XZERO_BIT
}

fn is_val(op: u8) -> bool {
    op & VAL_BIT != 0
}

fn zero_len(op: u8) -> usize {
    usize::from(op & 0x3f) + 1
}

fn xzero_len(op: u8, next: u8) -> usize {
    ((usize::from(op & 0x3f) << 8) | usize::from(next)) + 1
}

fn val_value(op: u8) -> u8 {
    ((op >> 2) & 0x1f) + 1
}

fn val_len(op: u8) -> usize {
    usize::from(op & 0x3) + 1
}

fn val_op(value: u8, len: usize) -> u8 {
    ((value - 1) << 2 | (len - 1) as u8) | VAL_BIT
}

fn zero_op(len: usize) -> u8 {
    (len - 1) as u8
}

fn xzero_op(len: usize) -> [u8; 2] {
    let l = len - 1;
    [(l >> 8) as u8 | XZERO_BIT, (l & 0xff) as u8]
}

/// One decoded opcode of a sparse walk.
enum Run {
    Zeros(usize),
    Values(u8, usize),
}

/// Walks the sparse opcodes `ops` as Redis's validating walks do: stops
/// at the first run that would pass register 16384, and is valid only if
/// the runs cover every register. An XZERO cut short at the end takes its
/// second byte from `nul`, the byte C finds after the string.
fn walk_sparse(ops: &[u8], nul: u8, mut each: impl FnMut(usize, Run)) -> Result<(), Corrupted> {
    let end = ops.len();
    let mut p = 0;
    let mut idx = 0;
    while p < end {
        let op = ops[p];
        let (run, step) = if is_zero(op) {
            (Run::Zeros(zero_len(op)), 1)
        } else if is_xzero(op) {
            (Run::Zeros(xzero_len(op, ops.get(p + 1).copied().unwrap_or(nul))), 2)
        } else {
            (Run::Values(val_value(op), val_len(op)), 1)
        };
        let len = match run {
            Run::Zeros(len) | Run::Values(_, len) => len,
        };
        if len + idx > REGISTERS {
            return Err(Corrupted);
        }
        each(idx, run);
        idx += len;
        p += step;
    }
    if idx == REGISTERS { Ok(()) } else { Err(Corrupted) }
}

/// A HyperLogLog being read or changed: the string's bytes followed by the
/// NUL byte C keeps after them (see the module doc).
#[derive(Debug, Clone)]
pub struct Hll {
    buf: Vec<u8>,
}

impl Default for Hll {
    fn default() -> Hll {
        Hll::new()
    }
}

impl Hll {
    /// Redis's `createHLLObject`: an empty sparse value, its registers as
    /// XZERO runs, its cached cardinality 0.
    pub fn new() -> Hll {
        let mut buf = Vec::with_capacity(HEADER_LEN + 3);
        buf.extend_from_slice(b"HYLL");
        buf.push(SPARSE);
        buf.resize(HEADER_LEN, 0);
        let mut left = REGISTERS;
        while left > 0 {
            let run = left.min(XZERO_MAX_LEN);
            buf.extend_from_slice(&xzero_op(run));
            left -= run;
        }
        buf.push(0);
        Hll { buf }
    }

    /// A copy of a value [`encoding_of`] accepted.
    pub fn from_bytes(bytes: &[u8]) -> Hll {
        let mut buf = Vec::with_capacity(bytes.len() + 4);
        buf.extend_from_slice(bytes);
        buf.push(0);
        Hll { buf }
    }

    /// The string's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len()]
    }

    pub fn into_bytes(mut self) -> Bytes {
        self.buf.pop();
        Bytes::from(self.buf)
    }

    fn len(&self) -> usize {
        self.buf.len() - 1
    }

    /// `sdsIncrLen` to `len`: the byte after the string becomes NUL.
    fn set_len(&mut self, len: usize) {
        self.buf.resize(len + 1, 0);
        self.buf[len] = 0;
    }

    pub fn encoding(&self) -> Encoding {
        if self.buf[ENCODING_AT] == DENSE {
            Encoding::Dense
        } else {
            Encoding::Sparse
        }
    }

    /// Marks the cached cardinality stale (`HLL_INVALIDATE_CACHE`).
    pub fn invalidate_cache(&mut self) {
        self.buf[CARD_TOP] |= 0x80;
    }

    /// `hllAdd`: true if a register changed (which also marks the cached
    /// cardinality stale).
    pub fn add(&mut self, element: &[u8], sparse_max_bytes: usize) -> Result<bool, Corrupted> {
        let (index, count) = pattern(element);
        self.raise(index, count, sparse_max_bytes)
    }

    /// Raises register `index` to `count` in either encoding.
    pub fn raise(&mut self, index: usize, count: u8, sparse_max_bytes: usize) -> Result<bool, Corrupted> {
        match self.encoding() {
            Encoding::Dense => Ok(dense_raise(&mut self.buf[HEADER_LEN..], index, count)),
            Encoding::Sparse => self.sparse_raise(index, count, sparse_max_bytes),
        }
    }

    /// `hllSparseToDense`: true if the value was sparse and is now dense;
    /// a corrupted sparse value is left as it was.
    pub fn to_dense(&mut self) -> Result<bool, Corrupted> {
        if self.encoding() == Encoding::Dense {
            return Ok(false);
        }
        let mut dense = vec![0u8; DENSE_LEN + 1];
        dense[..HEADER_LEN].copy_from_slice(&self.buf[..HEADER_LEN]);
        dense[ENCODING_AT] = DENSE;
        let regs = &mut dense[HEADER_LEN..];
        let (ops, nul) = self.body();
        walk_sparse(ops, nul, |first, run| {
            if let Run::Values(value, len) = run {
                for index in first..first + len {
                    dense_set(regs, index, value);
                }
            }
        })?;
        self.buf = dense;
        Ok(true)
    }

    /// The bytes after the header (a sparse value's opcodes, a dense
    /// one's registers), and the byte after them.
    fn body(&self) -> (&[u8], u8) {
        let len = self.len();
        (&self.buf[HEADER_LEN..len], self.buf[len])
    }

    /// `hllSparseSet`: the in-place edit of the opcode covering `index`,
    /// split as needed, then the merge of equal neighbouring VAL runs;
    /// promotion to dense when `count` does not fit a VAL opcode or the
    /// value would outgrow `sparse_max_bytes`.
    fn sparse_raise(&mut self, index: usize, count: u8, sparse_max_bytes: usize) -> Result<bool, Corrupted> {
        if count > VAL_MAX_VALUE {
            return self.promote_and_raise(index, count);
        }
        // Step 1: the opcode covering `index`.
        let sparse = HEADER_LEN;
        let mut end = self.len();
        let mut p = sparse;
        let mut first = 0;
        let mut prev = None;
        let mut span = 0;
        while p < end {
            let op = self.buf[p];
            let mut oplen = 1;
            span = if is_zero(op) {
                zero_len(op)
            } else if is_val(op) {
                val_len(op)
            } else {
                oplen = 2;
                xzero_len(op, self.buf[p + 1])
            };
            if index < first + span {
                break;
            }
            prev = Some(p);
            p += oplen;
            first += span;
        }
        if span == 0 || p >= end {
            return Err(Corrupted);
        }
        let op = self.buf[p];
        let next = if is_xzero(op) { p + 2 } else { p + 1 };
        let next = (next < end).then_some(next);

        // Step 2: the cases that need no split.
        let mut split = true;
        if is_val(op) {
            if val_value(op) >= count {
                return Ok(false);
            }
            if val_len(op) == 1 {
                self.buf[p] = val_op(count, 1);
                split = false;
            }
        } else if is_zero(op) && zero_len(op) == 1 {
            self.buf[p] = val_op(count, 1);
            split = false;
        }

        if split {
            // The general case: the opcode becomes up to three.
            let last = first + span - 1;
            let mut seq = [0u8; 5];
            let mut n = 0;
            fn zeros(seq: &mut [u8; 5], n: &mut usize, len: usize) {
                if len > ZERO_MAX_LEN {
                    seq[*n..*n + 2].copy_from_slice(&xzero_op(len));
                    *n += 2;
                } else {
                    seq[*n] = zero_op(len);
                    *n += 1;
                }
            }
            if is_val(op) {
                let current = val_value(op);
                if index != first {
                    seq[n] = val_op(current, index - first);
                    n += 1;
                }
                seq[n] = val_op(count, 1);
                n += 1;
                if index != last {
                    seq[n] = val_op(current, last - index);
                    n += 1;
                }
            } else {
                if index != first {
                    zeros(&mut seq, &mut n, index - first);
                }
                seq[n] = val_op(count, 1);
                n += 1;
                if index != last {
                    zeros(&mut seq, &mut n, last - index);
                }
            }

            // Step 3: the new opcodes replace the old one.
            let old_len = if is_xzero(op) { 2 } else { 1 };
            let len = self.len();
            if n > old_len && len + (n - old_len) > sparse_max_bytes {
                return self.promote_and_raise(index, count);
            }
            let new_len = len + n - old_len;
            if new_len > len {
                self.buf.resize(new_len + 1, 0);
            }
            if new_len != len
                && let Some(next) = next
            {
                self.buf.copy_within(next..end, next + n - old_len);
            }
            self.set_len(new_len);
            self.buf[p..p + n].copy_from_slice(&seq[..n]);
            end = new_len;
        }

        // Step 4: merge adjacent VAL opcodes of one value, scanning up to
        // five opcodes from the one before the change.
        let mut p = prev.unwrap_or(sparse);
        let mut scan = 5;
        while p < end && scan > 0 {
            scan -= 1;
            let op = self.buf[p];
            if is_xzero(op) {
                p += 2;
                continue;
            } else if is_zero(op) {
                p += 1;
                continue;
            }
            if p + 1 < end && is_val(self.buf[p + 1]) {
                let (v1, v2) = (val_value(op), val_value(self.buf[p + 1]));
                let len = val_len(op) + val_len(self.buf[p + 1]);
                if v1 == v2 && len <= VAL_MAX_LEN {
                    self.buf[p + 1] = val_op(v1, len);
                    self.buf.copy_within(p + 1..=end, p);
                    end -= 1;
                    self.set_len(end);
                    continue;
                }
            }
            p += 1;
        }
        self.invalidate_cache();
        Ok(true)
    }

    fn promote_and_raise(&mut self, index: usize, count: u8) -> Result<bool, Corrupted> {
        self.to_dense()?;
        Ok(dense_raise(&mut self.buf[HEADER_LEN..], index, count))
    }

    /// `hllCount` of this value (not its cached cardinality).
    pub fn count(&self) -> Result<u64, Corrupted> {
        let (body, nul) = self.body();
        Ok(estimate(&histogram(self.encoding(), body, nul)?))
    }

    /// Every register, of a dense value.
    pub fn dense_registers(&self) -> Vec<u8> {
        let regs = &self.buf[HEADER_LEN..];
        (0..REGISTERS).map(|index| dense_get(regs, index)).collect()
    }

    /// PFDEBUG DECODE's text of a sparse value: its opcodes as read, with
    /// no validation (`z:len`, `Z:len`, `v:value,len`).
    pub fn decode(&self) -> String {
        let end = self.len();
        let mut out = Vec::new();
        let mut p = HEADER_LEN;
        while p < end {
            let op = self.buf[p];
            if is_zero(op) {
                out.push(format!("z:{}", zero_len(op)));
                p += 1;
            } else if is_xzero(op) {
                out.push(format!("Z:{}", xzero_len(op, self.buf[p + 1])));
                p += 2;
            } else {
                out.push(format!("v:{},{}", val_value(op), val_len(op)));
                p += 1;
            }
        }
        out.join(" ")
    }
}

/// The register histogram `hllCount` estimates from, of the registers
/// after a valid value's header.
fn histogram(encoding: Encoding, regs: &[u8], nul: u8) -> Result<[u32; 64], Corrupted> {
    let mut histo = [0u32; 64];
    match encoding {
        Encoding::Dense => {
            for index in 0..REGISTERS {
                histo[usize::from(dense_get(regs, index))] += 1;
            }
        }
        Encoding::Sparse => walk_sparse(regs, nul, |_, run| match run {
            Run::Zeros(len) => histo[0] += len as u32,
            Run::Values(value, len) => histo[usize::from(value)] += len as u32,
        })?,
    }
    Ok(histo)
}

/// `hllCount` of a value [`encoding_of`] accepted, read in place.
pub fn count(bytes: &[u8]) -> Result<u64, Corrupted> {
    let encoding = encoding_of(bytes).ok_or(Corrupted)?;
    Ok(estimate(&histogram(encoding, &bytes[HEADER_LEN..], 0)?))
}

/// `hllMerge`: raises each of `max` to the matching register of a value
/// [`encoding_of`] accepted, read in place.
pub fn merge(bytes: &[u8], max: &mut [u8; REGISTERS]) -> Result<(), Corrupted> {
    let regs = &bytes[HEADER_LEN..];
    match encoding_of(bytes).ok_or(Corrupted)? {
        Encoding::Dense => {
            for (index, m) in max.iter_mut().enumerate() {
                *m = (*m).max(dense_get(regs, index));
            }
            Ok(())
        }
        Encoding::Sparse => walk_sparse(regs, 0, |first, run| {
            if let Run::Values(value, len) = run {
                for m in &mut max[first..first + len] {
                    *m = (*m).max(value);
                }
            }
        }),
    }
}

/// `hllCount` of registers held one per byte (PFCOUNT of several keys).
pub fn count_registers(registers: &[u8; REGISTERS]) -> u64 {
    let mut histo = [0u32; 256];
    for &r in registers {
        histo[usize::from(r)] += 1;
    }
    let mut low = [0u32; 64];
    low.copy_from_slice(&histo[..64]);
    estimate(&low)
}

/// `hllSigma` of "New cardinality estimation algorithms for HyperLogLog
/// sketches" (Otmar Ertl, arXiv:1702.01284).
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            return z;
        }
    }
}

/// `hllTau` of the same paper. Redis's `pow(1 - x, 2)` is compiled to a
/// product, as here.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if previous == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate of a register histogram, as `hllCount`
/// computes it (`llroundl` rounds halves away from zero, as `round`).
fn estimate(histo: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histo[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// PFSELFTEST: Redis's two checks. Dense registers keep random values
/// without disturbing their neighbours; then ten million distinct
/// elements go into a dense and a sparse value at once, which must agree
/// and stay within six standard errors at each power of ten. The error
/// text (after `ERR `) when a check fails.
pub fn self_test(sparse_max_bytes: usize) -> Result<(), String> {
    let mut regs = vec![0u8; DENSE_LEN - HEADER_LEN + 1];
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (index, e) in expected.iter_mut().enumerate() {
            let r = fastrand::u8(..) & REGISTER_MAX as u8;
            *e = r;
            dense_set(&mut regs, index, r);
        }
        for (index, &e) in expected.iter().enumerate() {
            let got = dense_get(&regs, index);
            if got != e {
                return Err(format!("TESTFAILED Register {index} should be {e} but is {got}"));
            }
        }
    }

    let mut dense = Hll::new();
    dense.to_dense().map_err(|_| "TESTFAILED new value corrupted".to_string())?;
    let mut sparse = Hll::new();
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = fastrand::u64(..);
    for j in 1..=10_000_000u64 {
        let element = (j ^ seed).to_ne_bytes();
        let (index, count) = pattern(&element);
        dense_raise(&mut dense.buf[HEADER_LEN..], index, count);
        // The sparse value is always valid here.
        let _ = sparse.raise(index, count, sparse_max_bytes);
        if j != checkpoint {
            continue;
        }
        if j < (sparse_max_bytes / 2) as u64 && sparse.encoding() != Encoding::Sparse {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let card = dense.count().unwrap_or(0);
        if sparse.count().ok() != Some(card) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let error = checkpoint.abs_diff(card);
        let max_error = if j == 10 {
            1
        } else {
            (relative_error * 6.0 * checkpoint as f64).ceil() as u64
        };
        if error > max_error {
            return Err(format!("TESTFAILED Too big error. card:{checkpoint} abserr:{error}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_value_is_sparse_with_one_xzero_run() {
        let hll = Hll::new();
        assert_eq!(hll.as_bytes().len(), HEADER_LEN + 2);
        assert_eq!(encoding_of(hll.as_bytes()), Some(Encoding::Sparse));
        assert_eq!(hll.decode(), "Z:16384");
        assert_eq!(hll.count(), Ok(0));
        assert_eq!(cached_cardinality(hll.as_bytes()), Some(0));
    }

    #[test]
    fn dense_registers_keep_their_neighbours() {
        let mut regs = vec![0u8; DENSE_LEN - HEADER_LEN + 1];
        for index in 0..REGISTERS {
            dense_set(&mut regs, index, (index % 64) as u8);
        }
        for index in 0..REGISTERS {
            assert_eq!(dense_get(&regs, index), (index % 64) as u8);
        }
        assert_eq!(regs[DENSE_LEN - HEADER_LEN], 0);
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = Hll::new();
        let mut dense = Hll::new();
        dense.to_dense().unwrap();
        for i in 0..2000 {
            let e = format!("element:{i}");
            assert_eq!(sparse.add(e.as_bytes(), 3000), dense.add(e.as_bytes(), 3000));
            assert_eq!(sparse.count(), dense.count());
        }
        let mut promoted = sparse.clone();
        promoted.to_dense().unwrap();
        assert!(promoted.dense_registers() == dense.dense_registers());
    }

    #[test]
    fn a_short_sparse_value_is_corrupted() {
        // One ZERO run of 64 registers.
        let mut hll = Hll::from_bytes(b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x3f");
        assert_eq!(hll.count(), Err(Corrupted));
        assert_eq!(hll.to_dense(), Err(Corrupted));
        assert_eq!(hll.add(b"a", 3000), Err(Corrupted));
    }

    #[test]
    fn sigma_and_tau_edges() {
        assert_eq!(sigma(1.0), f64::INFINITY);
        assert_eq!(tau(0.0), 0.0);
        assert_eq!(tau(1.0), 0.0);
    }
}
