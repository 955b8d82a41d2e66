//! Raft messages between members, over TCP on each member's `raft-port`:
//! frames of `[u32 length][bincode message]`, one request then its
//! response at a time on a connection. The sending side is openraft's
//! network factory (a connection per peer, made when first used and
//! again after an error); the receiving side hands each request to the
//! local Raft instance.

use std::io;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{Backoff, RPCOption};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{RaftNetwork, RaftNetworkFactory};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::log_store::LogStore;
use super::{ClusterCard, Member, NodeId, Raft, TypeConfig};

/// This member's cluster identity, as probes are told it (set by the
/// server thread, read by the Raft thread).
pub type SharedCard = std::sync::Arc<std::sync::Mutex<Option<ClusterCard>>>;

/// A frame larger than this closes the connection.
const MAX_FRAME: usize = 256 << 20;

#[derive(Serialize, Deserialize)]
enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A member's liveness probe (see [`probe`]), answered by the network
    /// layer itself.
    Ping,
}

#[derive(Serialize, Deserialize)]
enum Response {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    /// The member's cluster identity, when it is a cluster node.
    Pong(Option<ClusterCard>),
}

async fn write_frame<T: Serialize>(s: &mut TcpStream, msg: &T) -> io::Result<()> {
    let body = bincode::serialize(msg).map_err(io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    s.write_all(&buf).await
}

async fn read_frame<T: DeserializeOwned>(s: &mut TcpStream) -> io::Result<T> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "Raft frame too large"));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await?;
    bincode::deserialize(&body).map_err(io::Error::other)
}

/// When a vote request of this member was last answered by a member
/// with a longer log (openraft then holds its elections back).
pub type GreaterLogSeen = std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>>;

/// openraft's network factory: a connection per peer.
pub struct Network {
    /// The member's log: what it holds on disk bounds the commit index
    /// a leader tells (see `log_store`).
    pub log: LogStore,
    pub greater_log: GreaterLogSeen,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &Member) -> Connection {
        Connection {
            target,
            addr: node.raft_addr.clone(),
            stream: None,
            log: self.log.clone(),
            greater_log: self.greater_log.clone(),
        }
    }
}

pub struct Connection {
    target: NodeId,
    addr: String,
    stream: Option<TcpStream>,
    log: LogStore,
    greater_log: GreaterLogSeen,
}

enum CallError {
    /// No connection could be made: openraft waits [`Connection::backoff`].
    Unreachable(io::Error),
    /// The connection broke or timed out: it may be tried again at once.
    Network(io::Error),
}

impl Connection {
    async fn call(&mut self, req: Request, ttl: Duration) -> Result<Response, CallError> {
        if self.stream.is_none() {
            let s = tokio::time::timeout(ttl, TcpStream::connect(&self.addr))
                .await
                .map_err(|e| CallError::Unreachable(io::Error::new(io::ErrorKind::TimedOut, e)))?
                .map_err(CallError::Unreachable)?;
            s.set_nodelay(true).map_err(CallError::Network)?;
            self.stream = Some(s);
        }
        // Out of `self` while the request is under way: openraft drops
        // this future when its own timeout (the heartbeat interval, for
        // AppendEntries) passes first, and a connection left with a
        // request half sent or its response unread would pair the next
        // request with this one's response. Dropped here, it is closed.
        let Some(mut s) = self.stream.take() else {
            return Err(CallError::Network(io::Error::other("no connection")));
        };
        let res = tokio::time::timeout(ttl, async {
            write_frame(&mut s, &req).await?;
            read_frame::<Response>(&mut s).await
        })
        .await;
        match res {
            Ok(Ok(resp)) => {
                self.stream = Some(s);
                Ok(resp)
            }
            Ok(Err(e)) => Err(CallError::Network(e)),
            Err(elapsed) => Err(CallError::Network(io::Error::new(io::ErrorKind::TimedOut, elapsed))),
        }
    }

    fn rpc_err<E: std::error::Error>(&self, e: CallError) -> RPCError<NodeId, Member, E> {
        match e {
            CallError::Unreachable(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Network(e) => RPCError::Network(NetworkError::new(&e)),
        }
    }

    fn remote<E: std::error::Error>(&self, e: E) -> RPCError<NodeId, Member, E> {
        RPCError::RemoteError(RemoteError::new(self.target, e))
    }
}

fn mismatch() -> CallError {
    CallError::Network(io::Error::new(io::ErrorKind::InvalidData, "Raft response of another kind"))
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId>>> {
        // No follower learns of a commit the leader's own disk does not
        // hold yet.
        rpc.leader_commit = self.log.durable_commit(rpc.leader_commit);
        match self.call(Request::AppendEntries(rpc), option.hard_ttl()).await {
            Ok(Response::AppendEntries(r)) => r.map_err(|e| self.remote(e)),
            Ok(_) => Err(self.rpc_err(mismatch())),
            Err(e) => Err(self.rpc_err(e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId, InstallSnapshotError>>> {
        match self.call(Request::InstallSnapshot(rpc), option.hard_ttl()).await {
            Ok(Response::InstallSnapshot(r)) => r.map_err(|e| self.remote(e)),
            Ok(_) => Err(self.rpc_err(mismatch())),
            Err(e) => Err(self.rpc_err(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId>>> {
        let mine = rpc.last_log_id;
        match self.call(Request::Vote(rpc), option.hard_ttl()).await {
            Ok(Response::Vote(r)) => {
                if let Ok(v) = &r
                    && v.last_log_id > mine
                {
                    *self.greater_log.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::time::Instant::now());
                }
                r.map_err(|e| self.remote(e))
            }
            Ok(_) => Err(self.rpc_err(mismatch())),
            Err(e) => Err(self.rpc_err(e)),
        }
    }

    /// A peer that cannot be reached is tried again after 100 ms, so that
    /// a restarted member catches up soon.
    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(Duration::from_millis(100)))
    }
}

/// Serves the Raft messages that come in on `listener`, each to the
/// instance current when it comes (a rebuild makes a new one, and
/// connections made before it go on).
pub async fn serve(listener: TcpListener, current: watch::Receiver<Raft>, card: SharedCard) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_connection(stream, current.clone(), card.clone()));
    }
}

async fn serve_connection(mut s: TcpStream, current: watch::Receiver<Raft>, card: SharedCard) {
    while let Ok(req) = read_frame::<Request>(&mut s).await {
        let raft = current.borrow().clone();
        let resp = match req {
            Request::AppendEntries(rpc) => Response::AppendEntries(raft.append_entries(rpc).await),
            Request::Vote(rpc) => Response::Vote(raft.vote(rpc).await),
            Request::InstallSnapshot(rpc) => Response::InstallSnapshot(raft.install_snapshot(rpc).await),
            Request::Ping => Response::Pong(card.lock().unwrap_or_else(|e| e.into_inner()).clone()),
        };
        if write_frame(&mut s, &resp).await.is_err() {
            return;
        }
    }
}

/// Whether the member whose Raft messages go to `addr` answers a probe
/// within `ttl`, on the connection kept in `stream` (made again when
/// broken), and its cluster identity when it has one. The Sentinel view
/// of a shard (`+sdown`) and, in cluster mode, which cluster nodes are
/// the shard's members are built on it.
pub async fn probe(stream: &mut Option<TcpStream>, addr: &str, ttl: Duration) -> Option<Option<ClusterCard>> {
    let answered = tokio::time::timeout(ttl, async {
        if stream.is_none() {
            let s = TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            *stream = Some(s);
        }
        let Some(s) = stream.as_mut() else {
            return Err(io::Error::other("no connection"));
        };
        write_frame(s, &Request::Ping).await?;
        match read_frame::<Response>(s).await? {
            Response::Pong(card) => Ok(card),
            _ => Err(io::Error::new(io::ErrorKind::InvalidData, "Raft response of another kind")),
        }
    })
    .await;
    match answered {
        Ok(Ok(card)) => Some(card),
        _ => {
            *stream = None;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call dropped by openraft's own timeout leaves no request or
    /// response behind: the next call gets its own response, not the
    /// late one of the dropped call.
    #[test]
    fn a_dropped_call_does_not_pair_the_next_request_with_its_response() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            // The peer answers a ping late, a vote at once.
            tokio::spawn(async move {
                while let Ok((mut s, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        while let Ok(req) = read_frame::<Request>(&mut s).await {
                            let resp = match req {
                                Request::Ping => {
                                    tokio::time::sleep(Duration::from_millis(300)).await;
                                    Response::Pong(None)
                                }
                                Request::Vote(v) => Response::Vote(Ok(VoteResponse::new(v.vote, None, true))),
                                _ => return,
                            };
                            if write_frame(&mut s, &resp).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            });
            let dir = tempfile::tempdir().unwrap();
            let log = LogStore::open(dir.path(), 1, super::super::log_store::Fsync::No).unwrap();
            let mut conn = Connection {
                target: 2,
                addr,
                stream: None,
                log,
                greater_log: Default::default(),
            };
            let ttl = Duration::from_secs(2);
            let dropped = tokio::time::timeout(Duration::from_millis(50), conn.call(Request::Ping, ttl)).await;
            assert!(dropped.is_err(), "the ping is answered late");
            let vote = VoteRequest::new(openraft::Vote::new(1, 1), None);
            match conn.call(Request::Vote(vote), ttl).await {
                Ok(Response::Vote(Ok(v))) => assert!(v.vote_granted),
                Ok(_) => panic!("the vote was paired with another request's response"),
                Err(_) => panic!("the vote failed"),
            }
        });
    }
}
