//! The Sentinel protocol of a Raft shard's members, for clients that
//! follow a master through Redis Sentinel (Redisson's
//! `useSentinelServers()`, redis-py's `Sentinel`, Lettuce…): every member
//! answers SENTINEL as a sentinel monitoring the shard under the name
//! `raft-shard-name` (default `mymaster`) would, the Raft leader being the
//! master and the other members its replicas and the other sentinels; and
//! when the leader changes, each member publishes Redis Sentinel's
//! `+switch-master <name> <old-ip> <old-port> <new-ip> <new-port>`, so
//! that subscribers follow a failover without a Redis Sentinel process.
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

fn common(name: String, addr: &str, runid: &str, flags: &str) -> Vec<(&'static str, String)> {
    let (ip, port) = split_addr(addr);
    vec![
        ("name", name),
        ("ip", ip),
        ("port", port),
        ("runid", runid.to_string()),
        ("flags", flags.to_string()),
        ("link-pending-commands", "0".into()),
        ("link-refcount", "1".into()),
        ("last-ping-sent", "0".into()),
        ("last-ok-ping-reply", "0".into()),
        ("last-ping-reply", "0".into()),
        ("down-after-milliseconds", "30000".into()),
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
        let mut f = common(name.to_string(), &addr, "", "master");
        f.extend([
            ("info-refresh", "0".to_string()),
            ("role-reported", "master".into()),
            ("role-reported-time", "0".into()),
            ("config-epoch", r.term.to_string()),
            ("num-slaves", others.len().to_string()),
            ("num-other-sentinels", members.len().saturating_sub(1).to_string()),
            ("quorum", (members.len() / 2 + 1).to_string()),
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
                    .map(|(_, addr)| {
                        let mut f = common(addr.clone(), addr, "", "slave");
                        f.extend([
                            ("info-refresh", "0".to_string()),
                            ("role-reported", "slave".into()),
                            ("role-reported-time", "0".into()),
                            ("master-link-down-time", "0".into()),
                            ("master-link-status", if leader.is_some() { "ok" } else { "err" }.into()),
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
                        let mut f = common(runid.clone(), &m.client_addr, &runid, "sentinel");
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
            let usable = members.len();
            Reply::Status(Bytes::from(format!(
                "OK {usable} usable Sentinels. Quorum and failover authorization can be reached"
            )))
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
