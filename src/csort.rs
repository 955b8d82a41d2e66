//! The two sorts redis-server's results come out of, reproduced step for
//! step so that equal elements (and comparators that are not a total
//! order, such as a NaN distance) end up where Redis puts them:
//!
//! - [`qsort`]: glibc's `qsort` as Debian's redis-server 7.0.15 runs it
//!   (glibc 2.36): a top-down merge sort (`msort_with_tmp`), stable,
//!   taking the left element while `cmp(left, right) <= 0`.
//! - [`pqsort`]: Redis's own partial quicksort (`pqsort.c`, Bentley &
//!   McIlroy's with ranges outside `[lrange, rrange]` left unsorted),
//!   used by GEORADIUS with COUNT and by SORT with BY and LIMIT.
//!
//! Comparators return C's convention: negative, zero or positive.

/// glibc 2.36's `qsort`.
pub fn qsort<T: Clone>(items: &mut [T], cmp: &mut impl FnMut(&T, &T) -> i32) {
    if items.len() <= 1 {
        return;
    }
    let mut tmp: Vec<T> = Vec::with_capacity(items.len());
    msort(items, &mut tmp, cmp);
}

fn msort<T: Clone>(b: &mut [T], tmp: &mut Vec<T>, cmp: &mut impl FnMut(&T, &T) -> i32) {
    let n = b.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    msort(&mut b[..n1], tmp, cmp);
    msort(&mut b[n1..], tmp, cmp);
    tmp.clear();
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if cmp(&b[i], &b[j]) <= 0 {
            tmp.push(b[i].clone());
            i += 1;
        } else {
            tmp.push(b[j].clone());
            j += 1;
        }
    }
    // What is left of the left half goes after the merged part; what is
    // left of the right half is already in place.
    tmp.extend_from_slice(&b[i..n1]);
    let merged = tmp.len();
    b[..merged].clone_from_slice(tmp);
}

/// Redis's `pqsort(a, n, es, cmp, lrange, rrange)`: sorts enough of
/// `items` that positions `lrange..=rrange` hold what a full sort would
/// put there. The range may be empty or start before the slice (SORT's
/// `LIMIT 0 0` asks for `0..=-1`); the C code compares the pointers it
/// makes of them, which is what these signed indexes reproduce.
pub fn pqsort<T>(items: &mut [T], cmp: &mut impl FnMut(&T, &T) -> i32, lrange: i64, rrange: i64) {
    pqsort_part(items, 0, items.len(), cmp, lrange, rrange);
}

/// `med3` over indexes.
fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &mut impl FnMut(&T, &T) -> i32) -> usize {
    if cmp(&v[a], &v[b]) < 0 {
        if cmp(&v[b], &v[c]) < 0 {
            b
        } else if cmp(&v[a], &v[c]) < 0 {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) > 0 {
        b
    } else if cmp(&v[a], &v[c]) < 0 {
        a
    } else {
        c
    }
}

/// `vecswap(a, b, n)`: swaps `n` elements from `a` with `n` from `b`.
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for k in 0..n {
        v.swap(a + k, b + k);
    }
}

/// `_pqsort` on `v[start..start + n]`; `lrange` and `rrange` are indexes
/// into the whole slice, as the C code's pointers are.
fn pqsort_part<T>(v: &mut [T], mut a: usize, mut n: usize, cmp: &mut impl FnMut(&T, &T) -> i32, lrange: i64, rrange: i64) {
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && cmp(&v[pl - 1], &v[pl]) > 0 {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        // `pc` and `pd` may step below `a` in C only when n is 1; here n >= 7.
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let r = cmp(&v[pb], &v[a]);
                if r > 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = cmp(&v[pc], &v[a]);
                if r < 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        // Only parts that overlap [lrange, rrange] are sorted further.
        let overlaps = |start: usize, len: usize| {
            let (start, end) = (start as i64, (start + len) as i64);
            !((lrange < start && rrange < start) || (lrange >= end && rrange >= end))
        };
        let left = pb - pa;
        if left > 1 && overlaps(a, left) {
            pqsort_part(v, a, left, cmp, lrange, rrange);
        }
        let right = pd - pc;
        if right > 1 {
            a = pn - right;
            n = right;
            if overlaps(a, n) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_key(a: &(i32, usize), b: &(i32, usize)) -> i32 {
        a.0.cmp(&b.0) as i32
    }

    #[test]
    fn qsort_is_stable() {
        let mut v: Vec<(i32, usize)> = [3, 1, 3, 2, 1, 3, 0].iter().enumerate().map(|(i, &k)| (k, i)).collect();
        qsort(&mut v, &mut by_key);
        assert_eq!(v, [(0, 6), (1, 1), (1, 4), (2, 3), (3, 0), (3, 2), (3, 5)]);
    }

    #[test]
    fn pqsort_sorts_the_requested_range() {
        let mut seed = 12345u64;
        for n in [1usize, 5, 7, 8, 40, 41, 100, 500] {
            let mut v: Vec<(i32, usize)> = (0..n)
                .map(|i| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (((seed >> 33) % 50) as i32, i)
                })
                .collect();
            let mut full: Vec<i32> = v.iter().map(|x| x.0).collect();
            full.sort();
            let (l, r) = (n / 3, (n / 2).max(n / 3));
            pqsort(&mut v, &mut by_key, l as i64, r as i64);
            let got: Vec<i32> = v[l..=r].iter().map(|x| x.0).collect();
            assert_eq!(got, full[l..=r], "n={n}");
        }
    }
}
