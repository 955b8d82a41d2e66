//! A member's Raft instance, on a thread and runtime of its own: the log
//! opened, the Raft messages served on `raft-port`, the shard formed on
//! first start (every member proposes the same membership; openraft keeps
//! one; a member started with `raft-join` proposes none and waits to be
//! added), and the instance made again from its log when the engine
//! rebuilds its dataset.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::log_store::LogStore;
use super::network::{GreaterLogSeen, Network, SharedCard, serve};
use super::state_machine::{Disk, EngineCmd, EngineSender, StateMachine};
use super::{Member, NodeId, Raft};

/// What a member is started with.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    pub id: NodeId,
    pub members: BTreeMap<NodeId, Member>,
    /// Where the log and vote are kept.
    pub dir: PathBuf,
    /// The address Raft messages are served on.
    pub listen: String,
    pub heartbeat_ms: u64,
    /// A snapshot is made every this many entries; the log before it
    /// (but the last thousand) is dropped.
    pub snapshot_entries: u64,
    pub election_timeout_ms: (u64, u64),
    /// A member joining a running shard: on a new log it forms nothing
    /// and waits for the leader to add it.
    pub join: bool,
    /// This member's cluster identity, told to the others' probes.
    pub card: SharedCard,
    /// When an append counts as stored (`raft-fsync`).
    pub fsync: super::log_store::Fsync,
    /// How many bytes of entries the log keeps in memory (`raft-log-memory`).
    pub log_memory: u64,
}

/// When a majority last acknowledged this member as leader (the sending
/// time of the requests they answered); None when it does not lead.
pub type QuorumAckedAt = Arc<std::sync::Mutex<Option<std::time::Instant>>>;

/// Keeps `acked_at` from the instance's metrics, on the Raft thread as
/// soon as they are reported. The metrics say how long ago the last
/// acknowledgement was as of their report, so the instant is reckoned
/// when they are read, and a pause between the report and the reading
/// would stretch a lease by the pause. The task therefore wakes every
/// [`STAMP_TICK`] as well: after a wake that came more than
/// [`STAMP_GAP`] after the previous one (the process or thread was
/// paused, or starved), it drops the instant and trusts only metrics
/// reported after that wake.
async fn stamp_quorum_acks(mut current: watch::Receiver<Raft>, acked_at: QuorumAckedAt) {
    let set = |v: Option<std::time::Instant>| *acked_at.lock().unwrap_or_else(|e| e.into_inner()) = v;
    loop {
        let raft = current.borrow_and_update().clone();
        let mut metrics = raft.metrics();
        let mut last_wake = std::time::Instant::now();
        // Woken by a report (which `changed` marks seen).
        let mut reported = false;
        loop {
            let now = std::time::Instant::now();
            if now.duration_since(last_wake) > STAMP_GAP {
                // What the metrics say now may have been reported before
                // the gap: seen, not used.
                metrics.borrow_and_update();
                set(None);
            } else if reported || metrics.has_changed().unwrap_or(false) {
                // Reported since the last wake, less than STAMP_GAP ago.
                let m = metrics.borrow_and_update();
                let since = (m.state == openraft::ServerState::Leader)
                    .then_some(m.millis_since_quorum_ack)
                    .flatten();
                set(since.map(|ms| now.checked_sub(std::time::Duration::from_millis(ms)).unwrap_or(now)));
            }
            last_wake = now;
            reported = false;
            let replaced = tokio::select! {
                changed = metrics.changed() => match changed {
                    Ok(()) => {
                        reported = true;
                        continue;
                    }
                    // Shut down: a rebuilt instance is coming.
                    Err(_) => current.changed().await,
                },
                () = tokio::time::sleep(STAMP_TICK) => continue,
                replaced = current.changed() => replaced,
            };
            set(None);
            if replaced.is_err() {
                return;
            }
            break;
        }
    }
}

/// How often the stamping task wakes when no metrics come.
const STAMP_TICK: std::time::Duration = std::time::Duration::from_millis(20);
/// A wake this long after the previous one means a pause.
const STAMP_GAP: std::time::Duration = std::time::Duration::from_millis(100);

/// Breaks the ties of candidates that stand at the same instants.
///
/// openraft 0.9 draws a member's election timeout once, when the
/// instance is made, and checks it on a tick that starts again from when
/// the process runs again. Two followers resumed at the same moment (a
/// paused host, SIGSTOP and SIGCONT) whose timeouts round to the same
/// number of ticks stand as candidates at the same instants round after
/// round, each voting for itself, and the shard stays without a leader
/// (20 terms and 9 s were seen with the default timeouts). Raft breaks
/// such ties with a random timeout drawn afresh for each election: when
/// this member's own candidacy (a vote for itself that openraft's timer
/// made) has not won within a moment drawn afresh between half the
/// shortest timeout and the shortest (an election is won in a round
/// trip, and no member stands again sooner), it stands once more, off
/// the others' tick. It does not while a member with a longer log
/// answered it lately (for two longest timeouts): openraft holds such a
/// member back, for the other to win.
async fn break_vote_ties(current: watch::Receiver<Raft>, id: NodeId, (min, max): (u64, u64), greater_log: GreaterLogSeen) {
    use std::time::{Duration, Instant};
    let back_off = Duration::from_millis(2 * max);
    // The candidacy watched, and when to stand again if it has not won.
    let mut watched: Option<(openraft::Vote<NodeId>, Instant)> = None;
    // After standing again at term t: the candidacy it made (t + 1) is
    // left to openraft's own timer.
    let mut left_through_term = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let raft = current.borrow().clone();
        let vote = {
            let m = raft.metrics();
            let m = m.borrow();
            let own = m.state == openraft::ServerState::Candidate
                && m.vote.leader_id().voted_for() == Some(id)
                && !m.vote.is_committed()
                && m.vote.leader_id().term > left_through_term;
            own.then_some(m.vote)
        };
        let Some(vote) = vote else {
            watched = None;
            continue;
        };
        let now = Instant::now();
        match watched {
            Some((v, at)) if v == vote => {
                let held_back = greater_log
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_some_and(|seen| now.duration_since(seen) < back_off);
                if now >= at && !held_back {
                    tracing::debug!("the candidacy did not win: standing again, off the others' tick");
                    left_through_term = vote.leader_id().term + 1;
                    let _ = raft.trigger().elect().await;
                }
            }
            _ => {
                let wait = fastrand::u64(min / 2..min.max(min / 2 + 1));
                watched = Some((vote, now + Duration::from_millis(wait)));
            }
        }
    }
}

/// Requests to the Raft thread.
enum Control {
    /// Shut the instance down and make it again from the log, with a new
    /// state machine (the engine emptied its dataset first).
    Rebuild(oneshot::Sender<Raft>),
}

/// The running member, as the engine sees it.
pub struct Shard {
    pub id: NodeId,
    pub members: BTreeMap<NodeId, Member>,
    /// The Raft instance, once made (a member that restarts applies its
    /// log's committed entries first, which needs the engine running).
    pub ready: Option<oneshot::Receiver<Result<Raft, String>>>,
    /// Committed entries for the engine to apply.
    pub applies: Option<mpsc::UnboundedReceiver<(u64, EngineCmd)>>,
    /// This member's cluster identity, as told to the others.
    pub card: SharedCard,
    /// While it leads: when a majority last acknowledged it (see
    /// [`stamp_quorum_acks`]).
    pub quorum_acked_at: QuorumAckedAt,
    /// What INFO shows of its log.
    pub log_stats: Arc<super::log_store::LogStats>,
    control: mpsc::UnboundedSender<Control>,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("id", &self.id).finish()
    }
}

fn raft_config(cfg: &ShardConfig) -> Result<Arc<openraft::Config>, String> {
    let config = openraft::Config {
        cluster_name: "keylock".into(),
        heartbeat_interval: cfg.heartbeat_ms,
        election_timeout_min: cfg.election_timeout_ms.0,
        election_timeout_max: cfg.election_timeout_ms.1,
        install_snapshot_timeout: 1000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(cfg.snapshot_entries),
        max_in_snapshot_log_to_keep: cfg.snapshot_entries.min(1000),
        ..Default::default()
    };
    config.validate().map(Arc::new).map_err(|e| e.to_string())
}

async fn new_raft(
    cfg: &ShardConfig,
    config: Arc<openraft::Config>,
    log: LogStore,
    disk: Arc<Disk>,
    engine: EngineSender,
    instance: u64,
    greater_log: GreaterLogSeen,
) -> Result<Raft, String> {
    let log = log.for_instance(instance);
    let network = Network {
        log: log.clone(),
        greater_log,
    };
    let state_machine = StateMachine::new(engine, instance, disk, log.clone())?;
    Raft::new(cfg.id, config, network, log, state_machine)
        .await
        .map_err(|e| e.to_string())
}

impl Shard {
    /// Starts the member: binds its Raft port, opens its log, and makes
    /// the Raft instance on a thread of its own.
    pub fn start(cfg: ShardConfig) -> Result<Shard, String> {
        let config = raft_config(&cfg)?;
        let listener =
            std::net::TcpListener::bind(&cfg.listen).map_err(|e| format!("Could not listen for Raft messages on {}: {e}", cfg.listen))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let log = LogStore::open_with(&cfg.dir, cfg.id, cfg.fsync, cfg.log_memory)
            .map_err(|e| format!("Could not open the Raft log in {}: {e}", cfg.dir.display()))?;
        let fresh = log.is_new();
        let disk = Disk::open(cfg.dir.clone(), log.clone())?;
        let log_stats = log.stats.clone();
        let (engine_tx, engine_rx) = mpsc::unbounded_channel();
        let (control_tx, mut control_rx) = mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = oneshot::channel::<Result<Raft, String>>();
        let id = cfg.id;
        let members = cfg.members.clone();
        let card = cfg.card.clone();
        let quorum_acked_at: QuorumAckedAt = Default::default();
        let acked_at = quorum_acked_at.clone();
        std::thread::Builder::new()
            .name("keylock-raft".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                runtime.block_on(async move {
                    // The instance's number: the engine counts its rebuilds
                    // the same way (`RaftState::instance`).
                    let mut instance = 0;
                    let greater_log: GreaterLogSeen = Default::default();
                    let make = |instance| {
                        new_raft(
                            &cfg,
                            config.clone(),
                            log.clone(),
                            disk.clone(),
                            engine_tx.clone(),
                            instance,
                            greater_log.clone(),
                        )
                    };
                    let mut raft = match make(instance).await {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let (current_tx, current_rx) = watch::channel(raft.clone());
                    tokio::spawn(stamp_quorum_acks(current_rx.clone(), acked_at.clone()));
                    tokio::spawn(break_vote_ties(
                        current_rx.clone(),
                        cfg.id,
                        cfg.election_timeout_ms,
                        greater_log.clone(),
                    ));
                    tokio::spawn(serve(listener, current_rx, cfg.card.clone()));
                    if fresh
                        && !cfg.join
                        && let Err(e) = raft.initialize(cfg.members.clone()).await
                    {
                        tracing::debug!(error = %e, "the shard was formed already");
                    }
                    let _ = ready_tx.send(Ok(raft.clone()));
                    while let Some(Control::Rebuild(reply)) = control_rx.recv().await {
                        let _ = raft.shutdown().await;
                        instance += 1;
                        match make(instance).await {
                            Ok(r) => raft = r,
                            Err(e) => {
                                crate::log::warning(format_args!("Raft: the member could not start again: {e}"));
                                std::process::exit(1);
                            }
                        }
                        let _ = current_tx.send(raft.clone());
                        let _ = reply.send(raft.clone());
                    }
                    let _ = raft.shutdown().await;
                });
            })
            .map_err(|e| e.to_string())?;
        Ok(Shard {
            id,
            members,
            ready: Some(ready_rx),
            applies: Some(engine_rx),
            card,
            quorum_acked_at,
            log_stats,
            control: control_tx,
        })
    }

    /// Asks for the instance to be made again from the log; the new
    /// handle comes on the returned channel.
    pub fn rebuild(&self) -> oneshot::Receiver<Raft> {
        let (tx, rx) = oneshot::channel();
        let _ = self.control.send(Control::Rebuild(tx));
        rx
    }
}
