//! `nodes.conf` (`cluster-config-file`): the cluster as this node knows
//! it, in Redis 7.0's format — the CLUSTER NODES lines, HANDSHAKE nodes
//! left out, then `vars currentEpoch N lastVoteEpoch M` — so that a node
//! keeps its id, its slots and the others across a restart, and a file
//! redis-server wrote loads here (cluster.c's `clusterLoadConfig`,
//! `clusterSaveConfig`, `clusterLockConfig`).
//!
//! The file is rewritten in place (written over, then truncated), as
//! Redis does, because the node holds an exclusive `flock` on it for its
//! whole life: a second node started on the same file stops with Redis's
//! message.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;

use super::{Cluster, Node, SLOTS, flag};

const CORRUPTED: &str = "Unrecoverable error: corrupted cluster config file.";

/// Locks `path` for this process (creating it empty when missing). The
/// returned file keeps the lock.
pub fn lock(path: &str) -> Result<std::fs::File, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| format!("Can't open {path} in order to acquire a lock: {}", crate::error::os_error_text(&e)))?;
    // SAFETY: flock on a descriptor the file owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == -1 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(format!(
                "Sorry, the cluster configuration file {path} is already used by a different Redis Cluster node. Please make sure that different nodes use different cluster configuration files."
            ));
        }
        return Err(format!("Impossible to lock {path}: {}", crate::error::os_error_text(&e)));
    }
    Ok(file)
}

/// Reads the configuration: None when the file is missing or empty (a
/// new node), an error for a file that cannot be parsed.
pub fn load(path: &str, now_ms: u64) -> Result<Option<Cluster>, String> {
    let mut text = String::new();
    match std::fs::File::open(path) {
        Ok(mut f) => {
            f.read_to_string(&mut text)
                .map_err(|e| format!("Loading the cluster node config from {path}: {}", crate::error::os_error_text(&e)))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "Loading the cluster node config from {path}: {}",
                crate::error::os_error_text(&e)
            ));
        }
    }
    if text.trim().is_empty() {
        return Ok(None);
    }
    parse(&text, path, now_ms).map(Some)
}

fn parse(text: &str, path: &str, now_ms: u64) -> Result<Cluster, String> {
    let mut cluster = Cluster::new(path.to_string(), now_ms);
    // Nodes as read, with the slot fields of each, placed afterwards.
    let mut read: Vec<(Node, Vec<String>)> = Vec::new();
    for line in text.lines() {
        let argv: Vec<&str> = line.split_whitespace().collect();
        if argv.is_empty() {
            continue;
        }
        if argv[0] == "vars" {
            if argv.len().is_multiple_of(2) {
                return Err(CORRUPTED.into());
            }
            for pair in argv[1..].chunks(2) {
                let value: u64 = pair[1].parse().map_err(|_| CORRUPTED.to_string())?;
                match pair[0] {
                    "currentEpoch" => cluster.current_epoch = value,
                    "lastVoteEpoch" => cluster.last_vote_epoch = value,
                    other => crate::log::warning(format_args!("Skipping unknown cluster config variable '{other}'")),
                }
            }
            continue;
        }
        if argv.len() < 8 {
            return Err(CORRUPTED.into());
        }
        let mut node = Node::new(argv[0].to_string(), 0, now_ms);
        // ip:port@cport[,hostname]
        let (addr, hostname) = argv[1].split_once(',').unwrap_or((argv[1], ""));
        let (ipport, cport) = match addr.split_once('@') {
            Some((ipport, cport)) => (ipport, Some(cport)),
            None => (addr, None),
        };
        let colon = ipport.rfind(':').ok_or_else(|| CORRUPTED.to_string())?;
        node.ip = ipport[..colon].to_string();
        node.port = ipport[colon + 1..].parse().map_err(|_| CORRUPTED.to_string())?;
        node.cport = match cport {
            Some(c) => c.parse().map_err(|_| CORRUPTED.to_string())?,
            None => node.port.wrapping_add(10000),
        };
        node.hostname = hostname.to_string();
        for name in argv[2].split(',') {
            node.flags |= match name {
                "myself" => flag::MYSELF,
                "master" => flag::MASTER,
                "slave" => flag::SLAVE,
                "fail?" => flag::PFAIL,
                "fail" => flag::FAIL,
                "handshake" => flag::HANDSHAKE,
                "noaddr" => flag::NOADDR,
                "nofailover" => flag::NOFAILOVER,
                "noflags" => 0,
                _ => return Err(CORRUPTED.into()),
            };
        }
        if argv[3] != "-" {
            node.master = Some(argv[3].to_string());
        }
        node.ping_sent = if argv[4].parse::<u64>().unwrap_or(0) > 0 { now_ms } else { 0 };
        node.pong_received = if argv[5].parse::<u64>().unwrap_or(0) > 0 { now_ms } else { 0 };
        node.config_epoch = argv[6].parse().map_err(|_| CORRUPTED.to_string())?;
        read.push((node, argv[8..].iter().map(|s| s.to_string()).collect()));
    }
    let Some(me) = read.iter().position(|(n, _)| n.has(flag::MYSELF)) else {
        return Err(CORRUPTED.into());
    };
    let (myself, my_slots) = read.remove(me);
    read.insert(0, (myself, my_slots));
    cluster.nodes.clear();
    let mut slot_fields = Vec::new();
    for (i, (node, fields)) in read.into_iter().enumerate() {
        if i == 0 {
            cluster.nodes.push(node);
        } else {
            cluster.add_node(node);
        }
        slot_fields.push(fields);
    }
    for (i, fields) in slot_fields.iter().enumerate() {
        for field in fields {
            if let Some(open) = field.strip_prefix('[') {
                // [slot->-id] or [slot-<-id]
                let body = open.strip_suffix(']').ok_or_else(|| CORRUPTED.to_string())?;
                let (slot, dir, id) = if let Some((s, id)) = body.split_once("->-") {
                    (s, true, id)
                } else if let Some((s, id)) = body.split_once("-<-") {
                    (s, false, id)
                } else {
                    return Err(CORRUPTED.into());
                };
                let slot: u16 = slot.parse().map_err(|_| CORRUPTED.to_string())?;
                if slot as usize >= SLOTS || cluster.index_of(id.as_bytes()).is_none() {
                    return Err(CORRUPTED.into());
                }
                if dir {
                    cluster.migrating.insert(slot, id.to_string());
                } else {
                    cluster.importing.insert(slot, id.to_string());
                }
                continue;
            }
            let (start, end) = match field.split_once('-') {
                Some((a, b)) => (a, b),
                None => (field.as_str(), field.as_str()),
            };
            let start: u16 = start.parse().map_err(|_| CORRUPTED.to_string())?;
            let end: u16 = end.parse().map_err(|_| CORRUPTED.to_string())?;
            if start > end || end as usize >= SLOTS {
                return Err(CORRUPTED.into());
            }
            for s in start..=end {
                cluster.add_slot(i, s);
            }
        }
    }
    // The file says what this node had; it comes back to that, not
    // further.
    cluster.current_epoch = cluster.current_epoch.max(cluster.max_epoch());
    cluster.save_pending = false;
    cluster.fsync_pending = false;
    Ok(cluster)
}

/// The file's text (`clusterSaveConfig`).
pub fn render(cluster: &Cluster) -> String {
    let mut text = cluster.describe_all(true);
    text.push_str(&format!(
        "vars currentEpoch {} lastVoteEpoch {}\n",
        cluster.current_epoch, cluster.last_vote_epoch
    ));
    text
}

/// Writes the file in place, synced to disk when `sync`; a text the file
/// holds already is not written again.
pub fn save(cluster: &mut Cluster, path: &str, sync: bool) -> std::io::Result<()> {
    let text = render(cluster);
    if !sync && cluster.saved_text == text {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path)?;
    let old_len = file.metadata()?.len();
    file.write_all(text.as_bytes())?;
    if old_len > text.len() as u64 {
        file.set_len(text.len() as u64)?;
    }
    if sync {
        file.sync_all()?;
    }
    cluster.saved_text = text;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const REDIS_WROTE: &str = "\
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30002@40002 master - 0 1700000000000 2 connected 5461-10922
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30001@40001 myself,master - 0 1700000000000 1 connected 0-5460 [5461-<-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@40003 master - 0 1700000000000 3 connected 10923-16383
vars currentEpoch 3 lastVoteEpoch 0
";

    #[test]
    fn a_file_redis_wrote_loads_and_renders_back() {
        let c = parse(REDIS_WROTE, "nodes.conf", 1).unwrap();
        assert_eq!(c.my_id(), "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1");
        assert_eq!(c.nodes.len(), 3);
        assert_eq!(c.current_epoch, 3);
        assert!(c.serves(0) && c.serves(5460) && !c.serves(5461));
        assert_eq!(c.owner(16383).unwrap().port, 30003);
        assert_eq!(
            c.importing.get(&5461).map(String::as_str),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        let again = parse(&render(&c), "nodes.conf", 1).unwrap();
        assert_eq!(render(&again), render(&c));
    }

    #[test]
    fn a_file_without_this_node_is_corrupted() {
        let text = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30002@40002 master - 0 0 2 connected\n";
        assert_eq!(parse(text, "n", 1).unwrap_err(), CORRUPTED);
        assert_eq!(parse("abc 1:2@3 master -\n", "n", 1).unwrap_err(), CORRUPTED);
    }
}
