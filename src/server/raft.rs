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
use crate::raft::{Metrics, Raft};

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
    if params.int("cluster-enabled") == Some(1) {
        return Err(
            "cluster-enabled cannot be used with replication raft yet: a replicated shard is one Redis master to its clients".into(),
        );
    }
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
        if let Some(r) = shared.engine.borrow_mut().state.raft.as_deref_mut() {
            r.raft = Some(raft.clone());
        }
        role_loop(shared, shard, raft).await;
    });
}

/// Committed entries, applied in order on the engine.
async fn apply_loop(shared: Rc<Shared>, mut applies: tokio::sync::mpsc::UnboundedReceiver<EngineCmd>) {
    while let Some(cmd) = applies.recv().await {
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
        let (role, term, leader, last_log_index) = {
            let m = metrics.borrow_and_update();
            let leader = m
                .current_leader
                .and_then(|id| m.membership_config.membership().get_node(&id).map(|n| (id, n.clone())));
            (role_of(&m), m.current_term, leader, m.last_log_index.unwrap_or(0))
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
                let Ok(raft) = shard.rebuild().await else { return };
                metrics = raft.metrics();
                if let Some(r) = shared.engine.borrow_mut().state.raft.as_deref_mut() {
                    r.raft = Some(raft);
                }
                seen = None;
                continue;
            }
        }
        if metrics.changed().await.is_err() {
            // The instance shut down (a rebuild makes a new one).
            let raft: Option<Raft> = shared.engine.borrow().state.raft.as_deref().and_then(|r| r.raft.clone());
            match raft {
                Some(r) => metrics = r.metrics(),
                None => return,
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
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
            let (next, raft) = {
                let mut engine = shared.engine.borrow_mut();
                let raft = engine.state.raft.as_deref().and_then(|r| r.raft.clone());
                (engine.state.next_raft_proposal(), raft)
            };
            let (Some((proposal, upto, batches)), Some(raft)) = (next, raft) else {
                return;
            };
            match raft.client_write(proposal).await {
                Ok(_) => {
                    let mut engine = shared.engine.borrow_mut();
                    let engine = &mut *engine;
                    engine.state.raft_committed(upto, batches);
                    engine.state.raft_dumps_due(&engine.scripts);
                }
                Err(e) => {
                    // Not the leader any more: the role watcher rebuilds.
                    tracing::debug!(error = %e, "a proposal was not committed");
                    shared.engine.borrow_mut().state.raft_writer_stopped();
                    return;
                }
            }
        }
    });
}
