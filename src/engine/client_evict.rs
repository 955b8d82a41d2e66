//! Client eviction (`maxmemory-clients`, Redis 7.0): when the memory the
//! normal and pub/sub clients hold together reaches the limit, the clients
//! holding the most are closed, largest first, until it is below it again.
//!
//! A client's memory is what CLIENT LIST shows as `tot-mem`
//! ([`Client::memory_usage`]): its read buffer, unwritten output, a
//! transaction's queued commands, its watched keys, subscriptions and
//! tracking prefixes. Clients that set CLIENT NO-EVICT count towards the
//! total but are never closed; replicas neither count nor are closed.
//!
//! The total is kept up to date cheaply: a client's change is added when
//! it is accounted ([`State::account_client`], after each of its batches
//! and each read of its connection), and the cron, CONFIG SET and every
//! eviction recompute it over all clients. Only when the running total
//! reaches the limit are the clients ranked, so a server under the limit
//! pays one subtraction per batch, and nothing at all without a limit.
//! Redis ranks clients in power-of-two memory buckets; keylock ranks them
//! exactly, which evicts the same clients whenever their sizes differ by
//! a bucket.

use super::{Client, ClientId, State};

/// Redis's floor on the limit (`getClientEvictionLimit`): a smaller
/// setting could leave no client able to talk to the server.
const MIN_LIMIT: usize = 128 * 1024;

/// The running total of client memory and the eviction count.
#[derive(Debug, Default)]
pub struct ClientMemory {
    /// What the accounted clients hold, as last accounted.
    total: usize,
    /// Clients other than the one running a batch that were sent output
    /// (messages, invalidations, MONITOR lines): accounted after it.
    touched: std::cell::RefCell<Vec<ClientId>>,
    /// INFO's `evicted_clients`.
    pub evicted: u64,
}

impl State {
    /// The eviction limit in bytes (0: no eviction): `maxmemory-clients`
    /// as bytes, or as a percentage of `maxmemory`, never below 128 KB.
    pub fn client_eviction_limit(&self) -> usize {
        let setting = self.runtime.maxmemory_clients;
        let limit = if setting < 0 && self.runtime.maxmemory > 0 {
            (self.runtime.maxmemory as f64 * -(setting as f64) / 100.0) as usize
        } else if setting > 0 {
            setting as usize
        } else {
            return 0;
        };
        limit.max(MIN_LIMIT)
    }

    /// Whether `c` counts towards client memory: normal and pub/sub
    /// clients, not replicas.
    fn counts_for_eviction(&self, c: &Client) -> bool {
        !self.replicas.ids.contains(&c.id)
    }

    /// Accounts `c`'s memory now (after its batch, or a read of its
    /// connection) and evicts clients if the total reached the limit.
    /// `c` itself is one of them (it is not in `clients` while its batch
    /// runs): true if it was closed.
    pub fn account_client(&mut self, c: &mut Client) -> bool {
        let limit = self.client_eviction_limit();
        if limit == 0 || !self.counts_for_eviction(c) {
            return false;
        }
        let now = c.memory_usage();
        self.client_memory.total = self.client_memory.total.saturating_sub(c.accounted_memory) + now;
        c.accounted_memory = now;
        self.client_memory.total >= limit && self.evict_clients(Some(c)).contains(&c.id)
    }

    /// [`State::account_client`] for a connected client not running a
    /// batch (its connection read more).
    pub fn account_client_by_id(&mut self, id: ClientId) {
        if self.client_eviction_limit() == 0 {
            return;
        }
        if let Some(mut c) = self.clients.remove(&id) {
            self.account_client(&mut c);
            self.clients.insert(id, c);
        }
    }

    /// Notes that `c` was sent output outside its own batch (see
    /// `ClientMemory::touched`).
    pub fn note_output_sent(&self, c: &Client) {
        if self.runtime.maxmemory_clients != 0 {
            self.client_memory.touched.borrow_mut().push(c.id);
        }
    }

    /// Accounts the clients sent output since the last call.
    pub fn account_touched_clients(&mut self) {
        let mut touched = std::mem::take(&mut *self.client_memory.touched.borrow_mut());
        if touched.is_empty() {
            return;
        }
        touched.sort_unstable();
        touched.dedup();
        for id in touched {
            self.account_client_by_id(id);
        }
    }

    /// A client is gone: its memory leaves the total.
    pub fn forget_client_memory(&mut self, c: &Client) {
        self.client_memory.total = self.client_memory.total.saturating_sub(c.accounted_memory);
    }

    /// Redis's `evictClients`: recounts every client's memory (with
    /// `current`, the client whose batch runs, if any) and closes the
    /// largest evictable ones while the total is at or over the limit.
    /// Returns the ids of the clients closed.
    pub fn evict_clients(&mut self, mut current: Option<&mut Client>) -> Vec<ClientId> {
        let limit = self.client_eviction_limit();
        let mut sizes: Vec<(usize, ClientId, bool)> = Vec::new();
        let mut total = 0;
        let replicas = &self.replicas.ids;
        let counted = self.clients.values_mut().map(|c| &mut **c).chain(current.as_deref_mut());
        // Only normal and pub/sub clients are evicted (Redis's
        // `clientEvictionAllowed`), not replicas nor the master's client.
        for c in counted.filter(|c| !replicas.contains(&c.id) && !c.is_master) {
            let memory = if c.outbox.close_request() == super::CloseRequest::Now {
                0
            } else {
                c.memory_usage()
            };
            c.accounted_memory = memory;
            total += memory;
            sizes.push((memory, c.id, !c.no_evict));
        }
        let mut evicted = Vec::new();
        if limit > 0 && total >= limit {
            sizes.sort_by_key(|&(memory, _, _)| std::cmp::Reverse(memory));
            let now_ms = self.clock.now_ms();
            for &(memory, id, evictable) in &sizes {
                if total < limit {
                    break;
                }
                if !evictable || memory == 0 {
                    continue;
                }
                let c = match current.as_deref_mut() {
                    Some(c) if c.id == id => c,
                    _ => match self.clients.get_mut(&id) {
                        Some(c) => &mut **c,
                        None => continue,
                    },
                };
                crate::log::notice(format_args!("Evicting client: {}", c.info_line(now_ms)));
                c.outbox.close_now();
                c.accounted_memory = 0;
                total -= memory;
                self.client_memory.evicted += 1;
                evicted.push(id);
            }
            if total >= limit {
                crate::log::warning(format_args!("Over client maxmemory after evicting all evictable clients"));
            }
        }
        self.client_memory.total = total;
        evicted
    }
}
