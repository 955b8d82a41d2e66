//! The engine's side of cluster mode (`crate::cluster`): where a client's
//! or a script's command is to be served (the redirection check of
//! Redis's `processCommand` and `scriptVerifyClusterState`), the keys of
//! a slot, and the configuration file written when the cluster changed.

use bytes::Bytes;

use super::{Client, State};
use crate::cluster::bus::Announce;
use crate::cluster::{DownPolicy, Query, Redirect};
use crate::commands::table::{Command, flag};

/// The keys a command line is routed by, found as Redis 7.0's
/// `getKeysFromCommand` finds them for `getNodeByQuery`: by the
/// command's own key finder when Redis has one, else by its legacy
/// (first, last, step) range — which, unlike the key specs, counts the
/// shard channels of SPUBLISH and SSUBSCRIBE as keys. Commands keylock
/// alone defines have none.
fn keys_of<'a>(cmd: &Command, argv: &'a [Bytes]) -> Vec<&'a [u8]> {
    let Some(def) = cmd.def else { return Vec::new() };
    if def.getkeys_proc {
        return crate::commands::defs::getkeys_proc(def.name, argv)
            .into_iter()
            .filter_map(|(i, _)| argv.get(i).map(|k| k.as_ref()))
            .collect();
    }
    let (first, last, step) = def.legacy_keys;
    if first <= 0 {
        return Vec::new();
    }
    let argc = argv.len() as i32;
    let last = if last < 0 { argc + last } else { last };
    let mut keys = Vec::new();
    let mut j = first;
    while j <= last {
        if j >= argc {
            // A variadic command given too few arguments: its own
            // handler reports the error.
            return Vec::new();
        }
        keys.push(argv[j as usize].as_ref());
        j += step.max(1);
    }
    keys
}

/// The key of a command routed by one argument at a fixed place (GET,
/// SET, HSET…), found without building a list.
fn single_key<'a>(cmd: &Command, argv: &'a [Bytes]) -> Option<&'a [u8]> {
    let def = cmd.def?;
    match def.legacy_keys {
        (first, last, _) if first > 0 && first == last && !def.getkeys_proc => argv.get(first as usize).map(|k| k.as_ref()),
        _ => None,
    }
}

/// Whether Redis asks the slot map about this command at all: it has
/// key specs (shard channels count), or is EXEC.
fn routed(cmd: &Command) -> bool {
    cmd.def.is_some_and(|d| !d.key_specs.is_empty() || d.getkeys_proc) || cmd.full_name == "exec"
}

fn down_policy(params: &crate::config_params::ConfigParams) -> DownPolicy {
    DownPolicy {
        reads: params.int("cluster-allow-reads-when-down") == Some(1),
        pubsubshard: params.int("cluster-allow-pubsubshard-when-down") != Some(0),
    }
}

fn pubsubshard(cmd: &Command) -> bool {
    matches!(cmd.full_name.as_str(), "ssubscribe" | "sunsubscribe" | "spublish")
}

impl State {
    pub fn cluster_enabled(&self) -> bool {
        self.cluster.is_some()
    }

    /// This node's replication offset as the cluster is told it: a Raft
    /// shard member's applied log index; a replica's offset in its
    /// master's stream, 0 while it has neither the stream nor a history
    /// to continue (before its first sync, and while a new master's
    /// snapshot loads: Redis's `replicationGetSlaveOffset`), which
    /// hides it from CLUSTER SLOTS and shows it `loading` in CLUSTER
    /// SHARDS; a master's offset.
    pub fn cluster_repl_offset(&self) -> u64 {
        #[cfg(feature = "raft")]
        if let Some(r) = self.raft.as_deref() {
            return r.last_applied.map_or(0, |l| l.index);
        }
        let replica = self.cluster.as_deref().is_some_and(|c| c.myself().has(crate::cluster::flag::SLAVE));
        if replica
            && self
                .master
                .as_deref()
                .is_none_or(|m| m.client.is_none() && self.cached_master_db.is_none())
        {
            return 0;
        }
        self.replicas.offset
    }

    pub fn cluster_node_timeout(&self) -> u64 {
        self.params.int("cluster-node-timeout").unwrap_or(15000).max(0) as u64
    }

    /// The address overrides this node announces.
    pub fn cluster_announce(&self) -> Announce {
        Announce {
            ip: self.params.value("cluster-announce-ip").unwrap_or("").to_string(),
            hostname: self.params.value("cluster-announce-hostname").unwrap_or("").to_string(),
        }
    }

    /// What this node announces of itself, in its own view too: the ports
    /// (`cluster-announce-port` and `cluster-announce-bus-port` where set,
    /// else those it listens on) and `cluster-announce-hostname`, after
    /// CONFIG SET of any of them (Redis's
    /// `clusterUpdateMyselfAnnouncedPorts` and `clusterUpdateMyselfHostname`).
    pub fn cluster_announce_myself(&mut self) {
        let announced = |name: &str| self.params.int(name).unwrap_or(0) as u16;
        let port = match announced("cluster-announce-port") {
            0 => self.port,
            p => p,
        };
        let bus = announced("cluster-announce-bus-port");
        let hostname = self.params.value("cluster-announce-hostname").unwrap_or("").to_string();
        let Some(c) = self.cluster.as_deref_mut() else { return };
        let cport = if bus == 0 { c.bus_port } else { bus };
        let me = c.myself_mut();
        if me.port != port || me.cport != cport || me.hostname != hostname {
            me.port = port;
            me.cport = cport;
            me.hostname = hostname;
            c.changed();
        }
    }

    /// Redis's `clusterUpdateState` with this server's settings.
    pub fn cluster_update_state(&mut self) {
        let now = self.clock.now_ms();
        let full = self.params.int("cluster-require-full-coverage") != Some(0);
        let timeout = self.cluster_node_timeout();
        if let Some(c) = self.cluster.as_deref_mut() {
            c.update_state(now, full, timeout);
        }
    }

    /// Once per cron: failure detection and the state; clients blocked
    /// on keys this node no longer serves are sent where to go.
    pub fn cluster_cron(&mut self) {
        let now = self.clock.now_ms();
        let timeout = self.cluster_node_timeout();
        let sendbuf_limit = self.params.int("cluster-link-sendbuf-limit").unwrap_or(0).max(0) as usize;
        if let Some(c) = self.cluster.as_deref_mut() {
            c.detect_failures(now, timeout);
            c.free_links_over_limit(sendbuf_limit);
        }
        #[cfg(feature = "raft")]
        self.raft_cluster_sync();
        self.cluster_failover();
        self.cluster_sync_replication();
        self.cluster_update_state();
        self.cluster_save_if_changed();
        if self.blocked_clients > 0 {
            self.cluster_redirect_blocked();
        }
    }

    /// A plain node's replication follows its role in the cluster
    /// (`clusterSetMaster`, and `clusterCron` for a replica started from
    /// `nodes.conf`): a replica replicates its master once it knows the
    /// master's address, and again at a new one; a master replicates
    /// nothing. (A Raft shard member's data comes from its shard's log.)
    pub fn cluster_sync_replication(&mut self) {
        #[cfg(feature = "raft")]
        if self.raft.is_some() {
            return;
        }
        self.cluster_refresh_offset();
        let Some(c) = self.cluster.as_deref_mut() else { return };
        c.allow_replica_migration = self.params.int("cluster-allow-replica-migration") != Some(0);
        let me = c.myself();
        if me.is_master() {
            if self.master.is_some() {
                self.unset_master();
                crate::log::notice(format_args!("MASTER MODE enabled (cluster: this node is a master)"));
            }
            return;
        }
        let Some(m) = me.master.as_deref().and_then(|id| c.node(id.as_bytes())) else {
            return;
        };
        if m.has(crate::cluster::flag::NOADDR | crate::cluster::flag::HANDSHAKE) || m.ip.is_empty() || m.port == 0 {
            return;
        }
        let (ip, port) = (m.ip.clone(), m.port);
        if self.replicate(&ip, port, None)
            && let Some(db) = self.loaded_replication.take()
        {
            // Restarted from a snapshot of its replica days: the history
            // it told, from the database its stream was in.
            self.cached_master_db = Some(db);
        }
    }

    /// The replication offset this plain node tells the others: a
    /// master's, or how far a replica processed its master's stream (a
    /// Raft shard member's is its applied index, kept by the shard).
    pub fn cluster_refresh_offset(&mut self) {
        #[cfg(feature = "raft")]
        if self.raft.is_some() {
            return;
        }
        let offset = self.cluster_repl_offset();
        if let Some(c) = self.cluster.as_deref_mut() {
            c.nodes[0].repl_offset = offset;
        }
    }

    /// What this node's next bus message tells, up to date: its offset,
    /// and that it pauses for its replica's manual failover only while
    /// its writers are still paused (a CLIENT UNPAUSE ends the failover's
    /// pause too: the offset would no longer be final).
    pub fn cluster_refresh_told(&mut self) {
        self.cluster_refresh_offset();
        let paused = self.pause.is_some_and(|p| p.end > std::time::Instant::now());
        if let Some(c) = self.cluster.as_deref_mut()
            && c.mf_paused_until != 0
            && !paused
        {
            c.mf_paused_until = 0;
            c.mf_pause_end = None;
            c.version += 1;
        }
    }

    /// Failovers at each cron: a replica's step (see
    /// `Cluster::failover_step`, manual or automatic); a master's pause
    /// for its replica's manual failover ends with its time, or once the
    /// replica took over (this node is no longer a master), and its
    /// writers go on (to be sent to the new master).
    fn cluster_failover(&mut self) {
        #[cfg(feature = "raft")]
        if self.raft.is_some() {
            return;
        }
        let now = self.clock.now_ms();
        let no_failover = self.params.int("cluster-replica-no-failover") == Some(1);
        if let Some(c) = self.cluster.as_deref_mut()
            && c.myself().has(crate::cluster::flag::NOFAILOVER) != no_failover
        {
            // Told to the others, as Redis's `clusterUpdateMyselfFlags`.
            c.myself_mut().flags ^= crate::cluster::flag::NOFAILOVER;
            c.changed();
        }
        let data_fresh = self.replica_data_fresh(now);
        self.cluster_refresh_offset();
        self.cluster_end_failover_pause(now);
        let barrier = self.params.int("cluster-migration-barrier").unwrap_or(1).max(0) as u64;
        let migrate = self.params.int("cluster-allow-replica-migration") != Some(0);
        let Some(c) = self.cluster.as_deref_mut() else { return };
        c.note_replicated_masters();
        if !c.myself().has(crate::cluster::flag::SLAVE) || c.failover_step(now, no_failover, data_fresh) || !migrate {
            return;
        }
        if let Some(target) = c.migration_step(now, barrier) {
            crate::log::warning(format_args!("Migrating to orphaned master {}", c.nodes[target].id));
            c.set_master(target);
        }
    }

    /// A master's pause for its replica's manual failover ends with its
    /// time, or at once when this node turned replica (the replica took
    /// over): its writers go on, to be sent to the new master, and the
    /// stream of the new master is applied (`resetManualFailover`).
    pub fn cluster_end_failover_pause(&mut self, now: u64) {
        let Some(c) = self.cluster.as_deref_mut() else { return };
        if c.mf_paused_until == 0 || (now < c.mf_paused_until && c.myself().is_master()) {
            return;
        }
        c.mf_paused_until = 0;
        c.version += 1;
        let ours = c.mf_pause_end.take();
        // Its own pause only: a client's CLIENT PAUSE (of every command,
        // or longer) stays.
        if self.pause.is_some_and(|p| !p.all && Some(p.end) == ours) {
            self.unpause();
        }
    }

    /// CLUSTER RESET: a manual failover this master pauses for ends.
    pub fn cluster_abort_failover_pause(&mut self) {
        if let Some(c) = self.cluster.as_deref_mut()
            && c.mf_paused_until != 0
        {
            c.mf_paused_until = 1;
        }
        let now = self.clock.now_ms();
        self.cluster_end_failover_pause(now);
    }

    /// Whether this replica's data is recent enough to fail over its
    /// master: the time since it last heard from the master (or since
    /// the link went down), less the node timeout, within
    /// `repl-ping-replica-period` seconds and `cluster-node-timeout`
    /// times `cluster-replica-validity-factor` (0: any age).
    fn replica_data_fresh(&self, now: u64) -> bool {
        let factor = self.params.int("cluster-replica-validity-factor").unwrap_or(10).max(0) as u64;
        if factor == 0 {
            return true;
        }
        let Some(m) = self.master.as_deref() else { return false };
        // A snapshot being loaded is finished first, as Redis's load
        // runs no cluster cron.
        if self.master_loading() || self.async_loading() {
            return false;
        }
        // A link that never ran the stream (the first sync not done) has
        // no data to speak of: as old as can be (Redis's `repl_down_since`
        // 0).
        let since = if m.link == super::replica::LinkState::Connected {
            m.last_io_ms
        } else {
            match m.down_since_ms {
                Some(at) => at,
                None => return false,
            }
        };
        let timeout = self.cluster_node_timeout();
        let mut age = now.saturating_sub(since);
        if age > timeout {
            age -= timeout;
        }
        let period = self.params.int("repl-ping-replica-period").unwrap_or(10).max(0) as u64;
        age <= period * 1000 + timeout * factor
    }

    /// Redis's `clusterRedirectBlockedClientIfNeeded`: a client blocked on
    /// keys (a list, sorted set or stream wait) is answered CLUSTERDOWN
    /// while the cluster is down, or MOVED once the keys' slot is served
    /// elsewhere (and not being imported here); its wait ends.
    pub fn cluster_redirect_blocked(&mut self) {
        let Some(cluster) = self.cluster.as_deref() else { return };
        let mut redirected = Vec::new();
        for client in self.clients.values() {
            let Some(blocked) = client.blocked.as_deref() else { continue };
            if matches!(blocked.op, super::blocking::BlockOp::Postpone(_)) {
                continue;
            }
            if !cluster.ok {
                redirected.push((client.id, Redirect::DownState));
                continue;
            }
            let Some(key) = blocked.keys.first() else { continue };
            let slot = crate::cluster::key_hash_slot(key);
            if cluster.serves(slot) || cluster.importing.contains_key(&slot) {
                continue;
            }
            let redirect = match cluster.owner(slot) {
                None => Redirect::DownUnbound,
                Some(n) => Redirect::Moved(slot, cluster.endpoint(n)),
            };
            redirected.push((client.id, redirect));
        }
        for (id, redirect) in redirected {
            let Some(mut client) = self.clients.remove(&id) else { continue };
            self.unblock(&mut client);
            let error = crate::error::CmdError::new(redirect.client_error());
            self.stats.count_error(&error);
            self.answer_unblocked(&client, super::Reply::from(error));
            self.clients.insert(id, client);
        }
    }

    /// Writes `nodes.conf` when the configuration changed; a node that
    /// cannot keep its configuration stops, as Redis's does.
    pub fn cluster_save_if_changed(&mut self) {
        let Some(c) = self.cluster.as_deref_mut() else { return };
        if !c.save_pending {
            return;
        }
        c.save_pending = false;
        let sync = std::mem::take(&mut c.fsync_pending);
        if let Err(e) = self.cluster_save(sync) {
            crate::log::warning(format_args!("Fatal: can't update cluster config file. ({e})"));
            std::process::exit(1);
        }
    }

    /// CLUSTER SAVECONFIG, and every change.
    pub fn cluster_save(&mut self, sync: bool) -> std::io::Result<()> {
        let path = self.cluster_config_path();
        let Some(c) = self.cluster.as_deref_mut() else { return Ok(()) };
        crate::cluster::config_file::save(c, &path, sync)
    }

    /// `cluster-config-file`, in `dir`.
    pub fn cluster_config_path(&self) -> String {
        let dir = self.params.value("dir").unwrap_or(".");
        let file = self.params.value("cluster-config-file").unwrap_or("nodes.conf");
        std::path::Path::new(dir).join(file).to_string_lossy().into_owned()
    }

    /// Redis's `verifyClusterConfigWithData`, after the dataset loaded:
    /// keys only in database 0 (false otherwise: the server stops); a
    /// slot holding keys that no node serves becomes this node's, one
    /// that another node serves is marked as being imported.
    pub fn cluster_verify_with_data(&mut self) -> bool {
        if self.cluster.as_deref().is_some_and(|c| c.myself().has(crate::cluster::flag::SLAVE)) {
            // A replica's keys are its master's.
            return true;
        }
        if self.dbs.iter().skip(1).any(|db| !db.is_empty()) {
            return false;
        }
        let mut populated = vec![false; crate::cluster::SLOTS];
        for key in self.dbs[0].stored_keys() {
            populated[crate::cluster::key_hash_slot(key) as usize] = true;
        }
        let Some(c) = self.cluster.as_deref_mut() else { return true };
        let mut updated = false;
        for (slot, _) in populated.iter().enumerate().filter(|(_, p)| **p) {
            let slot = slot as u16;
            if c.serves(slot) || c.importing.contains_key(&slot) {
                continue;
            }
            updated = true;
            match c.owner(slot).map(|n| n.id.clone()) {
                None => {
                    crate::log::warning(format_args!(
                        "I have keys for unassigned slot {slot}. Taking responsibility for it."
                    ));
                    c.add_slot(0, slot);
                }
                Some(owner) => {
                    crate::log::warning(format_args!(
                        "I have keys for slot {slot}, but the slot is assigned to another node. Setting it to importing state."
                    ));
                    c.importing.insert(slot, owner);
                }
            }
        }
        if updated {
            c.save_pending = true;
            c.fsync_pending = true;
            self.cluster_save_if_changed();
        }
        true
    }

    /// How many keys (expired or not) hash slot `slot` holds here.
    pub fn count_keys_in_slot(&self, slot: u16) -> usize {
        self.dbs[0].keys_in_slot(slot, 0).1
    }

    /// Which of the slots this node lost to `claimant`'s newer claim lose
    /// their keys here, as Redis drops them: every one on a node of its
    /// own. A Raft shard member's dataset changes through the shard's log
    /// alone: its confirmed leader drops the keys of slots another shard
    /// took, and its DELs reach every member through the log; a claim by
    /// a fellow member (a new leader taking the shard's slots) moves no
    /// keys, and a member that does not lead, or has not been confirmed
    /// leading (`writable`), leaves them to the log. A leader cut off from
    /// its majority deletes them in vain: its entry never commits, and
    /// stepping down with entries in flight rebuilds its dataset from the
    /// log. (Keys a shard held when its leader changed at that moment stay
    /// behind, unserved: a member that just took over, whose view may be
    /// older than the claim, never drops keys it did not see lost.)
    pub fn lost_slots_to_empty(&self, lost: Vec<u16>, claimant: &str) -> Vec<u16> {
        #[cfg(feature = "raft")]
        if let Some(r) = self.raft.as_deref() {
            let fellow = r.cluster_ids.values().any(|card| card.node_id == claimant);
            if fellow || !r.writable {
                return Vec::new();
            }
        }
        let _ = claimant;
        lost
    }

    /// Deletes every key of `slot` (a slot this node lost to another's
    /// newer claim): as DELs, for the append-only file and replicas.
    pub fn delete_keys_in_slot(&mut self, slot: u16) -> usize {
        let (keys, _) = self.dbs[0].keys_in_slot(slot, usize::MAX);
        for key in &keys {
            if self.dbs[0].remove(key).is_some() {
                self.key_events.record(crate::db::events::NOTIFY_GENERIC, "del", 0, key);
                self.effects.push(0, &[b"DEL".as_slice(), key], super::effects::ALL);
            }
        }
        keys.len()
    }

    /// Where a client's command is to be served (Redis's
    /// `processCommand` cluster check): Ok here, or the redirection.
    /// EXEC asks about every queued command.
    /// A script is a write as its flags say (`getCommandFlags`): a
    /// shebang script without `no-writes` is redirected from a replica.
    pub fn cluster_route(
        &mut self,
        scripts: Option<&super::Scripts>,
        client: &Client,
        cmd: &Command,
        argv: &[Bytes],
    ) -> Result<(), Redirect> {
        if self.cluster.is_none() || !routed(cmd) {
            return Ok(());
        }
        let mut write = self.command_flags(scripts, client, cmd, argv) & flag::WRITE != 0;
        let Some(cluster) = self.cluster.as_deref() else { return Ok(()) };
        let mut shard = pubsubshard(cmd);
        let mut is_migrate = cmd.full_name == "migrate";
        let (one, mut many): ([&[u8]; 1], Vec<&[u8]>);
        let keys: &[&[u8]] = if cmd.full_name == "exec" {
            let Some(multi) = client.multi.as_ref() else { return Ok(()) };
            many = Vec::new();
            for line in &multi.queued {
                if let super::exec::Lookup::Found(c) = super::exec::lookup(&self.renames, line) {
                    many.extend(keys_of(c, line));
                    write |= c.spec.has(flag::WRITE);
                    shard |= pubsubshard(c);
                    is_migrate |= c.full_name == "migrate";
                }
            }
            &many
        } else if let Some(key) = single_key(cmd, argv) {
            one = [key];
            &one
        } else {
            many = keys_of(cmd, argv);
            &many
        };
        let query = Query {
            keys,
            write,
            asking: client.cluster_asking || cmd.spec.has(flag::ASKING),
            readonly_client: client.cluster_readonly,
            pubsubshard: shard,
            migrate: is_migrate,
        };
        let db = &self.dbs[0];
        let params = &self.params;
        // An expired key counts as missing, and stays (Redis's lookup
        // with LOOKUP_NOEXPIRE).
        let now = self.clock.now_ms();
        let here = cluster.route(&query, || down_policy(params), |k| db.peek(k, now).is_some())?;
        #[cfg(feature = "raft")]
        if let Some(slot) = here
            && (write || cmd.spec.has(flag::MAY_REPLICATE))
            && !shard
            && !self.raft_accepts_writes()
        {
            return Err(self.raft_redirect(slot));
        }
        let _ = here;
        Ok(())
    }

    /// Where a write goes that this shard member serves the slot of but
    /// cannot take (it stopped leading, or leads and has not applied its
    /// log yet): to the member that leads now, before the slot map says
    /// so; while no other member is known to lead, the shard is down.
    #[cfg(feature = "raft")]
    fn raft_redirect(&self, slot: u16) -> Redirect {
        let leader = self.raft.as_deref().and_then(|r| {
            let (id, _) = r.leader.as_ref().filter(|(id, _)| *id != r.id)?;
            r.cluster_ids.get(id)
        });
        let Some(cluster) = self.cluster.as_deref() else {
            return Redirect::DownState;
        };
        match leader.and_then(|card| cluster.node(card.node_id.as_bytes())) {
            Some(n) if n.port != 0 && !n.ip.is_empty() => Redirect::Moved(slot, cluster.endpoint(n)),
            _ => Redirect::DownState,
        }
    }

    /// A script's command (`scriptVerifyClusterState`): the error when
    /// its keys are not served here, or in another slot than the
    /// script's earlier commands used (unless the script allows
    /// cross-slot keys). `slot` is the run's slot so far.
    pub fn cluster_route_script(
        &self,
        cmd: &Command,
        argv: &[Bytes],
        slot: &mut Option<u16>,
        limits: &crate::scripting::call::ScriptLimits,
    ) -> Result<(), &'static str> {
        let allow_cross_slot = limits.allow_cross_slot;
        let Some(cluster) = self.cluster.as_deref() else { return Ok(()) };
        let keys = keys_of(cmd, argv);
        let query = Query {
            keys: &keys,
            write: cmd.spec.has(flag::WRITE),
            asking: limits.cluster_asking,
            readonly_client: limits.cluster_readonly,
            pubsubshard: pubsubshard(cmd),
            migrate: cmd.full_name == "migrate",
        };
        let db = &self.dbs[0];
        let params = &self.params;
        let now = self.clock.now_ms();
        let here = cluster
            .route(&query, || down_policy(params), |k| db.peek(k, now).is_some())
            .map_err(|r| r.script_error())?;
        if let Some(this) = here
            && !allow_cross_slot
        {
            match *slot {
                None => *slot = Some(this),
                Some(s) if s != this => return Err("ERR Script attempted to access keys that do not hash to the same slot"),
                Some(_) => {}
            }
        }
        Ok(())
    }
}
