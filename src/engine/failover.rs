//! Coordinated failover (Redis 6.2's FAILOVER, `replication.c`): the
//! master pauses writes, waits until a replica (the one named with `TO
//! host port`, or any) has acknowledged every byte of the stream, then
//! becomes that replica's replica, asking `PSYNC <replid> <offset>
//! FAILOVER`. The replica, seeing its own replication ID, becomes a master
//! (REPLICAOF NO ONE) and continues the old master's history with it
//! (`+CONTINUE`), and the writes paused on the old master get `READONLY`
//! from then on.
//!
//! - `TIMEOUT ms` ends the wait: the failover is aborted, or with `FORCE`
//!   it goes on to the named replica even though it is behind.
//! - `FAILOVER ABORT`, or the new master refusing the PSYNC, ends it: a
//!   master that already started following the target becomes a master
//!   again.
//! - Meanwhile INFO's `master_failover_state` says `waiting-for-sync` or
//!   `failover-in-progress`, REPLICAOF and replicas' SYNC are refused, and
//!   writes wait as under `CLIENT PAUSE WRITE` (CLIENT UNPAUSE does not
//!   end this pause).

use super::State;
use super::replication::replica_ip;

/// A failover under way.
#[derive(Debug, Clone)]
pub struct Failover {
    /// The replica to fail over to (`TO host port`, or the first one
    /// found caught up).
    pub target: Option<(String, u16)>,
    /// When the wait ends (the clock's milliseconds), with TIMEOUT.
    pub end_ms: Option<u64>,
    pub force: bool,
    /// The master follows the target now and asks it to take over
    /// (Redis's FAILOVER_IN_PROGRESS; otherwise FAILOVER_WAIT_FOR_SYNC).
    pub in_progress: bool,
}

impl State {
    /// INFO's `master_failover_state`.
    pub fn failover_state(&self) -> &'static str {
        match &self.failover {
            None => "no-failover",
            Some(f) if f.in_progress => "failover-in-progress",
            Some(_) => "waiting-for-sync",
        }
    }

    /// Whether the link asks its master to take over (`PSYNC … FAILOVER`).
    pub fn failover_in_progress(&self) -> bool {
        self.failover.as_ref().is_some_and(|f| f.in_progress)
    }

    /// FAILOVER's start, its checks passed: writes pause until it ends.
    pub fn start_failover(&mut self, failover: Failover) {
        match &failover.target {
            Some((host, port)) => crate::log::notice(format_args!("FAILOVER requested to {host}:{port}.")),
            None => crate::log::notice(format_args!("FAILOVER requested to any replica.")),
        }
        self.failover = Some(failover);
        self.refresh_expiry_mode();
    }

    /// The online replica whose address (as it announced it, or as its
    /// connection shows) and listening port are `host` and `port` (Redis's
    /// `findReplica`), and the offset it acknowledged.
    pub fn find_replica(&self, host: &str, port: u16) -> Option<(bool, u64)> {
        self.replicas.ids.iter().find_map(|id| {
            let client = self.clients.get(id)?;
            let announced = self.replicas.announced.get(id)?;
            let ip = replica_ip(Some(announced), &client.peer)?;
            (ip.eq_ignore_ascii_case(host) && announced.port == port).then_some((announced.online(), announced.ack_offset))
        })
    }

    /// Moves a waiting failover on (Redis's `updateFailoverStatus`): after
    /// every batch (never inside one: what a transaction wrote goes to the
    /// replicas first), and from the cron for the timeout.
    pub fn update_failover(&mut self) {
        let Some(failover) = self.failover.clone().filter(|f| !f.in_progress) else {
            return;
        };
        let now = self.clock.now_ms();
        if failover.end_ms.is_some_and(|end| end <= now) {
            match failover.target.filter(|_| failover.force) {
                Some((host, port)) => {
                    crate::log::notice(format_args!("FAILOVER to {host}:{port} time out exceeded, failing over."));
                    self.fail_over_to(host, port);
                }
                None => self.abort_failover("Replica never caught up before timeout"),
            }
            return;
        }
        let offset = self.replicas.offset;
        let target = match failover.target {
            Some((host, port)) => self
                .find_replica(&host, port)
                .filter(|&(_, acked)| acked == offset)
                .map(|_| (host, port)),
            None => self.replicas.ids.iter().find_map(|id| {
                let announced = self.replicas.announced.get(id)?;
                // One still getting its snapshot has acknowledged nothing.
                if !announced.online() || announced.ack_offset != offset {
                    return None;
                }
                Some((replica_ip(Some(announced), &self.clients.get(id)?.peer)?, announced.port))
            }),
        };
        if let Some((host, port)) = target {
            crate::log::notice(format_args!("Failover target {host}:{port} is synced, failing over."));
            self.fail_over_to(host, port);
        }
    }

    fn fail_over_to(&mut self, host: String, port: u16) {
        if let Some(f) = self.failover.as_mut() {
            f.in_progress = true;
            f.target = Some((host.clone(), port));
        }
        self.replicate(&host, port, None);
    }

    /// The failover is over (the new master answered the PSYNC): writes
    /// run again (and get READONLY, this server being a replica now).
    pub fn clear_failover(&mut self) {
        if self.failover.take().is_some() {
            self.refresh_expiry_mode();
            self.release_paused_clients();
        }
    }

    /// Ends a failover that cannot go on (Redis's `abortFailover`); a
    /// master that already follows the target becomes a master again.
    pub fn abort_failover(&mut self, why: &str) {
        let Some(failover) = self.failover.clone() else {
            return;
        };
        match &failover.target {
            Some((host, port)) => crate::log::notice(format_args!("FAILOVER to {host}:{port} aborted: {why}")),
            None => crate::log::notice(format_args!("FAILOVER to any replica aborted: {why}")),
        }
        if failover.in_progress {
            self.unset_master();
        }
        self.clear_failover();
    }
}
