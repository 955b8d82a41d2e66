//! The network side of a Raft shard member (see `crate::raft` and
//! `engine::raft`): the member started from its configuration, the
//! batches' proposals sent, commits releasing the output that waited for
//! them, committed entries applied on the server thread, and the role
//! followed as the Raft instance reports it.

use std::rc::Rc;

use super::Shared;
use crate::config::Config;
use crate::config_params::ConfigParams;
use crate::engine::raft::Role;
use crate::raft::shard::{Shard, ShardConfig};
use crate::raft::state_machine::EngineCmd;
use crate::raft::{AdminRequest, MembershipChange, Metrics, NodeId, Raft};

/// Starts the member `raft-id` of the shard `raft-members`, its log in
/// `dir/raft`.
pub fn start_shard(config: &Config, params: &ConfigParams) -> Result<Shard, String> {
    let members = crate::raft::parse_members(params.value("raft-members").unwrap_or(""))?;
    let id = params.int("raft-id").unwrap_or(0) as u64;
    let Some(me) = members.get(&id) else {
        return Err(format!(
            "replication raft needs raft-id to be one of the ids in raft-members (raft-id {id})"
        ));
    };
    if params.int("appendonly") == Some(1) {
        return Err("appendonly cannot be used with replication raft: the Raft log is the member's record".into());
    }
    let raft_port = match params.int("raft-port").unwrap_or(0) {
        0 => me.raft_addr.rsplit_once(':').map_or(0, |(_, p)| p.parse().unwrap_or(0)),
        p => p as u16,
    };
    let host = match config.bind.first().map(|h| h.trim_start_matches('-')) {
        None => "127.0.0.1",
        Some("*") => "0.0.0.0",
        Some(h) => h,
    };
    let dir = std::path::Path::new(params.value("dir").unwrap_or(".")).join("raft");
    let shard = Shard::start(ShardConfig {
        id,
        members,
        dir,
        listen: format!("{host}:{raft_port}"),
        heartbeat_ms: 50,
        snapshot_entries: params.int("raft-snapshot-entries").unwrap_or(10_000).max(1) as u64,
        election_timeout_ms: (300, 600),
        join: params.int("raft-join") == Some(1),
        card: Default::default(),
        fsync: crate::raft::log_store::Fsync::of(params.value("raft-fsync")),
        log_memory: params
            .int("raft-log-memory")
            .map_or(crate::raft::log_store::LOG_MEMORY, |m| m.max(0) as u64),
    })?;
    crate::log::notice(format_args!("Raft: member {id} of its shard, Raft messages on {host}:{raft_port}"));
    Ok(shard)
}

/// Runs the member's tasks on the server thread.
pub fn serve_shard(shared: &Rc<Shared>, mut shard: Shard) {
    if let Some(applies) = shard.applies.take() {
        tokio::task::spawn_local(apply_loop(shared.clone(), applies));
    }
    let shared = shared.clone();
    tokio::task::spawn_local(async move {
        let Some(ready) = shard.ready.take() else { return };
        let raft = match ready.await {
            Ok(Ok(raft)) => raft,
            Ok(Err(e)) => {
                crate::log::warning(format_args!("Raft: the member could not start: {e}"));
                std::process::exit(1);
            }
            Err(_) => return,
        };
        let (admin_tx, admin_rx) = tokio::sync::mpsc::unbounded_channel();
        if let Some(r) = shared.engine.borrow_mut().state.raft.as_deref_mut() {
            r.raft = Some(raft.clone());
            r.admin = Some(admin_tx);
        }
        tokio::task::spawn_local(admin_loop(shared.clone(), admin_rx));
        role_loop(shared, shard, raft).await;
    });
}

/// Committed entries, applied in order on the engine.
async fn apply_loop(shared: Rc<Shared>, mut applies: tokio::sync::mpsc::UnboundedReceiver<(u64, EngineCmd)>) {
    while let Some((instance, cmd)) = applies.recv().await {
        let current = shared.engine.borrow().state.raft.as_deref().map(|r| r.instance);
        if current != Some(instance) {
            // From an instance a rebuild replaced.
            match cmd {
                EngineCmd::Apply { done, .. } => {
                    let _ = done.send(());
                }
                EngineCmd::Restore { done, .. } => {
                    let _ = done.send(Err("the Raft instance was replaced".into()));
                }
                EngineCmd::Dump { .. } => {}
            }
            continue;
        }
        match cmd {
            EngineCmd::Apply { entries, done } => {
                {
                    let mut engine = shared.engine.borrow_mut();
                    let engine = &mut *engine;
                    engine.state.raft_apply(&mut engine.scripts, entries);
                }
                shared.after_batch();
                let _ = done.send(());
            }
            EngineCmd::Dump { reply } => {
                let mut engine = shared.engine.borrow_mut();
                let engine = &mut *engine;
                engine.state.raft_dump(&engine.scripts, reply);
            }
            EngineCmd::Restore { data, last, done } => {
                let result = {
                    let mut engine = shared.engine.borrow_mut();
                    let engine = &mut *engine;
                    engine.state.raft_restore(&mut engine.scripts, &data, last)
                };
                shared.after_batch();
                let _ = done.send(result);
            }
        }
    }
}

fn role_of(m: &Metrics) -> Role {
    match m.state {
        openraft::ServerState::Leader => Role::Leader,
        openraft::ServerState::Candidate => Role::Candidate,
        _ => Role::Follower,
    }
}

/// Follows the member's role; rebuilds the dataset when it stopped
/// leading with writes that may be lost.
async fn role_loop(shared: Rc<Shared>, shard: Shard, raft: Raft) {
    let mut metrics = raft.metrics();
    let mut seen = None;
    loop {
        let (role, term, leader, last_log_index, acked) = {
            let m = metrics.borrow_and_update();
            let membership = m.membership_config.membership();
            let leader = m.current_leader.and_then(|id| membership.get_node(&id).map(|n| (id, n.clone())));
            shared.engine.borrow_mut().state.raft_membership(
                membership.voter_ids().collect(),
                membership.nodes().map(|(id, n)| (*id, n.clone())).collect(),
            );
            start_probes(&shared);
            (
                role_of(&m),
                m.current_term,
                leader,
                m.last_log_index.unwrap_or(0),
                m.millis_since_quorum_ack.is_some(),
            )
        };
        if seen != Some((role, term, leader.as_ref().map(|l| l.0))) {
            seen = Some((role, term, leader.as_ref().map(|l| l.0)));
            switch_master(&shared, leader.as_ref().map(|(_, m)| m.client_addr.clone()));
            let rebuild = shared
                .engine
                .borrow_mut()
                .state
                .raft_role_changed(role, term, leader, last_log_index);
            if rebuild {
                {
                    let mut engine = shared.engine.borrow_mut();
                    let engine = &mut *engine;
                    engine.state.raft_reset_dataset(&mut engine.scripts);
                }
                let Ok(raft) = shard.rebuild().await else {
                    // The Raft thread is gone: the dataset is empty, and
                    // nothing would fill it again.
                    crate::log::warning(format_args!("Raft: the member's Raft thread stopped: exiting"));
                    std::process::exit(1);
                };
                metrics = raft.metrics();
                if let Some(r) = shared.engine.borrow_mut().state.raft.as_deref_mut() {
                    r.raft = Some(raft);
                }
                seen = None;
                continue;
            }
        }
        shared.engine.borrow_mut().state.raft_quorum_acked(acked);
        if metrics.changed().await.is_err() {
            // The instance shut down. Only this loop rebuilds it, so it
            // stopped on its own: a fatal error, such as its log failing
            // to read an entry back. A member whose Raft has stopped would
            // go on answering without ever following the shard again: it
            // exits, as a failed sync of its log makes it do.
            let raft: Option<Raft> = shared.engine.borrow().state.raft.as_deref().and_then(|r| r.raft.clone());
            let Some(raft) = raft else { return };
            let why = match raft.with_raft_state(|_| ()).await {
                Err(e) => e.to_string(),
                Ok(()) => "no error given".to_string(),
            };
            crate::log::warning(format_args!("Raft: the member's Raft instance stopped ({why}): exiting"));
            std::process::exit(1);
        }
    }
}

/// How long a new member has to catch up with the log, as a learner,
/// before it is made a voter: one that cannot is left a learner, so that
/// an unreachable or slow machine never becomes a voter the shard's
/// majorities must wait for.
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(30);

/// Makes the membership changes KEYLOCK ADDMEMBER / DELMEMBER ask for,
/// one at a time, and answers the client that waits for each.
async fn admin_loop(shared: Rc<Shared>, mut requests: tokio::sync::mpsc::UnboundedReceiver<AdminRequest>) {
    while let Some(request) = requests.recv().await {
        let raft: Option<Raft> = shared.engine.borrow().state.raft.as_deref().and_then(|r| r.raft.clone());
        let outcome = match raft {
            Some(raft) => change_membership(&raft, request.change.clone()).await,
            None => Err("the shard is not running".to_string()),
        };
        match &outcome {
            Ok(()) => crate::log::notice(format_args!("Raft: membership change made: {:?}", request.change)),
            Err(e) => crate::log::warning(format_args!("Raft: membership change {:?} failed: {e}", request.change)),
        }
        let outcome = outcome.map(|()| crate::reply::Reply::OK).map_err(crate::commands::CmdError::err);
        shared.engine.borrow_mut().state.finish_admin(request.client, outcome);
        shared.after_batch();
    }
}

/// What a failed change tells its client.
fn change_error(e: openraft::error::RaftError<NodeId, openraft::error::ClientWriteError<NodeId, crate::raft::Member>>) -> String {
    use openraft::error::{ClientWriteError, RaftError};
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => {
            "this member stopped leading the shard before the change was made; ask the new leader".into()
        }
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => e.to_string(),
        RaftError::Fatal(e) => format!("the Raft instance stopped: {e}"),
    }
}

/// One membership change, through openraft's joint consensus. A new
/// member is a learner until its log matches the leader's as it was when
/// it was added, then a voter.
async fn change_membership(raft: &Raft, change: MembershipChange) -> Result<(), String> {
    use openraft::ChangeMembers;
    match change {
        MembershipChange::Add(id, member) => {
            let added = raft.add_learner(id, member, false).await.map_err(change_error)?;
            let target = raft.metrics().borrow().last_log_index.unwrap_or(added.log_id.index);
            let caught_up = raft
                .wait(Some(CATCH_UP))
                .metrics(
                    |m| {
                        m.replication
                            .as_ref()
                            .and_then(|r| r.get(&id))
                            .is_some_and(|matched| matched.is_some_and(|l| l.index >= target))
                    },
                    "the new member to catch up",
                )
                .await;
            if caught_up.is_err() {
                return Err(format!(
                    "member {id} did not catch up with the log within {} s: it stays a learner (KEYLOCK DELMEMBER {id} removes it)",
                    CATCH_UP.as_secs()
                ));
            }
            raft.change_membership(ChangeMembers::AddVoterIds([id].into()), false)
                .await
                .map_err(change_error)?;
        }
        MembershipChange::Remove(id) => {
            let voter = raft.metrics().borrow().membership_config.membership().voter_ids().any(|v| v == id);
            let change = if voter {
                ChangeMembers::RemoveVoters([id].into())
            } else {
                ChangeMembers::RemoveNodes([id].into())
            };
            raft.change_membership(change, false).await.map_err(change_error)?;
        }
    }
    Ok(())
}

/// Starts a probe task for each member that has none (see
/// [`probe_loop`]).
fn start_probes(shared: &Rc<Shared>) {
    let new: Vec<NodeId> = {
        let mut engine = shared.engine.borrow_mut();
        let Some(r) = engine.state.raft.as_deref_mut() else { return };
        let me = r.id;
        let new: Vec<NodeId> = r
            .members
            .keys()
            .copied()
            .filter(|id| *id != me && !r.probing.contains(id))
            .collect();
        r.probing.extend(new.iter().copied());
        new
    };
    for id in new {
        tokio::task::spawn_local(probe_loop(shared.clone(), id));
    }
}

/// Probes member `id` five times per `raft-down-after-milliseconds`, as a
/// sentinel pings the instances it monitors: when it has not answered for
/// that long it is down to this member (`s_down` in SENTINEL's replies)
/// and `+sdown` is published; `-sdown` when it answers again. Ends when
/// the member leaves the shard.
async fn probe_loop(shared: Rc<Shared>, id: NodeId) {
    let mut stream = None;
    loop {
        let (addr, down_after) = {
            let mut engine = shared.engine.borrow_mut();
            let down_after = crate::commands::sentinel::down_after_ms(&engine.state);
            let Some(r) = engine.state.raft.as_deref_mut() else { return };
            match r.members.get(&id) {
                Some(m) => (m.raft_addr.clone(), down_after),
                None => {
                    r.probing.remove(&id);
                    r.down.remove(&id);
                    return;
                }
            }
        };
        let every = std::time::Duration::from_millis((down_after / 5).clamp(20, 1000));
        let started = tokio::time::Instant::now();
        let answer = crate::raft::network::probe(&mut stream, &addr, every).await;
        let changed = {
            let mut engine = shared.engine.borrow_mut();
            let ok = answer.is_some();
            if let Some(Some(card)) = answer {
                engine.state.raft_learn_card(id, card);
            }
            engine
                .state
                .raft_probed(id, ok, std::time::Instant::now(), std::time::Duration::from_millis(down_after))
        };
        if let Some(down) = changed {
            sdown(&shared, id, down);
        }
        tokio::time::sleep_until(started + every).await;
    }
}

/// Publishes Sentinel's `+sdown` (or `-sdown`) for member `id`.
fn sdown(shared: &Rc<Shared>, id: NodeId, down: bool) {
    let mut engine = shared.engine.borrow_mut();
    let engine = &mut *engine;
    let Some(addr) = engine
        .state
        .raft
        .as_deref()
        .and_then(|r| r.members.get(&id))
        .map(|m| m.client_addr.clone())
    else {
        return;
    };
    crate::log::notice(format_args!(
        "Raft: member {id} at {addr} is {}",
        if down { "down (unanswered probes)" } else { "up again" }
    ));
    let channel = bytes::Bytes::from_static(if down { b"+sdown" } else { b"-sdown" });
    for message in crate::commands::sentinel::sdown_messages(&engine.state, id, &addr) {
        engine
            .state
            .publish(&mut engine.scripts.client, crate::pubsub::Kind::Channel, &channel, &message);
    }
}

/// Redis Sentinel's `+switch-master` when the leader is another member
/// than the last one this member knew (see `commands::sentinel`).
fn switch_master(shared: &Rc<Shared>, new: Option<String>) {
    let mut engine = shared.engine.borrow_mut();
    let engine = &mut *engine;
    let Some(r) = engine.state.raft.as_deref_mut() else { return };
    let Some(new) = new else { return };
    let Some(old) = r.last_leader.replace(new.clone()) else { return };
    if old == new {
        return;
    }
    let name = crate::commands::sentinel::shard_name(&engine.state).to_string();
    let message = crate::commands::sentinel::switch_master_message(&name, &old, &new);
    let channel = bytes::Bytes::from_static(b"+switch-master");
    engine
        .state
        .publish(&mut engine.scripts.client, crate::pubsub::Kind::Channel, &channel, &message);
}

/// After a batch: its effects are queued for the next entry; the output
/// queued meanwhile goes once that entry is committed. One entry is in
/// flight at a time and the batches that come meanwhile go together as
/// the next one: a commit round serves every client that wrote during the
/// previous one.
pub fn propose(shared: &Rc<Shared>) {
    if !shared.engine.borrow_mut().state.queue_raft_effects() {
        return;
    }
    let shared = shared.clone();
    tokio::task::spawn_local(async move {
        loop {
            let (proposal, raft) = {
                let mut engine = shared.engine.borrow_mut();
                let Some(raft) = engine.state.raft.as_deref().and_then(|r| r.raft.clone()) else {
                    engine.state.raft_writer_stopped();
                    return;
                };
                // Taken only with an instance to propose it to: the queue
                // of proposals in flight must match the log.
                let Some(proposal) = engine.state.next_raft_proposal() else {
                    return;
                };
                (proposal, raft)
            };
            // The output it holds goes when the leader applies the entry
            // (see `raft_apply`), a step before openraft answers here.
            if let Err(e) = raft.client_write(proposal).await {
                // Not the leader any more: the role watcher rebuilds.
                tracing::debug!(error = %e, "a proposal was not committed");
                shared.engine.borrow_mut().state.raft_writer_stopped();
                return;
            }
        }
    });
}
