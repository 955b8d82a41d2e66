//! LZF, as Redis 7.0.15 compresses and decompresses RDB strings
//! (`src/lzf_c.c`, `src/lzf_d.c`: liblzf 3.6 with `HLOG 16`,
//! `VERY_FAST 1`, `ULTRA_FAST 0`).
//!
//! A port rather than a crate: DUMP must produce Redis's bytes, and the
//! compressor's output depends on the exact match rules (where a match may
//! end, how far the unrolled match loop runs past `maxlen`, which positions
//! are re-hashed after a match, when the output budget is exhausted). The
//! `lzf` crate's compressor differs from Redis's copy in those rules, so
//! its output is valid LZF but not always Redis's bytes. The decompressor
//! is here for symmetry and because it must reject every malformed input
//! with an error, as `lzf_decompress` does with `EINVAL` / `E2BIG`.

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

fn first(data: &[u8], ip: usize) -> u32 {
    (u32::from(data[ip]) << 8) | u32::from(data[ip + 1])
}

fn next(v: u32, data: &[u8], ip: usize) -> u32 {
    (v << 8) | u32::from(data[ip + 2])
}

fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// The hash table of one thread's compressions, kept between calls: a
/// slot belongs to the call whose number is in its high half, so a new
/// call finds every slot empty without clearing 64K of them (which cost
/// more than compressing a short string; a snapshot compresses millions).
struct Table {
    slots: Vec<u64>,
    call: u32,
}

impl Table {
    /// Starts a call: a fresh number, every slot now empty for it.
    fn next_call(&mut self) {
        self.call = self.call.wrapping_add(1);
        if self.call == 0 {
            self.slots.iter_mut().for_each(|s| *s = 0);
            self.call = 1;
        }
    }

    /// Position + 1 of the slot's entry, 0 when empty.
    fn get(&self, slot: usize) -> u32 {
        let v = self.slots[slot];
        if (v >> 32) as u32 == self.call { v as u32 } else { 0 }
    }

    fn set(&mut self, slot: usize, value: u32) {
        self.slots[slot] = (u64::from(self.call) << 32) | u64::from(value);
    }
}

thread_local! {
    static TABLE: std::cell::RefCell<Table> = std::cell::RefCell::new(Table { slots: vec![0; HSIZE], call: 0 });
}

/// `lzf_compress(input, input.len(), out, out_len)`: the compressed bytes,
/// or None when they would not fit in `out_len` bytes (Redis then stores
/// the string as it is).
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    TABLE.with(|table| {
        let mut table = table.borrow_mut();
        table.next_call();
        compress_with(input, out_len, &mut table)
    })
}

fn compress_with(input: &[u8], out_len: usize, htab: &mut Table) -> Option<Vec<u8>> {
    let in_len = input.len();
    if in_len == 0 || out_len == 0 {
        return None;
    }
    // Slots hold position + 1; 0 is an empty slot (Redis's NULL pointer:
    // its table is uninitialised and guarded by the same range checks).
    // Three bytes of slack: the tail loop writes up to three bytes past
    // the last check, as in C.
    let mut out = vec![0u8; out_len + 3];
    let out_end = out_len;
    let mut op: usize = 1; // start run
    let mut lit: usize = 0;
    let mut ip: usize = 0;
    if in_len < 3 {
        // The main loop never runs; only the tail below.
        return finish(input, out, out_end, op, lit, ip);
    }
    let mut hval = first(input, ip);
    while ip < in_len - 2 {
        hval = next(hval, input, ip);
        let slot = idx(hval);
        let reference = htab.get(slot);
        htab.set(slot, ip as u32 + 1);
        let matched = reference != 0 && {
            let r = reference as usize - 1;
            let off = ip - r - 1;
            off < MAX_OFF && r > 0 && input[r + 2] == input[ip + 2] && input[r] == input[ip] && input[r + 1] == input[ip + 1]
        };
        if matched {
            let r = reference as usize - 1;
            let off = ip - r - 1;
            let mut len: usize = 2;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            if op + 3 + 1 >= out_end && op - usize::from(lit == 0) + 3 + 1 >= out_end {
                return None;
            }
            out[op - lit - 1] = (lit as u8).wrapping_sub(1); // stop run
            op -= usize::from(lit == 0); // undo run if length is zero
            'search: {
                if maxlen > 16 {
                    for _ in 0..16 {
                        len += 1;
                        if input[r + len] != input[ip + len] {
                            break 'search;
                        }
                    }
                }
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2; // len is now #octets - 1
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1; // start run
            ip += len + 1;
            if ip >= in_len - 2 {
                break;
            }
            ip -= 2;
            hval = first(input, ip);
            hval = next(hval, input, ip);
            htab.set(idx(hval), ip as u32 + 1);
            ip += 1;
            hval = next(hval, input, ip);
            htab.set(idx(hval), ip as u32 + 1);
            ip += 1;
        } else {
            if op >= out_end {
                return None;
            }
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                out[op - lit - 1] = (lit as u8).wrapping_sub(1);
                lit = 0;
                op += 1;
            }
        }
    }
    finish(input, out, out_end, op, lit, ip)
}

fn finish(input: &[u8], mut out: Vec<u8>, out_end: usize, mut op: usize, mut lit: usize, mut ip: usize) -> Option<Vec<u8>> {
    if op + 3 > out_end {
        return None;
    }
    while ip < input.len() {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit as u8).wrapping_sub(1);
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1); // end run
    op -= usize::from(lit == 0);
    out.truncate(op);
    Some(out)
}

/// `lzf_decompress` into exactly `out_len` bytes: None on a malformed
/// stream, one that would write past `out_len`, or one that produces fewer
/// bytes (Redis checks the returned length against the stored one).
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < (1 << 5) {
            let run = ctrl + 1;
            if out.len() + run > out_len || ip + run > input.len() {
                return None;
            }
            out.extend_from_slice(&input[ip..ip + run]);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip)? as usize;
                ip += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(ip)? as usize + 1;
            ip += 1;
            if out.len() + len + 2 > out_len || back > out.len() {
                return None;
            }
            let from = out.len() - back;
            for i in 0..len + 2 {
                let b = out[from + i];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitive_text_round_trips_smaller() {
        let text = b"hello hello hello hello hello hello hello".repeat(5);
        let packed = compress(&text, text.len() - 4).expect("compressible");
        assert!(packed.len() < text.len());
        assert_eq!(decompress(&packed, text.len()).unwrap(), text);
    }

    #[test]
    fn redis_compresses_a_run_of_one_byte_like_this() {
        // redis-server 7.0.15: SET k <30 x 'a'>, DUMP k holds C3 09 1E
        // and then these nine bytes.
        let text = [b'a'; 30];
        assert_eq!(compress(&text, 26).unwrap(), b"\x01aa\xe0\x11\x00\x01aa");
    }

    #[test]
    fn incompressible_data_does_not_fit() {
        let text: Vec<u8> = (0..64u8).collect();
        assert!(compress(&text, text.len() - 4).is_none());
    }

    proptest::proptest! {
        #[test]
        fn whatever_compresses_decompresses_to_itself(
            data in proptest::collection::vec(proptest::prelude::prop_oneof![0u8..4, proptest::prelude::any::<u8>()], 1..3000)
        ) {
            if let Some(packed) = compress(&data, data.len()) {
                proptest::prop_assert!(packed.len() <= data.len());
                proptest::prop_assert_eq!(decompress(&packed, data.len()), Some(data));
            }
        }

        #[test]
        fn any_bytes_decompress_without_panicking(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), len in 0usize..1000) {
            let _ = decompress(&data, len);
        }
    }

    #[test]
    fn malformed_streams_are_refused() {
        assert!(decompress(&[0x05, b'a'], 6).is_none()); // literal past input
        assert!(decompress(&[0x20, 0x00], 3).is_none()); // reference before start
        assert!(decompress(&[0x00, b'a'], 2).is_none()); // too short
        assert!(decompress(&[0xe0], 10).is_none()); // truncated
    }
}
