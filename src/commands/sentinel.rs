//! The Sentinel protocol of a Raft shard's members, for clients that
//! follow a master through Redis Sentinel (Redisson's
//! `useSentinelServers()`, redis-py's `Sentinel`, Lettuce…): every member
//! answers SENTINEL as a sentinel monitoring the shard under the name
//! `raft-shard-name` (default `mymaster`) would, the Raft leader being the
//! master and the other members its replicas and the other sentinels; and
//! when the leader changes, each member publishes Redis Sentinel's
//! `+switch-master <name> <old-ip> <old-port> <new-ip> <new-port>`, so
//! that subscribers follow a failover without a Redis Sentinel process.
//! Each member probes the others (`server::raft::probe_loop`); one that
//! goes unanswered for `raft-down-after-milliseconds` is subjectively down
//! to it, as to a sentinel: `s_down` in its flags, and `+sdown` (then
//! `-sdown`) published, so that clients stop reading from a dead replica.
//!
//! SENTINEL is served only by shard members (a standalone keylock, like a
//! standalone redis-server, does not know it), before the command table:
//! it is the table of a sentinel process, not of a data server.

use bytes::Bytes;

use crate::engine::State;
use crate::reply::Reply;

/// The name clients ask for.
pub fn shard_name(state: &State) -> &str {
    state.params.value("raft-shard-name").unwrap_or("mymaster")
}

fn bulk(s: impl Into<String>) -> Reply {
    Reply::Bulk(Bytes::from(s.into()))
}

fn split_addr(addr: &str) -> (String, String) {
    match addr.rsplit_once(':') {
        Some((ip, port)) => (ip.to_string(), port.to_string()),
        None => (addr.to_string(), "0".to_string()),
    }
}

/// One instance as Redis's `addReplySentinelRedisInstance` lists it.
fn instance(fields: Vec<(&'static str, String)>) -> Reply {
    Reply::Map(fields.into_iter().map(|(k, v)| (Reply::bulk_static(k), bulk(v))).collect())
}

/// The fields every instance has. `seen`: whether this member holds the
/// instance down (Sentinel's `s_down` flag), and how long ago it last
/// answered a probe (ms).
fn common(state: &State, name: String, addr: &str, runid: &str, flags: &str, (down, since_ok): (bool, u64)) -> Vec<(&'static str, String)> {
    let (ip, port) = split_addr(addr);
    let flags = if down { format!("{flags},s_down") } else { flags.to_string() };
    vec![
        ("name", name),
        ("ip", ip),
        ("port", port),
        ("runid", runid.to_string()),
        ("flags", flags),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", if down { since_ok.to_string() } else { "0".into() }),
        ("last-ok-ping-reply", since_ok.to_string()),
        ("last-ping-reply", since_ok.to_string()),
        ("down-after-milliseconds", down_after_ms(state).to_string()),
    ]
}

/// How long a member goes unanswered before the others hold it down.
pub fn down_after_ms(state: &State) -> u64 {
    state.params.int("raft-down-after-milliseconds").unwrap_or(5000).max(1) as u64
}

/// Sentinel's `+sdown` / `-sdown` message for member `id` at `addr`, as
/// Redis's `sentinelEvent` formats it (`%@`): `master <name> <ip> <port>`
/// for the leader; for another member, as a replica and as a sentinel,
/// `<type> <name> <ip> <port> @ <master-name> <master-ip> <master-port>`.
pub fn sdown_messages(state: &State, id: u64, addr: &str) -> Vec<Bytes> {
    let Some(r) = state.raft.as_deref() else { return Vec::new() };
    let name = shard_name(state);
    let (ip, port) = split_addr(addr);
    let leader = r.leader.as_ref().map(|(l, m)| (*l, m.client_addr.clone()));
    if leader.as_ref().is_some_and(|(l, _)| *l == id) {
        return vec![Bytes::from(format!("master {name} {ip} {port}"))];
    }
    let master_addr = leader
        .map(|(_, a)| a)
        .or_else(|| r.last_leader.clone())
        .unwrap_or_else(|| "?:0".into());
    let (mip, mport) = split_addr(&master_addr);
    let at = format!("@ {name} {mip} {mport}");
    vec![
        Bytes::from(format!("slave {addr} {ip} {port} {at}")),
        Bytes::from(format!("sentinel {} {ip} {port} {at}", sentinel_id(id))),
    ]
}

/// SENTINEL's reply, or None when this server is no shard member (the
/// command is then unknown, as on a redis-server that is no sentinel).
pub fn sentinel(state: &State, argv: &[Bytes]) -> Option<Reply> {
    let r = state.raft.as_deref()?;
    let sub = argv.get(1).map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    let arity = |n: usize, name: &str| -> Option<Reply> {
        (argv.len() != n).then(|| Reply::Error(Bytes::from(format!("ERR wrong number of arguments for 'sentinel|{name}' command"))))
    };
    let name = shard_name(state).to_string();
    let known = |arg: &Bytes| arg.as_ref() == name.as_bytes();
    let no_such = || Reply::Error(Bytes::from_static(b"ERR No such master with that name"));
    let leader = r.leader.as_ref().map(|(id, m)| (*id, m.client_addr.clone()));
    let members = state.raft_members();
    let others: Vec<(u64, String)> = members
        .iter()
        .filter(|(id, _)| leader.as_ref().is_none_or(|(l, _)| l != *id))
        .map(|(id, m)| (*id, m.client_addr.clone()))
        .collect();
    let master = |name: &str| -> Reply {
        let addr = leader.as_ref().map_or("?:0".to_string(), |(_, a)| a.clone());
        let seen = leader.as_ref().map_or((false, 0), |(id, _)| state.raft_liveness(*id));
        let mut f = common(state, name.to_string(), &addr, "", "master", seen);
        f.extend([
            ("info-refresh", "0".to_string()),
            ("role-reported", "master".into()),
            ("role-reported-time", "0".into()),
            ("config-epoch", r.term.to_string()),
            ("num-slaves", others.len().to_string()),
            ("num-other-sentinels", members.len().saturating_sub(1).to_string()),
            ("quorum", (state.raft_voters() / 2 + 1).to_string()),
            ("failover-timeout", "180000".into()),
            ("parallel-syncs", "1".into()),
        ]);
        instance(f)
    };
    let reply = match sub.as_deref() {
        Some("get-master-addr-by-name") => {
            if let Some(e) = arity(3, "get-master-addr-by-name") {
                return Some(e);
            }
            match (&leader, known(&argv[2])) {
                (Some((_, addr)), true) => {
                    let (ip, port) = split_addr(addr);
                    Reply::Array(vec![bulk(ip), bulk(port)])
                }
                _ => Reply::NilArray,
            }
        }
        Some("masters") => {
            if let Some(e) = arity(2, "masters") {
                return Some(e);
            }
            Reply::Array(vec![master(&name)])
        }
        Some("master") => {
            if let Some(e) = arity(3, "master") {
                return Some(e);
            }
            if !known(&argv[2]) {
                return Some(no_such());
            }
            master(&name)
        }
        Some(s @ ("replicas" | "slaves")) => {
            if let Some(e) = arity(3, s) {
                return Some(e);
            }
            if !known(&argv[2]) {
                return Some(no_such());
            }
            let (mhost, mport) = leader.as_ref().map_or(("?".to_string(), "0".to_string()), |(_, a)| split_addr(a));
            Reply::Array(
                others
                    .iter()
                    .map(|(id, addr)| {
                        let seen = state.raft_liveness(*id);
                        let mut f = common(state, addr.clone(), addr, "", "slave", seen);
                        f.extend([
                            ("info-refresh", "0".to_string()),
                            ("role-reported", "slave".into()),
                            ("role-reported-time", "0".into()),
                            ("master-link-down-time", "0".into()),
                            ("master-link-status", if leader.is_some() && !seen.0 { "ok" } else { "err" }.into()),
                            ("master-host", mhost.clone()),
                            ("master-port", mport.clone()),
                            ("slave-priority", "100".into()),
                            ("slave-repl-offset", r.last_applied.map_or(0, |l| l.index).to_string()),
                            ("replica-announced", "1".into()),
                        ]);
                        instance(f)
                    })
                    .collect(),
            )
        }
        Some("sentinels") => {
            if let Some(e) = arity(3, "sentinels") {
                return Some(e);
            }
            if !known(&argv[2]) {
                return Some(no_such());
            }
            Reply::Array(
                members
                    .iter()
                    .filter(|(id, _)| **id != r.id)
                    .map(|(id, m)| {
                        let runid = sentinel_id(*id);
                        let seen = state.raft_liveness(*id);
                        let mut f = common(state, runid.clone(), &m.client_addr, &runid, "sentinel", seen);
                        f.extend([
                            ("last-hello-message", "0".to_string()),
                            ("voted-leader", "?".into()),
                            ("voted-leader-epoch", "0".into()),
                        ]);
                        instance(f)
                    })
                    .collect(),
            )
        }
        Some("myid") if argv.len() == 2 => bulk(sentinel_id(r.id)),
        Some("ckquorum") => {
            if let Some(e) = arity(3, "ckquorum") {
                return Some(e);
            }
            if !known(&argv[2]) {
                return Some(no_such());
            }
            // The voters this member does not hold down, itself among
            // them (Redis's `sentinelIsQuorumReachable`); the quorum is the
            // voters' majority, as the failover's authorization is.
            let usable = r.voters.iter().filter(|id| !r.down.contains(id)).count();
            if usable > r.voters.len() / 2 {
                Reply::Status(Bytes::from(format!(
                    "OK {usable} usable Sentinels. Quorum and failover authorization can be reached"
                )))
            } else {
                Reply::Error(Bytes::from(format!(
                    "NOQUORUM {usable} usable Sentinels. Not enough available Sentinels to reach the specified quorum for this master. Not enough available Sentinels to reach the majority and authorize a failover"
                )))
            }
        }
        _ => {
            let sub = argv.get(1).cloned().unwrap_or_default();
            Reply::Error(Bytes::from(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try SENTINEL HELP.",
                String::from_utf8_lossy(&sub)
            )))
        }
    };
    Some(reply)
}

/// A member's sentinel id: 40 hex characters derived from its Raft id,
/// the same on every member.
pub fn sentinel_id(id: u64) -> String {
    crate::scripting::sha1_hex(format!("keylock-raft-member-{id}").as_bytes())
}

/// `+switch-master`'s message when the leader moves from `old` to `new`
/// (client addresses).
pub fn switch_master_message(name: &str, old: &str, new: &str) -> Bytes {
    let (oip, oport) = split_addr(old);
    let (nip, nport) = split_addr(new);
    Bytes::from(format!("{name} {oip} {oport} {nip} {nport}"))
}
