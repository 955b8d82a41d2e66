//! `maxmemory` and its eviction policies, as Redis's `evict.c`.
//!
//! Before each command (Redis's `processCommand` → `performEvictions`),
//! when used memory is over `maxmemory`, keys are removed until it is not:
//!
//! - `allkeys-lru` / `volatile-lru`: the key idle longest, `allkeys-lfu` /
//!   `volatile-lfu`: the least frequently used, `volatile-ttl`: the one
//!   whose deadline comes first, each chosen as Redis chooses, from
//!   `maxmemory-samples` keys sampled per database into a pool of the 16
//!   best candidates kept across rounds;
//! - `allkeys-random` / `volatile-random`: a random key, taking the
//!   databases in turn;
//! - `volatile-*` only ever remove keys with a deadline;
//! - `noeviction` removes nothing.
//!
//! Each removal is a `DEL` in the effect stream, an `evicted` keyspace
//! event, an invalidation for tracking clients and a change for WATCH,
//! and counts in INFO `evicted_keys`. When nothing (more) can be removed
//! the command is refused with OOM if it may grow memory (`deny-oom`).
//!
//! Frequencies (LFU) are Redis's: a logarithmic 8-bit counter per key with
//! `lfu-log-factor`, decaying by one per `lfu-decay-time` minutes, kept
//! where an LRU policy keeps the key's last access (see
//! `db::keyspace::AccessClock`).

use bytes::Bytes;

use super::State;

/// `maxmemory-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    NoEviction,
}

impl Policy {
    /// From the parameter's value.
    pub fn named(name: &str) -> Policy {
        match name {
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            "allkeys-lru" => Policy::AllkeysLru,
            "allkeys-lfu" => Policy::AllkeysLfu,
            "allkeys-random" => Policy::AllkeysRandom,
            _ => Policy::NoEviction,
        }
    }

    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::VolatileLfu | Policy::AllkeysLfu)
    }

    fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru | Policy::VolatileLfu | Policy::VolatileRandom | Policy::VolatileTtl
        )
    }

    fn random(self) -> bool {
        matches!(self, Policy::VolatileRandom | Policy::AllkeysRandom)
    }
}

/// Redis's EVPOOL_SIZE.
const POOL_SIZE: usize = 16;

/// A candidate for eviction: the higher `score`, the better to evict.
#[derive(Debug, Clone)]
struct Candidate {
    score: u64,
    db: usize,
    key: Bytes,
}

/// Eviction's state across commands: the candidate pool, and the
/// database random eviction takes next.
#[derive(Debug, Default)]
pub struct Eviction {
    pool: Vec<Candidate>,
    next_db: usize,
    /// Keys evicted since start (INFO `evicted_keys`).
    pub evicted: u64,
    /// Keys were evicted before the command about to run: their events
    /// and invalidations go out ahead of its reply.
    pub before_command: bool,
    /// CONFIG SET lowered `maxmemory` under what is used: keys are evicted
    /// once the command (or the transaction it is in) is over, as Redis's
    /// eviction timer does, not in the middle of it.
    pub due: bool,
}

impl State {
    /// Memory `maxmemory` does not count: the replicas' output and the
    /// append-only file's buffer (Redis's `freeMemoryGetNotCountedMemory`,
    /// INFO `mem_not_counted_for_evict`).
    pub fn not_counted_memory(&self) -> u64 {
        self.replica_buffers() + self.aof.as_ref().map_or(0, |a| a.buffer_length()) as u64
    }

    /// Whether used memory is over `maxmemory`.
    fn over_maxmemory(&self) -> Option<u64> {
        let used = crate::memory::used_bytes().saturating_sub(self.not_counted_memory());
        (self.runtime.maxmemory > 0 && used > self.runtime.maxmemory).then(|| used - self.runtime.maxmemory)
    }

    /// Redis's `performEvictions`: removes keys by `maxmemory-policy`
    /// until used memory is within `maxmemory`. False when it is still
    /// over (no key the policy may remove is left, or `noeviction`).
    pub fn perform_evictions(&mut self) -> bool {
        // Redis's `isSafeToPerformEvictions`: not while loading, nor while
        // clients are paused (the dataset is held still).
        if self.loading.is_some() || self.async_loading() || self.paused().is_some() {
            return true;
        }
        // A replica leaves eviction to its master (its DELs come in the
        // stream) unless `replica-ignore-maxmemory no`.
        if self.master.is_some() && self.params.value("replica-ignore-maxmemory") != Some("no") {
            return true;
        }
        let Some(to_free) = self.over_maxmemory() else { return true };
        let policy = self.runtime.maxmemory_policy;
        if policy == Policy::NoEviction {
            return false;
        }
        let mut freed: u64 = 0;
        let mut evicted_any = false;
        let ok = loop {
            // Done once the removals freed what was over (Redis's loop):
            // memory the evictions' events and invalidations take is not
            // measured again here, or they would evict more keys, whose
            // invalidations would take more (the next command's check
            // sees it).
            if freed >= to_free {
                break true;
            }
            let Some((db, key)) = self.eviction_candidate(policy) else {
                break false;
            };
            if let Some(bytes) = self.dbs[db].evict(&key, crate::memory::used_bytes) {
                freed += bytes;
                self.eviction.evicted += 1;
                evicted_any = true;
            }
        };
        if evicted_any {
            // The evictions are replayed (as DELs) before the command.
            self.flush_effects();
            self.eviction.before_command = true;
        }
        ok
    }

    /// The next key to evict, as `policy` chooses.
    fn eviction_candidate(&mut self, policy: Policy) -> Option<(usize, Bytes)> {
        if policy.random() {
            for _ in 0..self.dbs.len() {
                let db = self.eviction.next_db % self.dbs.len();
                self.eviction.next_db = self.eviction.next_db.wrapping_add(1);
                if let Some(position) = self.dbs[db].eviction_sample(policy.volatile()) {
                    return Some((db, self.dbs[db].eviction_facts(position).0));
                }
            }
            return None;
        }
        loop {
            let mut sampled = false;
            let samples = self.runtime.maxmemory_samples.max(1);
            for db in 0..self.dbs.len() {
                let candidates = if policy.volatile() {
                    self.dbs[db].deadlines_len()
                } else {
                    self.dbs[db].len()
                };
                if candidates == 0 {
                    continue;
                }
                sampled = true;
                for _ in 0..samples.min(candidates) {
                    let Some(position) = self.dbs[db].eviction_sample(policy.volatile()) else {
                        break;
                    };
                    let (key, deadline, idle_secs, freq) = self.dbs[db].eviction_facts(position);
                    let score = match policy {
                        Policy::AllkeysLru | Policy::VolatileLru => idle_secs * 1000,
                        Policy::AllkeysLfu | Policy::VolatileLfu => 255 - u64::from(freq),
                        Policy::VolatileTtl => u64::MAX - deadline.unwrap_or(u64::MAX),
                        _ => 0,
                    };
                    self.eviction_pool_insert(Candidate { score, db, key });
                }
            }
            if !sampled {
                return None;
            }
            // The best candidate still there (Redis's pool keeps keys
            // between rounds, some of them gone since).
            while let Some(best) = self.eviction.pool.pop() {
                if self.dbs[best.db].contains_key(&best.key) {
                    return Some((best.db, best.key));
                }
            }
        }
    }

    /// Redis's `evictionPoolPopulate` insertion: the pool is ordered by
    /// score, best last, and holds at most [`POOL_SIZE`] distinct keys.
    fn eviction_pool_insert(&mut self, candidate: Candidate) {
        let pool = &mut self.eviction.pool;
        if pool.iter().any(|c| c.db == candidate.db && c.key == candidate.key) {
            return;
        }
        let at = pool.partition_point(|c| c.score < candidate.score);
        if pool.len() == POOL_SIZE {
            if at == 0 {
                // Worse than everything held.
                return;
            }
            pool.remove(0);
            pool.insert(at - 1, candidate);
        } else {
            pool.insert(at, candidate);
        }
    }
}
