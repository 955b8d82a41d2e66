//! A vector stored in fixed-size chunks, for the key table's columns.
//!
//! A `Vec` grows by doubling: each growth copies the whole table (holding
//! the old and the new at once) and leaves up to half of it unused, and
//! what it holds changes in steps as large as the table. Near `maxmemory`
//! that is the difference between Redis's behaviour and a wrong one: a
//! table that wants to double is over the limit at once, and eviction,
//! whose removals free nothing until the table shrinks, then removes keys
//! by the hundred thousand. Here memory is taken and given back one chunk
//! at a time (a few kilobytes), as the keys come and go, like Redis's
//! per-key allocations; nothing is ever copied to grow; and a position is
//! still an index (`chunk = p / N`, `slot = p % N`).
//!
//! Removal is `swap_remove` (the last element fills the hole), so the
//! elements stay dense: every chunk but the last in use is full. One empty
//! chunk is kept past the last in use, so that a table going back and
//! forth across a chunk boundary does not allocate and free each time.

/// Elements `0..len` in chunks of `N`.
pub struct Chunked<T, const N: usize> {
    /// Each chunk has capacity `N` and is never grown; all but the last
    /// one holding elements are full; at most one empty chunk follows it.
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T, const N: usize> Default for Chunked<T, N> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T, const N: usize> Chunked<T, N> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements there is room for without allocating.
    pub fn capacity(&self) -> usize {
        self.chunks.len() * N
    }

    pub fn get(&self, position: usize) -> Option<&T> {
        self.chunks.get(position / N)?.get(position % N)
    }

    pub fn push(&mut self, value: T) {
        let chunk = self.len / N;
        if chunk == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(N));
        }
        self.chunks[chunk].push(value);
        self.len += 1;
    }

    /// Removes the element at `position`, the last element taking its
    /// place. Panics if `position` is out of bounds, as `Vec`'s does.
    pub fn swap_remove(&mut self, position: usize) -> T {
        assert!(position < self.len, "swap_remove index {position} out of bounds ({})", self.len);
        let last = self.chunks[(self.len - 1) / N]
            .pop()
            .expect("the last chunk holds the last element");
        self.len -= 1;
        // Free the chunk past the spare one: the table shrank a chunk.
        let in_use = self.len.div_ceil(N);
        if self.chunks.len() > in_use + 1 {
            self.chunks.truncate(in_use + 1);
        }
        if position == self.len {
            last
        } else {
            std::mem::replace(&mut self[position], last)
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T, const N: usize> std::ops::Index<usize> for Chunked<T, N> {
    type Output = T;

    fn index(&self, position: usize) -> &T {
        &self.chunks[position / N][position % N]
    }
}

impl<T, const N: usize> std::ops::IndexMut<usize> for Chunked<T, N> {
    fn index_mut(&mut self, position: usize) -> &mut T {
        &mut self.chunks[position / N][position % N]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_vec_under_push_and_swap_remove() {
        let mut chunked: Chunked<u32, 4> = Chunked::default();
        let mut model = Vec::new();
        for round in 0..20_000u32 {
            if model.is_empty() || fastrand::u8(..3) > 0 && model.len() < 100 {
                chunked.push(round);
                model.push(round);
            } else {
                let at = fastrand::usize(..model.len());
                assert_eq!(chunked.swap_remove(at), model.swap_remove(at));
            }
            assert_eq!(chunked.len(), model.len());
            if round % 97 == 0 {
                assert!(chunked.iter().copied().eq(model.iter().copied()));
                for (p, v) in model.iter().enumerate() {
                    assert_eq!(chunked[p], *v);
                    assert_eq!(chunked.get(p), Some(v));
                }
                assert_eq!(chunked.get(model.len()), None);
            }
            // Never more than one chunk beyond what the elements need.
            assert!(chunked.capacity() <= (model.len().div_ceil(4) + 1) * 4);
        }
    }

    #[test]
    fn memory_follows_the_length_a_chunk_at_a_time() {
        let mut chunked: Chunked<u64, 8> = Chunked::default();
        for i in 0..100 {
            chunked.push(i);
        }
        assert_eq!(chunked.capacity(), 104);
        while chunked.len() > 10 {
            chunked.swap_remove(0);
        }
        // Two chunks in use and one spare.
        assert_eq!(chunked.capacity(), 24);
        while !chunked.is_empty() {
            chunked.swap_remove(chunked.len() - 1);
        }
        assert_eq!(chunked.capacity(), 8);
    }
}
