//! Client-side caching: CLIENT TRACKING, the keys each client may cache,
//! and the invalidation messages sent when they change (Redis's
//! `tracking.c`).
//!
//! - A tracking client's read-only commands remember their keys for it
//!   (`State::call`, after the command, as Redis's `call()` does); a
//!   script's reads remember the keys the script declared, for its caller.
//! - Modifications reach this module through the key-change stream of
//!   `db::events` (the one WATCH and notifications read), drained after
//!   every command: each key modified is forgotten and its clients are
//!   sent `invalidate`. BCAST clients collect the keys under their
//!   prefixes and get them once per event-loop turn (after a client's
//!   batch, and after the cron), as Redis's `beforeSleep` sends them.
//! - An invalidation for the client whose command runs waits until its
//!   reply is written (Redis's `tracking_pending_keys`); anyone else gets
//!   it at once.
//!
//! The table is global, not per database, as Redis's: a key name stands
//! for that name in every database. Clients' ids are kept in the order
//! Redis's radix tree holds them (the id's native bytes, little-endian),
//! so messages go out in Redis's order.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;

use super::{Client, EncodedOnce, State};
use crate::commands::table::Command;
use crate::db::ClientId;
use crate::reply::Reply;

/// The channel RESP2 clients receive invalidations on (through REDIRECT).
pub const CHANNEL: &str = "__redis__:invalidate";

/// One client's tracking mode (Redis's `CLIENT_TRACKING_*` flags).
#[derive(Clone, Debug, Default)]
pub struct ClientTracking {
    /// Where messages go; 0 for the client itself.
    pub redirect: ClientId,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING yes (OPTIN) or no (OPTOUT) was given for the next command.
    pub caching: bool,
    /// The client redirected to went away.
    pub broken_redirect: bool,
    /// BCAST prefixes, sorted.
    pub prefixes: BTreeSet<Bytes>,
}

impl ClientTracking {
    /// Whether the command just run caches its keys (OPTIN needs CLIENT
    /// CACHING yes, OPTOUT is stopped by CLIENT CACHING no).
    fn caches(&self) -> bool {
        !((self.optin && !self.caching) || (self.optout && self.caching))
    }
}

/// What an invalidation says.
#[derive(Clone, Debug)]
pub enum Invalidation {
    Keys(Vec<Bytes>),
    /// Every key (after a flush): a null.
    All,
}

/// Clients of one BCAST prefix and the keys under it modified since the
/// last broadcast, each with who modified it last (0: nobody's command).
#[derive(Debug, Default)]
struct Prefix {
    keys: BTreeMap<Bytes, ClientId>,
    clients: BTreeSet<ClientId>,
}

/// The server's tracking state.
#[derive(Debug, Default)]
pub struct Tracking {
    /// Some client ever enabled tracking (Redis's `TrackingTable != NULL`).
    pub enabled: bool,
    /// Clients with tracking on (INFO `tracking_clients`).
    pub clients: usize,
    /// Key -> clients that may cache it (ids in radix order, see [`order`]).
    table: HashMap<Bytes, BTreeSet<u64>, ahash::RandomState>,
    /// Ids across the whole table (INFO `tracking_total_items`).
    total_items: u64,
    prefixes: BTreeMap<Bytes, Prefix>,
    /// Invalidations owed to the client whose command runs, sent after its
    /// reply: (client, message).
    pending: Vec<(ClientId, Invalidation)>,
    /// Rounds in a row `tracking-table-max-keys` could not be met.
    eviction_rounds: u32,
    /// Invalidations for the running client go ahead of its reply (keys
    /// evicted before its command ran), not after it.
    pub ahead_of_reply: bool,
}

/// Redis's radix tree orders ids by their native (little-endian) bytes.
fn order(id: ClientId) -> u64 {
    id.to_le_bytes().iter().fold(0u64, |acc, b| (acc << 8) | *b as u64)
}

fn unorder(key: u64) -> ClientId {
    u64::from_le_bytes(key.to_be_bytes())
}

impl Tracking {
    pub fn total_keys(&self) -> usize {
        self.table.len()
    }

    pub fn total_items(&self) -> u64 {
        self.total_items
    }

    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }

    /// Forgets every key remembered (the clients that cached them are
    /// going), and the keys BCAST prefixes collected.
    pub fn forget_keys(&mut self) {
        self.table.clear();
        self.total_items = 0;
        for prefix in self.prefixes.values_mut() {
            prefix.keys.clear();
        }
        self.pending.clear();
    }

    /// Remembers `keys` as cached by client `id`.
    fn remember(&mut self, id: ClientId, keys: impl IntoIterator<Item = Bytes>) {
        for key in keys {
            if self.table.entry(key).or_default().insert(order(id)) {
                self.total_items += 1;
            }
        }
    }
}

/// The keys a read-only command names (Redis's `getKeysFromCommand`),
/// found as COMMAND GETKEYS finds them: Redis's key specs, or its own key
/// finder for the commands whose specs cannot tell.
fn command_keys(cmd: &Command, argv: &[Bytes]) -> Vec<Bytes> {
    crate::commands::defs::lookup(&cmd.full_name)
        .map(|def| def.keys_in(argv).into_iter().filter_map(|(i, _)| argv.get(i).cloned()).collect())
        .unwrap_or_default()
}

impl State {
    /// CLIENT TRACKING on for `client` with `mode` (Redis's `enableTracking`):
    /// prefixes are added to those it has.
    pub fn enable_tracking(&mut self, client: &mut Client, mut mode: ClientTracking, prefixes: Vec<Bytes>) {
        let old = client.tracking.take();
        if old.is_none() {
            self.tracking.clients += 1;
        }
        if !self.tracking.enabled {
            self.tracking.enabled = true;
            self.key_events.record_modifications();
        }
        if let Some(old) = old {
            mode.caching = old.caching;
            mode.prefixes = old.prefixes;
        }
        if mode.bcast {
            let all = if prefixes.is_empty() { vec![Bytes::new()] } else { prefixes };
            for prefix in all {
                let entry = self.tracking.prefixes.entry(prefix.clone()).or_default();
                if entry.clients.insert(client.id) {
                    mode.prefixes.insert(prefix);
                }
            }
        }
        client.tracking = Some(Box::new(mode));
    }

    /// CLIENT TRACKING off, RESET, or a client gone (Redis's
    /// `disableTracking`): its ids stay in the table until their keys
    /// change, as Redis leaves them.
    pub fn disable_tracking(&mut self, client: &mut Client) {
        let Some(mode) = client.tracking.take() else { return };
        for prefix in &mode.prefixes {
            if let Some(state) = self.tracking.prefixes.get_mut(prefix) {
                state.clients.remove(&client.id);
                if state.clients.is_empty() {
                    self.tracking.prefixes.remove(prefix);
                }
            }
        }
        self.tracking.clients -= 1;
    }

    /// After a read-only command ran (Redis's `call()` →
    /// `trackingRememberKeys`): its keys are remembered for the client, or
    /// for a script's caller the keys the script declared.
    pub fn remember_tracked_keys(&mut self, client: &Client, cmd: &Command, argv: &[Bytes]) {
        let Some(mode) = client.tracking.as_deref() else { return };
        if mode.bcast || !mode.caches() || cmd.spec.has(crate::commands::table::flag::PUBSUB) {
            return;
        }
        match client.acting_for {
            Some(caller) => self.tracking.remember(caller, client.script_keys.iter().cloned()),
            None => {
                if matches!(cmd.full_name.as_str(), "eval_ro" | "evalsha_ro" | "fcall_ro") {
                    return;
                }
                self.tracking.remember(client.id, command_keys(cmd, argv))
            }
        }
    }

    /// A key changed (Redis's `trackingInvalidateKey`): BCAST prefixes
    /// collect it (`bcast`), and every client that may cache it is told
    /// and forgotten for it. `modifier` is the client whose command
    /// changed it (for BCAST's NOLOOP); `current` the client running.
    pub(super) fn invalidate_key(&mut self, current: Option<&mut Client>, key: &Bytes, bcast: bool, modifier: ClientId) {
        if !self.tracking.enabled {
            return;
        }
        if bcast && !self.tracking.prefixes.is_empty() {
            for (prefix, state) in self.tracking.prefixes.iter_mut() {
                if key.starts_with(prefix) {
                    state.keys.insert(key.clone(), modifier);
                }
            }
        }
        let Some(ids) = self.tracking.table.remove(key) else { return };
        self.tracking.total_items -= ids.len() as u64;
        let mut current = current;
        for id in ids.into_iter().map(unorder) {
            let is_current = current.as_deref().is_some_and(|c| c.holds_for(id));
            let mode = if is_current {
                current.as_deref().and_then(|c| c.tracking.as_deref())
            } else {
                self.clients.get(&id).and_then(|c| c.tracking.as_deref())
            };
            let Some((bcast, noloop)) = mode.map(|m| (m.bcast, m.noloop)) else {
                continue;
            };
            if bcast || (noloop && is_current) {
                continue;
            }
            if is_current && !self.tracking.ahead_of_reply {
                self.tracking.pending.push((id, Invalidation::Keys(vec![key.clone()])));
            } else {
                self.send_invalidation(current.as_deref_mut(), id, Invalidation::Keys(vec![key.clone()]));
            }
        }
    }

    /// FLUSHDB / FLUSHALL (Redis's `trackingInvalidateKeysOnFlush`): every
    /// tracking client is sent a null, and the table is emptied.
    pub fn invalidate_on_flush(&mut self, current: &mut Client) {
        if self.tracking.clients > 0 {
            if current.tracking.is_some() {
                let id = current.acting_for.unwrap_or(current.id);
                self.tracking.pending.push((id, Invalidation::All));
            }
            let mut ids: Vec<ClientId> = self
                .clients
                .iter()
                .filter(|(_, c)| c.tracking.is_some())
                .map(|(id, _)| *id)
                .collect();
            ids.sort_unstable();
            for id in ids {
                if current.holds_for(id) {
                    continue;
                }
                self.send_invalidation(Some(current), id, Invalidation::All);
            }
        }
        if self.tracking.enabled {
            self.tracking.table.clear();
            self.tracking.total_items = 0;
        }
    }

    /// After `client`'s reply: the invalidations its own command owed it
    /// (Redis's `trackingHandlePendingKeyInvalidations`).
    pub(super) fn send_pending_invalidations(&mut self, client: &mut Client) {
        if self.tracking.pending.is_empty() {
            return;
        }
        for (id, message) in std::mem::take(&mut self.tracking.pending) {
            if id == client.id {
                self.send_invalidation(Some(client), id, message);
            } else {
                self.send_invalidation(None, id, message);
            }
        }
    }

    /// Sends an invalidation meant for tracking client `source` where it
    /// goes (Redis's `sendTrackingMessage`): to the client it redirects to
    /// (a push in RESP3, a message on [`CHANNEL`] to a RESP2 subscriber),
    /// else to itself in RESP3 (a RESP2 client without redirection gets
    /// nothing). A redirection to a client gone is reported to a RESP3
    /// source with `tracking-redir-broken`.
    fn send_invalidation(&mut self, mut current: Option<&mut Client>, source: ClientId, message: Invalidation) {
        let Some((source_resp, redirect)) = self
            .client_ref(current.as_deref(), source)
            .and_then(|c| c.tracking.as_deref().map(|m| (c.resp, m.redirect)))
        else {
            return;
        };
        let target = if redirect != 0 { redirect } else { source };
        let target_view = match current.as_deref() {
            Some(c) if c.id != target && c.acting_for == Some(target) => c.caller_protocol,
            _ => self.client_ref(current.as_deref(), target).map(|c| (c.resp, c.in_pubsub_mode())),
        };
        let Some((target_resp, target_subscribed)) = target_view else {
            // The client redirected to is gone.
            let mode = match current.as_deref_mut() {
                Some(c) if c.id == source => c.tracking.as_deref_mut(),
                _ => self.clients.get_mut(&source).and_then(|c| c.tracking.as_deref_mut()),
            };
            if let Some(mode) = mode {
                mode.broken_redirect = true;
            }
            if source_resp > 2 {
                let push = Reply::Push(vec![Reply::bulk_static("tracking-redir-broken"), Reply::Int(redirect as i64)]);
                self.push_to(current, source, push);
            }
            return;
        };
        let payload = match message {
            Invalidation::Keys(keys) => Reply::Array(keys.into_iter().map(Reply::Bulk).collect()),
            // Redis writes the null in the tracking client's protocol.
            Invalidation::All => Reply::Raw(Bytes::from_static(if source_resp > 2 { b"_\r\n" } else { b"$-1\r\n" })),
        };
        let push = if target_resp > 2 {
            Reply::Push(vec![Reply::bulk_static("invalidate"), payload])
        } else if redirect != 0 && target_subscribed {
            Reply::Push(vec![Reply::bulk_static("message"), Reply::bulk_static(CHANNEL), payload])
        } else {
            return;
        };
        self.push_to(current, target, push);
    }

    /// Client `id`: the running one, or one in the map.
    fn client_ref<'a>(&'a self, current: Option<&'a Client>, id: ClientId) -> Option<&'a Client> {
        match current {
            Some(c) if c.id == id => Some(c),
            _ => self.clients.get(&id).map(|c| &**c),
        }
    }

    /// A tracking message for client `id`: the running client holds it
    /// with what it is sent meanwhile, anyone else gets it now.
    fn push_to(&mut self, current: Option<&mut Client>, id: ClientId, push: Reply) {
        match current {
            Some(c) => self.deliver(c, id, &mut EncodedOnce::new(push)),
            None => {
                if let Some(c) = self.clients.get(&id) {
                    if self.refuse_reply_to_replica(c, c.last_command) {
                        return;
                    }
                    c.outbox.push(&EncodedOnce::new(push).get(c.resp));
                    self.check_output_limits(c, true);
                }
            }
        }
    }

    /// Sends BCAST clients the keys under their prefixes modified since the
    /// last call (Redis's `trackingBroadcastInvalidationMessages`, run
    /// before the event loop sleeps). Every client is in the map.
    pub fn broadcast_invalidations(&mut self) {
        if !self.tracking.enabled || self.tracking.clients == 0 {
            return;
        }
        let mut sends = Vec::new();
        for state in self.tracking.prefixes.values_mut() {
            if state.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut state.keys);
            for &id in &state.clients {
                let noloop = self.clients.get(&id).and_then(|c| c.tracking.as_deref()).is_some_and(|m| m.noloop);
                let list: Vec<Bytes> = keys
                    .iter()
                    .filter(|(_, by)| !noloop || **by != id)
                    .map(|(k, _)| k.clone())
                    .collect();
                if !list.is_empty() {
                    sends.push((id, list));
                }
            }
        }
        for (id, keys) in sends {
            self.send_invalidation(None, id, Invalidation::Keys(keys));
        }
    }

    /// Keeps the table within `tracking-table-max-keys` (Redis's
    /// `trackingLimitUsedSlots`, before each command and in the cron):
    /// random keys are dropped, their clients told as if they changed.
    pub fn limit_tracking_table(&mut self, current: Option<&mut Client>) {
        if !self.tracking.enabled || self.tracking.clients == 0 {
            return;
        }
        let max = self.runtime.tracking_table_max_keys;
        if max == 0 || self.tracking.table.len() <= max {
            self.tracking.eviction_rounds = 0;
            return;
        }
        // Redis walks its radix tree at random; the hash table's own order
        // is already unrelated to the keys, so the first keys it yields are
        // the victims (no O(n) walk for each one).
        let effort = 100 * (self.tracking.eviction_rounds as usize + 1);
        let excess = self.tracking.table.len() - max;
        let victims: Vec<Bytes> = self.tracking.table.keys().take(effort.min(excess)).cloned().collect();
        let mut current = current;
        for key in victims {
            self.invalidate_evicted(current.as_deref_mut(), &key);
        }
        if self.tracking.table.len() <= max {
            self.tracking.eviction_rounds = 0;
            return;
        }
        self.tracking.eviction_rounds += 1;
    }

    /// A key dropped from the table: its clients are told now (no command
    /// runs, so the running client is not made to wait for a reply).
    fn invalidate_evicted(&mut self, mut current: Option<&mut Client>, key: &Bytes) {
        let Some(ids) = self.tracking.table.remove(key) else { return };
        self.tracking.total_items -= ids.len() as u64;
        for id in ids.into_iter().map(unorder) {
            let mode = self.client_ref(current.as_deref(), id).and_then(|c| c.tracking.as_deref());
            let Some((bcast, noloop)) = mode.map(|m| (m.bcast, m.noloop)) else {
                continue;
            };
            let is_current = current.as_deref().is_some_and(|c| c.id == id);
            if bcast || (noloop && is_current) {
                continue;
            }
            self.send_invalidation(current.as_deref_mut(), id, Invalidation::Keys(vec![key.clone()]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_follow_the_radix_trees_byte_order() {
        let mut ids: Vec<u64> = [1u64, 256, 2, 257, 255].iter().map(|&i| order(i)).collect();
        ids.sort_unstable();
        let back: Vec<ClientId> = ids.into_iter().map(unorder).collect();
        assert_eq!(back, vec![256, 1, 257, 2, 255]);
    }
}
