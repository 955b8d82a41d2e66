//! Cluster mode (`cluster-enabled yes`) over TCP.
//!
//! - Two keylock nodes and two redis-server 7.0.15 nodes are each made a
//!   cluster the same way (slots 0-8191 on A, 8192-16383 on B, MEET);
//!   then the same command lines go to both A nodes, and the replies —
//!   redirections, CROSSSLOT, TRYAGAIN, scripts touching keys of another
//!   node, transactions, slots being migrated, CLUSTER SLOTS / NODES /
//!   INFO — are compared byte for byte, node ids and ports replaced by
//!   names.
//! - Three keylock nodes are made a cluster by `redis-cli --cluster
//!   create`, checked by `redis-cli --cluster check`, resharded with keys
//!   in the slots by `redis-cli --cluster reshard`, and used by the
//!   `redis` crate's cluster client; a message published on one node
//!   reaches subscribers of another; a node killed is flagged failed by
//!   the others and the cluster goes down until it is back; a node
//!   restarted keeps its id, epoch and slots from `nodes.conf`.

mod common;

use std::net::SocketAddr;
use std::process::Command;

use common::*;

/// One cluster node: its client address and bus port, and what keeps
/// the process alive.
struct Node {
    addr: SocketAddr,
    cport: u16,
    _process: Box<dyn std::any::Any>,
}

impl Node {
    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn call(&self, args: &[&str]) -> Vec<u8> {
        Raw::connect(self.addr).call(args)
    }

    fn text(&self, args: &[&str]) -> String {
        text(self.call(args))
    }

    fn id(&self) -> String {
        let reply = self.text(&["CLUSTER", "MYID"]);
        reply.lines().nth(1).unwrap().to_string()
    }
}

/// A keylock cluster node in `dir`. The bus port is picked free; a
/// server started meanwhile may take it first, and the node then stops:
/// it is started again on another.
fn keylock_node(dir: &std::path::Path, extra: &[&str]) -> Node {
    for _ in 0..10 {
        let node = try_keylock_node(dir, extra);
        if answers_ping(node.addr) {
            return node;
        }
    }
    panic!("keylock did not start with a free bus port in 10 tries");
}

fn try_keylock_node(dir: &std::path::Path, extra: &[&str]) -> Node {
    let cport = free_port();
    let cport_text = cport.to_string();
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        &cport_text,
        "--dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let bin = Binary::start(&args);
    Node {
        addr: bin.addr,
        cport,
        _process: Box::new(bin),
    }
}

fn redis_node(extra: &[&str]) -> Option<Node> {
    let cport = free_port();
    let cport_text = cport.to_string();
    let mut args = vec!["--cluster-enabled", "yes", "--cluster-port", &cport_text];
    args.extend_from_slice(extra);
    let redis = real_redis_with(&args)?;
    Some(Node {
        addr: redis.addr,
        cport,
        _process: Box::new(redis),
    })
}

/// A keylock cluster node started again in `dir` (its nodes.conf) on
/// the ports it had, once it listens.
fn restarted_node(dir: &std::path::Path, port: u16, cport: u16, extra: &[&str]) -> Node {
    let (port_text, cport_text) = (port.to_string(), cport.to_string());
    let child = Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args(["--port", &port_text, "--cluster-enabled", "yes", "--cluster-port", &cport_text])
        .args(["--repl-diskless-sync-delay", "0"])
        .args(["--dir", dir.to_str().unwrap()])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let node = Node {
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
        cport,
        _process: Box::new(Killed(child)),
    };
    wait_until(10, "the node to listen again", || std::net::TcpStream::connect(node.addr).is_ok());
    node
}

fn info_field(node: &Node, field: &str) -> String {
    let info = node.text(&["CLUSTER", "INFO"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Waits until every node says the cluster is ok and knows `n` nodes,
/// none in a handshake.
fn wait_for_cluster(nodes: &[&Node], n: usize) {
    wait_until(30, "the cluster to form", || {
        nodes.iter().all(|node| {
            let listing = node.text(&["CLUSTER", "NODES"]);
            info_field(node, "cluster_state") == "ok"
                && info_field(node, "cluster_known_nodes") == n.to_string()
                && !listing.contains("handshake")
                && !listing.contains("disconnected")
        })
    });
}

/// Makes `a` and `b` one cluster: slots 0-8191 on `a`, the rest on `b`.
fn form_pair(a: &Node, b: &Node) {
    assert_eq!(a.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]), b"+OK\r\n");
    assert_eq!(b.call(&["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]), b"+OK\r\n");
    assert_eq!(a.call(&["CLUSTER", "SET-CONFIG-EPOCH", "1"]), b"+OK\r\n");
    assert_eq!(b.call(&["CLUSTER", "SET-CONFIG-EPOCH", "2"]), b"+OK\r\n");
    let meet = a.call(&["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string(), &b.cport.to_string()]);
    assert_eq!(meet, b"+OK\r\n");
    wait_for_cluster(&[a, b], 2);
}

/// The lines sent to node A of each pair. `<ID-A>` and `<ID-B>` are
/// replaced by the pair's node ids before sending.
const LINES: &[&[&str]] = &[
    &["INFO", "cluster"],
    &["SET", "bar", "1"],
    &["GET", "bar"],
    &["SET", "foo", "1"],
    &["GET", "foo"],
    &["EXISTS", "foo"],
    &["MSET", "{bar}1", "a", "{bar}2", "b"],
    &["MSET", "bar", "1", "foo", "2"],
    &["MSET", "bar", "1", "b", "2"],
    &["MGET", "bar", "{bar}1", "{bar}2"],
    &["DEL", "foo", "bar"],
    &["DBSIZE"],
    &["KEYS", "b*"],
    &["PING"],
    &["CLUSTER", "COUNTKEYSINSLOT", "5061"],
    &["CLUSTER", "GETKEYSINSLOT", "5061", "10"],
    &["CLUSTER", "GETKEYSINSLOT", "5061", "2"],
    &["CLUSTER", "COUNTKEYSINSLOT", "12182"],
    &["CLUSTER", "KEYSLOT", "foo"],
    &["CLUSTER", "SLOTS"],
    &["SELECT", "0"],
    &["SELECT", "1"],
    &["MOVE", "bar", "1"],
    &["COPY", "bar", "{bar}3"],
    &["COPY", "bar", "{bar}3", "DB", "1"],
    &["SWAPDB", "0", "1"],
    &["REPLICAOF", "127.0.0.1", "1"],
    // Transactions: a queued command redirected aborts the EXEC.
    &["MULTI"],
    &["SET", "bar", "2"],
    &["SET", "foo", "2"],
    &["EXEC"],
    &["MULTI"],
    &["SET", "bar", "3"],
    &["INCR", "{bar}counter"],
    &["EXEC"],
    &["GET", "bar"],
    // Scripts: declared keys are routed as the command's; undeclared
    // keys of another node, or (with a shebang) of another slot, fail.
    &["EVAL", "return redis.call('get', KEYS[1])", "1", "foo"],
    &["EVAL", "return redis.call('get', KEYS[1])", "1", "bar"],
    &["EVAL", "return redis.call('get', KEYS[1])", "2", "bar", "b"],
    &["EVAL", "return redis.call('get', 'foo')", "0"],
    &["EVAL", "return redis.pcall('get', 'foo')", "0"],
    &["EVAL", "return redis.call('get', 'bar')", "0"],
    &["EVAL", "return redis.call('get', 'b')", "1", "bar"],
    &["EVAL", "#!lua\nreturn redis.call('get', 'b')", "1", "bar"],
    &["EVAL", "#!lua\nreturn redis.call('get', '{bar}1')", "1", "bar"],
    &[
        "EVAL",
        "#!lua flags=allow-cross-slot-keys\nreturn redis.call('get', 'b')",
        "1",
        "bar",
    ],
    &["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"],
    &["EVAL", "#!lua\nredis.call('get', 'b'); return redis.call('get', 'bar')", "0"],
    &["FCALL", "nope", "1", "foo"],
    // A slot being migrated from A: keys A still has are served there,
    // others are asked for at B; several keys, some missing: TRYAGAIN.
    &["CLUSTER", "SETSLOT", "5061", "MIGRATING", "<ID-B>"],
    &["GET", "bar"],
    &["GET", "{bar}missing"],
    &["MGET", "bar", "{bar}missing"],
    &["MGET", "{bar}m1", "{bar}m2"],
    &["SET", "{bar}new", "1"],
    &["EVAL", "return redis.call('get', 'bar')", "0"],
    &["EVAL", "return redis.call('get', '{bar}missing')", "0"],
    &["CLUSTER", "SETSLOT", "5061", "STABLE"],
    &["GET", "{bar}missing"],
    // A slot being imported by A: served only after ASKING, for one
    // command.
    &["CLUSTER", "SETSLOT", "12182", "IMPORTING", "<ID-B>"],
    &["GET", "foo"],
    &["ASKING"],
    &["GET", "foo"],
    &["GET", "foo"],
    &["ASKING"],
    &["MGET", "foo", "{foo}2"],
    &["ASKING"],
    &["SET", "foo", "here"],
    &["ASKING"],
    &["MGET", "foo", "{foo}2"],
    &["ASKING"],
    &["PING"],
    &["GET", "foo"],
    &["CLUSTER", "SETSLOT", "12182", "STABLE"],
    &["READONLY"],
    &["GET", "foo"],
    &["READWRITE"],
    // Slot assignment errors once the cluster is formed.
    &["CLUSTER", "ADDSLOTS", "8192"],
    &["CLUSTER", "SETSLOT", "8192", "MIGRATING", "<ID-B>"],
    &["CLUSTER", "SETSLOT", "100", "IMPORTING", "<ID-B>"],
    &["CLUSTER", "SETSLOT", "100", "NODE", "<ID-B>"],
    &["CLUSTER", "SETSLOT", "100", "NODE", "0000000000000000000000000000000000000000"],
    &["CLUSTER", "SET-CONFIG-EPOCH", "9"],
    &["CLUSTER", "FORGET", "<ID-A>"],
    &["CLUSTER", "COUNT-FAILURE-REPORTS", "<ID-B>"],
    &["CLUSTER", "REPLICAS", "<ID-B>"],
    &["CLUSTER", "REPLICATE", "<ID-A>"],
    &["CLUSTER", "REPLICATE", "<ID-B>"],
    &["CLUSTER", "RESET"],
    &["CLUSTER", "FLUSHSLOTS"],
    &["CLUSTER", "SAVECONFIG"],
    &["CLUSTER", "MEET", "127.0.0.1", "abc"],
    &["CLUSTER", "MEET", "nohost", "7000"],
];

/// A reply with the pair's ids and B's address replaced by names.
fn normalized(reply: &[u8], a: &Node, b: &Node, ids: &(String, String)) -> String {
    text(reply.to_vec())
        .replace(&ids.0, "<ID-A>")
        .replace(&ids.1, "<ID-B>")
        .replace(&format!("127.0.0.1:{}", b.port()), "<ADDR-B>")
        .replace(&format!("127.0.0.1:{}", a.port()), "<ADDR-A>")
        .replace(&format!(":{}\r\n", b.port()), ":<PORT-B>\r\n")
        .replace(&format!(":{}\r\n", a.port()), ":<PORT-A>\r\n")
        .replace(&format!("@{}", b.cport), "@<CPORT-B>")
        .replace(&format!("@{}", a.cport), "@<CPORT-A>")
}

/// CLUSTER NODES with its lines sorted and the ping / pong times (which
/// differ from run to run) blanked.
fn nodes_listing(node: &Node, a: &Node, b: &Node, ids: &(String, String)) -> Vec<String> {
    let listing = text(node.call(&["CLUSTER", "NODES"]));
    let body = listing.split_once("\r\n").map_or("", |(_, rest)| rest);
    let mut lines: Vec<String> = body
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut fields: Vec<String> = l.split(' ').map(str::to_string).collect();
            if fields.len() > 5 {
                fields[4] = "<PING>".into();
                fields[5] = "<PONG>".into();
            }
            normalized(fields.join(" ").as_bytes(), a, b, ids)
        })
        .collect();
    lines.sort();
    lines
}

fn replies(a: &Node, b: &Node, resp3: bool) -> Vec<String> {
    let ids = (a.id(), b.id());
    let mut c = Raw::connect(a.addr);
    if resp3 {
        c.call(&["HELLO", "3"]);
    }
    let mut out = Vec::new();
    for line in LINES {
        let words: Vec<String> = line.iter().map(|w| w.replace("<ID-A>", &ids.0).replace("<ID-B>", &ids.1)).collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        out.push(format!("{line:?} -> {}", normalized(&c.call(&words), a, b, &ids)));
    }
    // CLUSTER INFO up to the message counts, which are the bus's own.
    let info = text(c.call(&["CLUSTER", "INFO"]));
    out.push(info.lines().skip(1).take(9).collect::<Vec<_>>().join("\n"));
    out.extend(nodes_listing(a, a, b, &ids));
    out.extend(nodes_listing(b, a, b, &ids));
    out
}

#[test]
fn a_two_node_cluster_answers_as_redis_cluster_does() {
    let Some(ra) = redis_node(&[]) else { return };
    let Some(rb) = redis_node(&[]) else { return };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ka = keylock_node(da.path(), &[]);
    let kb = keylock_node(db.path(), &[]);
    form_pair(&ra, &rb);
    form_pair(&ka, &kb);
    for resp3 in [false, true] {
        if resp3 {
            for n in [&ra, &ka] {
                n.call(&["FLUSHALL"]);
            }
        }
        let want = replies(&ra, &rb, resp3);
        let got = replies(&ka, &kb, resp3);
        let differ: Vec<String> = want
            .iter()
            .zip(&got)
            .filter(|(w, g)| w != g)
            .map(|(w, g)| format!("redis:   {w}\nkeylock: {g}"))
            .collect();
        assert!(differ.is_empty(), "RESP{}:\n{}", if resp3 { 3 } else { 2 }, differ.join("\n\n"));
    }
}

#[test]
fn a_standalone_node_answers_cluster_commands_as_redis_does() {
    let Some(r) = redis_node(&[]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let k = keylock_node(dir.path(), &[]);
    let lines: &[&[&str]] = &[
        &["CLUSTER", "INFO"],
        &["SET", "foo", "bar"],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "SHARDS"],
        &["CLUSTER", "ADDSLOTS", "0", "1", "2"],
        &["CLUSTER", "ADDSLOTS", "2"],
        &["CLUSTER", "ADDSLOTS", "5", "5"],
        &["CLUSTER", "ADDSLOTS", "16384"],
        &["CLUSTER", "ADDSLOTS", "abc"],
        &["CLUSTER", "ADDSLOTSRANGE", "10", "5"],
        &["CLUSTER", "ADDSLOTSRANGE", "10", "20", "15", "30"],
        &["CLUSTER", "ADDSLOTSRANGE", "100", "200", "300"],
        &["CLUSTER", "ADDSLOTSRANGE", "100", "200"],
        &["CLUSTER", "DELSLOTS", "7"],
        &["CLUSTER", "DELSLOTS", "100"],
        &["CLUSTER", "DELSLOTSRANGE", "150", "160"],
        &["CLUSTER", "DELSLOTSRANGE", "150", "160"],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "SHARDS"],
        &["CLUSTER", "COUNTKEYSINSLOT", "0"],
        &["CLUSTER", "COUNTKEYSINSLOT", "16384"],
        &["CLUSTER", "COUNTKEYSINSLOT", "x"],
        &["CLUSTER", "GETKEYSINSLOT", "0", "-1"],
        &["CLUSTER", "GETKEYSINSLOT", "16384", "1"],
        &["CLUSTER", "SETSLOT", "0", "NODE", "0123456789012345678901234567890123456789"],
        &["CLUSTER", "SETSLOT", "0", "MIGRATING", "0123456789012345678901234567890123456789"],
        &[
            "CLUSTER",
            "SETSLOT",
            "5000",
            "MIGRATING",
            "0123456789012345678901234567890123456789",
        ],
        &[
            "CLUSTER",
            "SETSLOT",
            "5000",
            "IMPORTING",
            "0123456789012345678901234567890123456789",
        ],
        &["CLUSTER", "SETSLOT", "0", "IMPORTING", "0123456789012345678901234567890123456789"],
        &["CLUSTER", "SETSLOT", "0", "BOGUS"],
        &["CLUSTER", "SETSLOT", "0", "STABLE", "extra"],
        &["CLUSTER", "SETSLOT", "99999", "STABLE"],
        &["CLUSTER", "FORGET", "0123456789012345678901234567890123456789"],
        &["CLUSTER", "COUNT-FAILURE-REPORTS", "0123456789012345678901234567890123456789"],
        &["CLUSTER", "REPLICAS", "0123456789012345678901234567890123456789"],
        &["CLUSTER", "SLAVES", "0123456789012345678901234567890123456789"],
        &["CLUSTER", "REPLICATE", "0123456789012345678901234567890123456789"],
        &["CLUSTER", "FAILOVER"],
        &["CLUSTER", "FAILOVER", "FORCE"],
        &["CLUSTER", "FAILOVER", "BOGUS"],
        &["CLUSTER", "FAILOVER", "A", "B"],
        &["CLUSTER", "MEET", "127.0.0.1", "7000", "abc"],
        &["CLUSTER", "MEET", "127.0.0.1", "0"],
        &["CLUSTER", "MEET", "127.0.0.1", "7000", "1", "2"],
        &["CLUSTER", "SET-CONFIG-EPOCH", "-1"],
        &["CLUSTER", "SET-CONFIG-EPOCH", "x"],
        &["CLUSTER", "RESET", "BOGUS"],
        &["CLUSTER", "RESET", "SOFT", "extra"],
        &["CLUSTER", "BOGUS"],
        &["CLUSTER", "LINKS"],
        &["CLUSTER", "BUMPEPOCH"],
        &["CLUSTER", "BUMPEPOCH"],
        &["CLUSTER", "SET-CONFIG-EPOCH", "5"],
        &["CLUSTER", "HELP"],
        &["FLUSHALL"],
        &["CLUSTER", "FLUSHSLOTS"],
        &["CLUSTER", "SLOTS"],
        &["ASKING"],
        &["READONLY"],
        &["READWRITE"],
        &["READONLY", "extra"],
        &["SELECT", "x"],
        &["SET", "foo", "bar"],
    ];
    let (rid, kid) = (r.id(), k.id());
    let mut differ = Vec::new();
    for line in lines {
        let want = text(r.call(line)).replace(&rid, "<ID>").replace(&r.port().to_string(), "<PORT>");
        let got = text(k.call(line)).replace(&kid, "<ID>").replace(&k.port().to_string(), "<PORT>");
        if want != got {
            differ.push(format!("{line:?}\n  redis:   {want:?}\n  keylock: {got:?}"));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// Whether redis-cli (Debian's redis-tools, which redis-server brings)
/// is there; with KEYLOCK_REQUIRE_REDIS=1 its absence fails the test.
fn redis_cli_found() -> bool {
    let found = Command::new("redis-cli").arg("--version").output().is_ok();
    if !found && std::env::var("KEYLOCK_REQUIRE_REDIS").is_ok_and(|v| v == "1") {
        panic!("redis-cli is required (KEYLOCK_REQUIRE_REDIS=1) but not on PATH");
    }
    found
}

fn redis_cli(args: &[String]) -> String {
    let out = Command::new("redis-cli").args(args).output().expect("redis-cli runs");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Three keylock nodes made a cluster by `redis-cli --cluster create`.
fn created_cluster(dirs: &[tempfile::TempDir], extra: &[&str]) -> Vec<Node> {
    let nodes: Vec<Node> = dirs.iter().map(|d| keylock_node(d.path(), extra)).collect();
    let mut args = vec!["--cluster".to_string(), "create".into()];
    args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
    args.extend(["--cluster-replicas".into(), "0".into(), "--cluster-yes".into()]);
    let out = redis_cli(&args);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    wait_for_cluster(&nodes.iter().collect::<Vec<_>>(), 3);
    nodes
}

#[test]
fn redis_cli_creates_checks_and_reshards_a_keylock_cluster() {
    if !redis_server_found() || !redis_cli_found() {
        return;
    }
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = created_cluster(&dirs, &[]);
    // Every node sees the same three masters and slot ranges.
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    for n in &nodes {
        let listing = n.text(&["CLUSTER", "NODES"]);
        for (id, range) in ids.iter().zip(["0-5460", "5461-10922", "10923-16383"]) {
            let line = listing
                .lines()
                .find(|l| l.starts_with(id.as_str()))
                .unwrap_or_else(|| panic!("{listing}"));
            assert!(line.ends_with(range), "{line}");
            assert!(line.contains(" master ") || line.contains("myself,master"), "{line}");
        }
    }
    // Keys written through the redis crate's cluster client land on the
    // node serving their slot.
    let urls: Vec<String> = nodes.iter().map(|n| format!("redis://127.0.0.1:{}", n.port())).collect();
    let client = redis::cluster::ClusterClient::new(urls).unwrap();
    let mut cc = client.get_connection().unwrap();
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!("v{i}"))
            .query(&mut cc)
            .unwrap();
    }
    let total: usize = nodes
        .iter()
        .map(|n| text(n.call(&["DBSIZE"])).trim_start_matches(':').trim().parse::<usize>().unwrap())
        .sum();
    assert_eq!(total, 300);
    for n in &nodes {
        let count = text(n.call(&["DBSIZE"])).trim_start_matches(':').trim().parse::<usize>().unwrap();
        assert!(count > 50, "keys spread over the nodes: {count}");
    }
    // 3000 slots, with their keys, move from the first node to the third.
    let out = redis_cli(&[
        "--cluster".into(),
        "reshard".into(),
        format!("127.0.0.1:{}", nodes[0].port()),
        "--cluster-from".into(),
        ids[0].clone(),
        "--cluster-to".into(),
        ids[2].clone(),
        "--cluster-slots".into(),
        "3000".into(),
        "--cluster-yes".into(),
    ]);
    assert!(!out.contains("ERR") && !out.contains("failed"), "{out}");
    wait_until(10, "every node to see the new owner", || {
        nodes.iter().all(|n| {
            let listing = n.text(&["CLUSTER", "NODES"]);
            listing.lines().any(|l| l.starts_with(ids[2].as_str()) && l.contains(" 0-2999 "))
        })
    });
    let check = redis_cli(&["--cluster".into(), "check".into(), format!("127.0.0.1:{}", nodes[1].port())]);
    assert!(check.contains("[OK] All nodes agree about slots configuration."), "{check}");
    assert!(check.contains("[OK] All 16384 slots covered."), "{check}");
    assert!(!check.contains("[WARNING]"), "{check}");
    // Nothing was lost: every key reads back through the cluster client
    // (following the new slot map).
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}", nodes[1].port())]).unwrap();
    let mut cc = client.get_connection().unwrap();
    for i in 0..300 {
        let v: String = redis::cmd("GET").arg(format!("key:{i}")).query(&mut cc).unwrap();
        assert_eq!(v, format!("v{i}"));
    }
    let first: usize = text(nodes[0].call(&["DBSIZE"])).trim_start_matches(':').trim().parse().unwrap();
    let total: usize = nodes
        .iter()
        .map(|n| text(n.call(&["DBSIZE"])).trim_start_matches(':').trim().parse::<usize>().unwrap())
        .sum();
    assert_eq!(total, 300, "no key lost or duplicated by the reshard");
    assert!(first < 100, "the first node gave keys away: {first}");
}

#[test]
fn messages_published_on_one_node_reach_subscribers_of_another() {
    if !redis_server_found() || !redis_cli_found() {
        return;
    }
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = created_cluster(&dirs, &[]);
    let mut sub = Raw::connect(nodes[2].addr);
    sub.call(&["SUBSCRIBE", "news"]);
    let mut psub = Raw::connect(nodes[1].addr);
    psub.call(&["PSUBSCRIBE", "n*"]);
    // Receivers on the publishing node only.
    assert_eq!(nodes[0].call(&["PUBLISH", "news", "hello"]), b":0\r\n");
    assert_eq!(sub.reply(), b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    assert_eq!(psub.reply(), b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
}

#[test]
fn a_dead_node_is_flagged_failed_and_the_cluster_recovers_when_it_is_back() {
    if !redis_server_found() || !redis_cli_found() {
        return;
    }
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = created_cluster(&dirs, &["--cluster-node-timeout", "1000"]);
    let dead_id = nodes[2].id();
    let (port, cport) = (nodes[2].port(), nodes[2].cport);
    drop(nodes.pop());
    wait_until(15, "the others to flag the dead node failed", || {
        nodes.iter().all(|n| {
            let listing = n.text(&["CLUSTER", "NODES"]);
            let line = listing.lines().find(|l| l.starts_with(dead_id.as_str())).unwrap_or("");
            line.contains("master,fail ") && info_field(n, "cluster_state") == "fail"
        })
    });
    assert_eq!(info_field(&nodes[0], "cluster_slots_fail"), "5461");
    let moved = text(nodes[0].call(&["GET", "foo"]));
    assert_eq!(moved, "-CLUSTERDOWN The cluster is down\r\n");
    // The node comes back on its address, with its nodes.conf.
    let back = restarted_node(dirs[2].path(), port, cport, &["--cluster-node-timeout", "1000"]);
    assert_eq!(back.id(), dead_id, "the node keeps its id");
    nodes.push(back);
    wait_until(20, "the cluster to be ok again", || {
        nodes.iter().all(|n| info_field(n, "cluster_state") == "ok")
    });
    let listing = nodes[2].text(&["CLUSTER", "NODES"]);
    assert!(
        listing.lines().any(|l| l.contains("myself,master") && l.ends_with("10923-16383")),
        "{listing}"
    );
}

#[test]
fn a_second_node_on_the_same_nodes_conf_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = keylock_node(dir.path(), &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args([
            "--port",
            "0",
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &free_port().to_string(),
        ])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("Sorry, the cluster configuration file") && log.contains("is already used by a different Redis Cluster node"),
        "{log}"
    );
}

#[test]
fn slots_taken_by_a_newer_claim_lose_their_keys_here() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = keylock_node(da.path(), &[]);
    let b = keylock_node(db.path(), &[]);
    form_pair(&a, &b);
    assert_eq!(b.call(&["SET", "foo", "1"]), b"+OK\r\n");
    assert_eq!(b.call(&["SET", "a", "1"]), b"+OK\r\n");
    // A (epoch 1) takes slot 12182 (foo's) from B (epoch 2), as at the
    // end of a manual migration: SETSLOT NODE on the importing node
    // gives it a new epoch, greater than every other, so its claim wins
    // everywhere.
    assert_eq!(a.call(&["CLUSTER", "SETSLOT", "12182", "IMPORTING", &b.id()]), b"+OK\r\n");
    assert_eq!(a.call(&["CLUSTER", "SETSLOT", "12182", "NODE", &a.id()]), b"+OK\r\n");
    assert_eq!(info_field(&a, "cluster_my_epoch"), "3");
    wait_until(10, "B to see A's claim", || {
        text(b.call(&["GET", "foo"])).starts_with(&format!("-MOVED 12182 127.0.0.1:{}", a.port()))
    });
    // B dropped the keys it held in the slot it lost, and only those.
    assert_eq!(b.call(&["CLUSTER", "COUNTKEYSINSLOT", "12182"]), b":0\r\n");
    assert_eq!(b.call(&["GET", "a"]), b"$1\r\n1\r\n");
    assert_eq!(info_field(&b, "cluster_current_epoch"), "3");
    // KEYLOCK CLUSTER shows the node's view.
    let view = b.text(&["KEYLOCK", "CLUSTER"]);
    assert!(view.starts_with("*10\r\n$4\r\nmode\r\n$7\r\ncluster\r\n"), "{view}");
    assert!(view.contains("$5\r\nnodes\r\n*2\r\n"), "{view}");
}

#[test]
fn the_config_file_keeps_the_node_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (id, path);
    {
        let n = keylock_node(dir.path(), &[]);
        id = n.id();
        assert_eq!(n.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "99", "200", "200"]), b"+OK\r\n");
        assert_eq!(n.call(&["CLUSTER", "SET-CONFIG-EPOCH", "7"]), b"+OK\r\n");
        path = dir.path().join("nodes.conf");
        let conf = std::fs::read_to_string(&path).unwrap();
        assert!(conf.starts_with(&format!("{id} ")), "{conf}");
        assert!(conf.contains(" myself,master - 0 0 7 connected 0-99 200\n"), "{conf}");
        assert!(conf.ends_with("vars currentEpoch 7 lastVoteEpoch 0\n"), "{conf}");
    }
    let n = keylock_node(dir.path(), &[]);
    assert_eq!(n.id(), id);
    let listing = n.text(&["CLUSTER", "NODES"]);
    assert!(listing.contains(" myself,master - 0 0 7 connected 0-99 200\n"), "{listing}");
    assert_eq!(info_field(&n, "cluster_current_epoch"), "7");
    assert_eq!(info_field(&n, "cluster_slots_assigned"), "101");
}

/// Three nodes made a cluster by `redis-cli --cluster create`.
fn create_with_redis_cli(nodes: &[&Node]) {
    let mut args = vec!["--cluster".to_string(), "create".into()];
    args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
    args.extend(["--cluster-replicas".into(), "0".into(), "--cluster-yes".into()]);
    let out = redis_cli(&args);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    wait_for_cluster(nodes, nodes.len());
}

/// A reply with the trio's ids, addresses and ports replaced by names.
fn trio_normalized(reply: &str, nodes: &[&Node], ids: &[String]) -> String {
    let mut out = reply.to_string();
    for (i, (n, id)) in nodes.iter().zip(ids).enumerate() {
        out = out
            .replace(id.as_str(), &format!("<ID-{i}>"))
            .replace(&format!("127.0.0.1:{}", n.port()), &format!("<ADDR-{i}>"))
            .replace(&format!(":{}\r\n", n.port()), &format!(":<PORT-{i}>\r\n"))
            .replace(&format!("int({})", n.port()), &format!("int(<PORT-{i}>)"))
            .replace(&format!("@{}", n.cport), &format!("@<CPORT-{i}>"));
    }
    out
}

/// CLUSTER SHARDS as a sorted list of its shards (Redis lists them in
/// its node table's hash order).
fn shards(node: &Node) -> Vec<String> {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{}", node.port()))
        .unwrap()
        .get_connection()
        .unwrap();
    let value: redis::Value = redis::cmd("CLUSTER").arg("SHARDS").query(&mut c).unwrap();
    let redis::Value::Array(shards) = value else { panic!("{value:?}") };
    let mut shards: Vec<String> = shards.iter().map(|s| format!("{s:?}")).collect();
    shards.sort();
    shards
}

#[test]
fn a_cluster_redis_cli_created_answers_as_redis_cluster_does() {
    if !redis_cli_found() {
        return;
    }
    let redis: Vec<Node> = match (0..3).map(|_| redis_node(&[])).collect::<Option<Vec<_>>>() {
        Some(nodes) => nodes,
        None => return,
    };
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let keylock: Vec<Node> = dirs.iter().map(|d| keylock_node(d.path(), &[])).collect();
    let lines: &[&[&str]] = &[
        &["SET", "bar", "1"],
        &["SET", "key1", "1"],
        &["SET", "foo", "1"],
        &["GET", "{key1}x"],
        &["MGET", "bar", "key1"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "key1"],
        &["EVAL", "return redis.call('get', 'foo')", "0"],
        &["CLUSTER", "KEYSLOT", "key1"],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "COUNTKEYSINSLOT", "5061"],
        &["CLUSTER", "SETSLOT", "5061", "MIGRATING", "<ID-1>"],
        &["GET", "{bar}missing"],
        &["CLUSTER", "SETSLOT", "5061", "STABLE"],
        &["CLUSTER", "COUNT-FAILURE-REPORTS", "<ID-2>"],
        &["CLUSTER", "REPLICAS", "<ID-1>"],
        &["SPUBLISH", "foo", "hello"],
        &["SPUBLISH", "bar", "hello"],
        &["PUBLISH", "foo", "hello"],
        &["PUBSUB", "SHARDNUMSUB", "foo"],
        &["SSUBSCRIBE", "foo"],
        &["SSUBSCRIBE", "bar", "{bar}2"],
        &["SSUBSCRIBE", "bar", "foo"],
        &["SUNSUBSCRIBE", "foo"],
        &["XREAD", "STREAMS", "bar", "foo", "0", "0"],
        &["XREAD", "STREAMS", "foo", "0"],
        &["SORT", "bar", "BY", "nosort", "STORE", "foo"],
        &["ZUNIONSTORE", "foo", "1", "bar"],
        &["MIGRATE", "127.0.0.1", "1", "", "0", "10", "KEYS", "foo"],
        &["EVAL", "return 1", "2", "bar", "foo"],
        &["FCALL", "f", "1", "foo"],
        &["LMPOP", "2", "bar", "{bar}x", "LEFT"],
        &["GEORADIUS", "bar", "0", "0", "1", "km", "STORE", "foo"],
        &["OBJECT", "ENCODING", "foo"],
        &["MEMORY", "USAGE", "foo"],
        &["DEBUG", "OBJECT", "foo"],
        &["TYPE", "foo"],
    ];
    let run = |nodes: &[&Node]| -> Vec<String> {
        create_with_redis_cli(nodes);
        let ids: Vec<String> = nodes.iter().map(|n| n.id()).collect();
        let mut out = Vec::new();
        for line in lines {
            let words: Vec<String> = line
                .iter()
                .map(|w| {
                    let mut w = w.to_string();
                    for (i, id) in ids.iter().enumerate() {
                        w = w.replace(&format!("<ID-{i}>"), id);
                    }
                    w
                })
                .collect();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            out.push(format!("{line:?} -> {}", trio_normalized(&nodes[0].text(&words), nodes, &ids)));
        }
        for n in nodes {
            let info = n.text(&["CLUSTER", "INFO"]);
            out.push(info.lines().skip(1).take(9).collect::<Vec<_>>().join("\n"));
            let listing = n.text(&["CLUSTER", "NODES"]);
            let mut lines: Vec<String> = listing
                .lines()
                .skip(1)
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let mut f: Vec<&str> = l.split(' ').collect();
                    f[4] = "<PING>";
                    f[5] = "<PONG>";
                    trio_normalized(&f.join(" "), nodes, &ids)
                })
                .collect();
            lines.sort();
            out.extend(lines);
            out.extend(shards(n).into_iter().map(|s| trio_normalized(&s, nodes, &ids)));
        }
        out
    };
    let want = run(&redis.iter().collect::<Vec<_>>());
    let got = run(&keylock.iter().collect::<Vec<_>>());
    let differ: Vec<String> = want
        .iter()
        .zip(&got)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("redis:   {w}\nkeylock: {g}"))
        .collect();
    assert!(differ.is_empty() && want.len() == got.len(), "{}", differ.join("\n\n"));
}

#[test]
fn a_client_blocked_on_a_slot_that_moves_away_is_redirected() {
    let Some(ra) = redis_node(&[]) else { return };
    let Some(rb) = redis_node(&[]) else { return };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ka = keylock_node(da.path(), &[]);
    let kb = keylock_node(db.path(), &[]);
    let mut seen = Vec::new();
    for (a, b) in [(&ra, &rb), (&ka, &kb)] {
        form_pair(a, b);
        let mut blocked = Raw::connect(a.addr);
        blocked.send_cmd(&[b"BLPOP", b"bar", b"0"]);
        let mut zblocked = Raw::connect(a.addr);
        zblocked.send_cmd(&[b"BZPOPMIN", b"{bar}z", b"0"]);
        wait_until(5, "the clients to block", || {
            text(a.call(&["INFO", "clients"])).contains("blocked_clients:2")
        });
        // Slot 5061 (bar's) is given to B: A's blocked clients are sent
        // there.
        assert_eq!(a.call(&["CLUSTER", "SETSLOT", "5061", "NODE", &b.id()]), b"+OK\r\n");
        let moved = format!("-MOVED 5061 127.0.0.1:{}\r\n", b.port());
        assert_eq!(text(blocked.reply()), moved);
        assert_eq!(text(zblocked.reply()), moved);
        assert!(text(a.call(&["INFO", "clients"])).contains("blocked_clients:0"));
        seen.push(text(a.call(&["INFO", "errorstats"])).replace(&b.port().to_string(), "<PORT>"));
    }
    assert_eq!(seen[0], seen[1], "the redirections are counted as Redis counts them");
}

#[test]
fn a_node_loading_keys_takes_their_unassigned_slots_and_refuses_other_databases() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    {
        let standalone = Binary::start(&["--dir", d]);
        let mut c = Raw::connect(standalone.addr);
        c.call(&["SET", "bar", "1"]);
        c.call(&["SET", "foo", "2"]);
        assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    }
    {
        let node = keylock_node(dir.path(), &[]);
        let listing = node.text(&["CLUSTER", "NODES"]);
        assert!(listing.contains(" myself,master - 0 0 0 connected 5061 12182\n"), "{listing}");
        assert_eq!(node.call(&["CLUSTER", "COUNTKEYSINSLOT", "5061"]), b":1\r\n");
        let conf = std::fs::read_to_string(dir.path().join("nodes.conf")).unwrap();
        assert!(conf.contains(" connected 5061 12182\n"), "{conf}");
    }
    // Keys in database 1: a cluster node cannot hold them.
    std::fs::remove_file(dir.path().join("nodes.conf")).unwrap();
    {
        let standalone = Binary::start(&["--dir", d]);
        let mut c = Raw::connect(standalone.addr);
        c.call(&["SELECT", "1"]);
        c.call(&["SET", "other", "1"]);
        assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args([
            "--port",
            "0",
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &free_port().to_string(),
            "--dir",
            d,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("You can't have keys in a DB different than DB 0 when in Cluster mode. Exiting."),
        "{log}"
    );
}

#[test]
fn a_node_whose_port_config_set_moves_announces_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let node = keylock_node(dir.path(), &[]);
    let moved = free_port();
    assert_eq!(node.text(&["CONFIG", "SET", "port", &moved.to_string()]), "+OK\r\n");
    let addr: SocketAddr = format!("127.0.0.1:{moved}").parse().unwrap();
    assert!(answers_ping(addr));
    let nodes = text(Raw::connect(addr).call(&["CLUSTER", "NODES"]));
    assert!(nodes.contains(&format!(":{moved}@{} myself,master", node.cport)), "{nodes}");
}

/// The node whose CLUSTER NODES line (in `node`'s view) names `id`.
fn line_of(node: &Node, id: &str) -> String {
    let listing = node.text(&["CLUSTER", "NODES"]);
    listing.lines().find(|l| l.starts_with(id)).unwrap_or("").to_string()
}

/// `redis-cli --cluster create --cluster-replicas 1` on six keylocks:
/// three masters, each with a replica that replicates it (CLUSTER
/// REPLICATE), serves reads after READONLY and sends the rest to its
/// master; CLUSTER FAILOVER hands a master's slots to its replica (its
/// master paused, the masters voting a new epoch) and the old master
/// replicates the new one; TAKEOVER takes them back without a vote.
#[test]
fn redis_cli_creates_a_cluster_with_replicas_that_replicate_and_fail_over() {
    if !redis_server_found() || !redis_cli_found() {
        return;
    }
    let dirs: Vec<_> = (0..6).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Node> = dirs.iter().map(|d| keylock_node(d.path(), &[])).collect();
    let mut args = vec!["--cluster".to_string(), "create".into()];
    args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
    args.extend(["--cluster-replicas".into(), "1".into(), "--cluster-yes".into()]);
    let out = redis_cli(&args);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    let all: Vec<&Node> = nodes.iter().collect();
    wait_for_cluster(&all, 6);
    wait_until(10, "every node to see three replicas", || {
        all.iter().all(|n| n.text(&["CLUSTER", "NODES"]).matches("slave").count() == 3)
    });
    let check = redis_cli(&["--cluster".into(), "check".into(), format!("127.0.0.1:{}", nodes[0].port())]);
    assert!(check.contains("[OK] All nodes agree about slots configuration."), "{check}");
    assert_eq!(check.matches("1 additional replica(s)").count(), 3, "{check}");
    // Writes through the cluster client reach the masters and their replicas.
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}", nodes[0].port())]).unwrap();
    let mut cc = client.get_connection().unwrap();
    for i in 0..200 {
        let _: () = redis::cmd("SET").arg(format!("key:{i}")).arg(i).query(&mut cc).unwrap();
    }
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    let master_of = |i: usize| -> usize {
        let line = line_of(&nodes[i], &ids[i]);
        let master = line.split(' ').nth(3).unwrap().to_string();
        ids.iter().position(|id| *id == master).unwrap()
    };
    let replicas: Vec<usize> = (0..6).filter(|&i| line_of(&nodes[i], &ids[i]).contains("slave")).collect();
    assert_eq!(replicas.len(), 3);
    for &r in &replicas {
        let m = master_of(r);
        assert!(line_of(&nodes[m], &ids[m]).contains("myself,master"));
        wait_until(10, "the replica to have its master's keys", || {
            nodes[r].text(&["DBSIZE"]) == nodes[m].text(&["DBSIZE"])
        });
        assert_eq!(info_field_of(&nodes[r], "role"), "slave");
        // A key of the master's: MOVED there, read here after READONLY.
        let key = (0..200)
            .map(|i| format!("key:{i}"))
            .find(|k| nodes[m].text(&["EXISTS", k]) == ":1\r\n")
            .unwrap();
        let moved = nodes[r].text(&["GET", &key]);
        assert!(
            moved.starts_with("-MOVED ") && moved.contains(&format!("127.0.0.1:{}", nodes[m].port())),
            "{moved}"
        );
        let mut c = Raw::connect(nodes[r].addr);
        assert_eq!(text(c.call(&["READONLY"])), "+OK\r\n");
        assert!(text(c.call(&["GET", &key])).starts_with('$'));
        assert!(text(c.call(&["SET", &key, "x"])).starts_with("-MOVED "));
        // A shebang script is a write unless flagged `no-writes`.
        let writes = "#!lua\nreturn redis.call('del', KEYS[1])";
        assert!(text(c.call(&["EVAL", writes, "1", &key])).starts_with("-MOVED "));
        let reads = "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])";
        assert!(text(c.call(&["EVAL", reads, "1", &key])).starts_with('$'));
        // The master's CLUSTER SLOTS lists it once it replicated something.
        wait_until(10, "the master to list its replica", || {
            nodes[m].text(&["CLUSTER", "SLOTS"]).contains(&ids[r])
        });
    }
    // A manual failover: the replica takes its master's slots with a new
    // epoch, and the old master turns replica of it.
    let r = replicas[0];
    let m = master_of(r);
    let slots_of_m = line_of(&nodes[m], &ids[m]).split(' ').skip(8).collect::<Vec<_>>().join(" ");
    assert_eq!(nodes[r].text(&["CLUSTER", "FAILOVER"]), "+OK\r\n");
    wait_until(10, "the replica to take over", || {
        all.iter().all(|n| {
            line_of(n, &ids[r]).contains("master")
                && line_of(n, &ids[r]).ends_with(&slots_of_m)
                && line_of(n, &ids[m]).contains(&format!("slave {}", ids[r]))
        })
    });
    assert_eq!(info_field_of(&nodes[r], "role"), "master");
    wait_until(10, "the old master to replicate the new one", || {
        info_field_of(&nodes[m], "master_port") == nodes[r].port().to_string() && info_field_of(&nodes[m], "master_link_status") == "up"
    });
    // It continued its history with the new master, which took it over.
    let stats = nodes[r].text(&["INFO", "stats"]);
    assert!(
        stats.contains("sync_full:0\r\n") && stats.contains("sync_partial_ok:1\r\n"),
        "{stats}"
    );
    // Nothing lost; writes go to the new master.
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}", nodes[r].port())]).unwrap();
    let mut cc = client.get_connection().unwrap();
    for i in 0..200 {
        let v: i64 = redis::cmd("GET").arg(format!("key:{i}")).query(&mut cc).unwrap();
        assert_eq!(v, i);
        let _: () = redis::cmd("SET").arg(format!("key:{i}")).arg(i + 1000).query(&mut cc).unwrap();
    }
    let check = redis_cli(&["--cluster".into(), "check".into(), format!("127.0.0.1:{}", nodes[m].port())]);
    assert!(check.contains("[OK] All nodes agree about slots configuration."), "{check}");
    // TAKEOVER: the old master, once it has every write, takes its slots
    // back at once.
    assert_eq!(nodes[r].text(&["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(nodes[m].text(&["CLUSTER", "FAILOVER", "TAKEOVER"]), "+OK\r\n");
    wait_until(10, "the old master to take its slots back", || {
        all.iter()
            .all(|n| line_of(n, &ids[m]).contains("master") && line_of(n, &ids[r]).contains("slave"))
    });
    wait_until(10, "the replica to follow", || {
        info_field_of(&nodes[r], "master_port") == nodes[m].port().to_string()
    });
    for i in 0..200 {
        let v: i64 = redis::cmd("GET").arg(format!("key:{i}")).query(&mut cc).unwrap();
        assert_eq!(v, i + 1000);
    }
    // A master refuses it; a replica of a failed master needs FORCE.
    assert_eq!(
        nodes[m].text(&["CLUSTER", "FAILOVER"]),
        "-ERR You should send CLUSTER FAILOVER to a replica\r\n"
    );
}

/// A field of INFO's default sections.
fn info_field_of(node: &Node, field: &str) -> String {
    let info = node.text(&["INFO"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// A master whose last slot goes to another node (SETSLOT NODE at the
/// end of a migration) becomes that node's replica, as Redis 7.0 does
/// with `cluster-allow-replica-migration yes`; CLUSTER RESET on a replica
/// makes it an empty master again.
#[test]
fn a_master_giving_away_its_last_slot_replicates_the_new_owner() {
    let (da, dc) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = keylock_node(da.path(), &[]);
    let c = keylock_node(dc.path(), &[]);
    assert_eq!(a.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "16382"]), b"+OK\r\n");
    assert_eq!(c.call(&["CLUSTER", "ADDSLOTS", "16383"]), b"+OK\r\n");
    assert_eq!(a.call(&["CLUSTER", "SET-CONFIG-EPOCH", "1"]), b"+OK\r\n");
    assert_eq!(c.call(&["CLUSTER", "SET-CONFIG-EPOCH", "2"]), b"+OK\r\n");
    let meet = a.call(&["CLUSTER", "MEET", "127.0.0.1", &c.port().to_string(), &c.cport.to_string()]);
    assert_eq!(meet, b"+OK\r\n");
    wait_for_cluster(&[&a, &c], 2);
    assert_eq!(a.call(&["SET", "foo", "bar"]), b"+OK\r\n");
    let (ida, idc) = (a.id(), c.id());
    assert_eq!(a.call(&["CLUSTER", "SETSLOT", "16383", "IMPORTING", &idc]), b"+OK\r\n");
    assert_eq!(c.call(&["CLUSTER", "SETSLOT", "16383", "MIGRATING", &ida]), b"+OK\r\n");
    // The emptied master first: SETSLOT NODE itself makes it a replica.
    assert_eq!(c.call(&["CLUSTER", "SETSLOT", "16383", "NODE", &ida]), b"+OK\r\n");
    assert!(line_of(&c, &idc).contains(&format!("myself,slave {ida}")), "{}", line_of(&c, &idc));
    assert_eq!(a.call(&["CLUSTER", "SETSLOT", "16383", "NODE", &ida]), b"+OK\r\n");
    wait_until(10, "the emptied master to replicate the new owner", || {
        info_field_of(&c, "role") == "slave"
            && info_field_of(&c, "master_port") == a.port().to_string()
            && info_field_of(&c, "master_link_status") == "up"
    });
    wait_until(10, "the owner to see its replica", || {
        a.text(&["CLUSTER", "REPLICAS", &ida]).contains(&idc)
    });
    assert_eq!(c.call(&["DBSIZE"]), b":1\r\n");
    // RESET: a master again, without its master's keys.
    assert_eq!(c.call(&["CLUSTER", "RESET"]), b"+OK\r\n");
    assert!(line_of(&c, &idc).contains("myself,master"), "{}", line_of(&c, &idc));
    assert_eq!(info_field_of(&c, "role"), "master");
    assert_eq!(c.call(&["DBSIZE"]), b":0\r\n");
    assert_eq!(info_field(&c, "cluster_known_nodes"), "1");
}

/// A key whose time ran out counts as missing for a migrating slot
/// (without being deleted): the client is sent to the target, as Redis
/// looks keys up with LOOKUP_NOEXPIRE.
#[test]
fn an_expired_key_of_a_migrating_slot_is_asked_for_at_the_target() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = keylock_node(da.path(), &["--enable-debug-command", "yes"]);
    let b = keylock_node(db.path(), &[]);
    form_pair(&a, &b);
    // FOO is in slot 3028, on A.
    assert_eq!(a.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    assert_eq!(a.call(&["SET", "FOO", "BAR", "PX", "10"]), b"+OK\r\n");
    assert_eq!(a.call(&["CLUSTER", "SETSLOT", "3028", "MIGRATING", &b.id()]), b"+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(a.text(&["GET", "FOO"]), format!("-ASK 3028 127.0.0.1:{}\r\n", b.port()));
    assert_eq!(a.call(&["CLUSTER", "COUNTKEYSINSLOT", "3028"]), b":1\r\n");
}

/// CONFIG SET of `cluster-announce-port` and `cluster-announce-bus-port`
/// changes the address this node announces, and 0 brings back the ports
/// it listens on.
#[test]
fn announced_ports_and_hostname_set_at_runtime_reach_the_other_nodes() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = keylock_node(da.path(), &[]);
    let b = keylock_node(db.path(), &[]);
    form_pair(&a, &b);
    let ida = a.id();
    let other = free_port().to_string();
    for (name, pattern, default) in [
        ("cluster-announce-port", format!(":{other}@"), format!(":{}@", a.port())),
        ("cluster-announce-bus-port", format!("@{other} "), format!("@{} ", a.cport)),
    ] {
        assert_eq!(a.call(&["CONFIG", "SET", name, &other]), b"+OK\r\n");
        assert!(line_of(&a, &ida).contains(&pattern), "{}", line_of(&a, &ida));
        wait_until(10, "the other node to learn it", || line_of(&b, &ida).contains(&pattern));
        assert_eq!(a.call(&["CONFIG", "SET", name, "0"]), b"+OK\r\n");
        assert!(line_of(&a, &ida).contains(&default), "{}", line_of(&a, &ida));
    }
    // The hostname: in the node's own view as in the other's.
    assert_eq!(a.call(&["CONFIG", "SET", "cluster-announce-hostname", "host-a.com"]), b"+OK\r\n");
    assert!(line_of(&a, &ida).contains(",host-a.com "), "{}", line_of(&a, &ida));
    wait_until(10, "both nodes to list the same slots and hostnames", || {
        let slots = a.text(&["CLUSTER", "SLOTS"]);
        slots.contains("host-a.com") && slots == b.text(&["CLUSTER", "SLOTS"])
    });
}

#[test]
fn replicaof_in_the_configuration_of_a_cluster_node_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args(["--port", "0", "--cluster-enabled", "yes", "--replicaof", "127.0.0.1", "6379"])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("*** FATAL CONFIG FILE ERROR") && err.contains("replicaof directive not allowed in cluster mode"),
        "{err}"
    );
}

/// SPUBLISH reaches the subscribers of every node of the shard (master
/// and replicas, over the bus as PUBLISHSHARD), and not those of other
/// shards; a message sent while DEBUG CLUSTERLINK KILL has the link down
/// is lost, and the link comes back.
#[test]
fn a_shard_message_reaches_the_replicas_of_its_shard() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = keylock_node(dirs[0].path(), &["--enable-debug-command", "yes"]);
    let b = keylock_node(dirs[1].path(), &[]);
    let r = keylock_node(dirs[2].path(), &[]);
    form_pair(&a, &b);
    let meet = a.call(&["CLUSTER", "MEET", "127.0.0.1", &r.port().to_string(), &r.cport.to_string()]);
    assert_eq!(meet, b"+OK\r\n");
    wait_for_cluster(&[&a, &b, &r], 3);
    let (ida, idr) = (a.id(), r.id());
    assert_eq!(r.call(&["CLUSTER", "REPLICATE", &ida]), b"+OK\r\n");
    wait_until(10, "the replica to be known as one", || {
        [&a, &b].iter().all(|n| line_of(n, &idr).contains(&format!("slave {ida}")))
    });
    // ch3 hashes to slot 1672, served by A.
    let subscribe = |n: &Node| {
        let mut c = Raw::connect(n.addr);
        assert!(text(c.call(&["SSUBSCRIBE", "ch3"])).contains("ssubscribe"));
        c
    };
    let mut on_r = subscribe(&r);
    let mut on_b = Raw::connect(b.addr);
    assert!(text(on_b.call(&["SUBSCRIBE", "ch3"])).contains("subscribe"));
    on_b.writer.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
    let mut pub_a = Raw::connect(a.addr);
    assert_eq!(text(pub_a.call(&["SPUBLISH", "ch3", "hello"])), ":0\r\n");
    assert_eq!(text(on_r.reply()), "*3\r\n$8\r\nsmessage\r\n$3\r\nch3\r\n$5\r\nhello\r\n");
    // The link to the replica killed in the same transaction: lost.
    assert_eq!(text(pub_a.call(&["MULTI"])), "+OK\r\n");
    assert_eq!(text(pub_a.call(&["DEBUG", "CLUSTERLINK", "KILL", "TO", &idr])), "+QUEUED\r\n");
    assert_eq!(text(pub_a.call(&["SPUBLISH", "ch3", "lost"])), "+QUEUED\r\n");
    assert_eq!(text(pub_a.call(&["EXEC"])), "*2\r\n+OK\r\n:0\r\n");
    wait_until(10, "the link to come back", || {
        a.text(&["CLUSTER", "LINKS"]).matches(idr.as_str()).count() == 2
    });
    assert_eq!(text(pub_a.call(&["SPUBLISH", "ch3", "world"])), ":0\r\n");
    assert_eq!(text(on_r.reply()), "*3\r\n$8\r\nsmessage\r\n$3\r\nch3\r\n$5\r\nworld\r\n");
    // B, another shard, got nothing (its SUBSCRIBE is to the plain channel).
    let mut byte = [0u8; 1];
    assert!(
        std::io::Read::read(&mut on_b.reader, &mut byte).is_err(),
        "B received a shard message"
    );
    assert_eq!(
        a.text(&["DEBUG", "CLUSTERLINK", "KILL", "SIDEWAYS", &idr]),
        "-ERR Unknown direction SIDEWAYS\r\n"
    );
}

/// A master killed: the masters mark it FAIL, its replica waits its turn
/// (500-1000 ms), wins the other masters' votes for a new epoch and
/// serves its slots; the cluster is ok again with every key there.
#[test]
fn a_replica_fails_over_its_dead_master_on_the_masters_votes() {
    if !redis_server_found() || !redis_cli_found() {
        return;
    }
    let dirs: Vec<_> = (0..6).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes: Vec<Node> = dirs
        .iter()
        .map(|d| keylock_node(d.path(), &["--cluster-node-timeout", "1000"]))
        .collect();
    let mut args = vec!["--cluster".to_string(), "create".into()];
    args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
    args.extend(["--cluster-replicas".into(), "1".into(), "--cluster-yes".into()]);
    let out = redis_cli(&args);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    wait_for_cluster(&nodes.iter().collect::<Vec<_>>(), 6);
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}", nodes[1].port())]).unwrap();
    let mut cc = client.get_connection().unwrap();
    for i in 0..200 {
        let _: () = redis::cmd("SET").arg(format!("key:{i}")).arg(i).query(&mut cc).unwrap();
    }
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    let m = (0..6).find(|&i| line_of(&nodes[i], &ids[i]).contains("myself,master")).unwrap();
    let r = (0..6)
        .find(|&i| line_of(&nodes[i], &ids[i]).contains(&format!("slave {}", ids[m])))
        .unwrap();
    let slots = line_of(&nodes[m], &ids[m]).split(' ').skip(8).collect::<Vec<_>>().join(" ");
    wait_until(10, "the replica to have its master's keys", || {
        nodes[r].text(&["DBSIZE"]) == nodes[m].text(&["DBSIZE"])
    });
    // The master dies.
    drop(nodes.remove(m));
    let r = if r > m { r - 1 } else { r };
    let (ids, idm) = (
        ids.iter()
            .enumerate()
            .filter(|&(i, _)| i != m)
            .map(|(_, id)| id.clone())
            .collect::<Vec<_>>(),
        ids[m].clone(),
    );
    wait_until(15, "the replica to take over", || {
        nodes.iter().all(|n| {
            let line = line_of(n, &ids[r]);
            line.contains("master") && line.ends_with(&slots) && info_field(n, "cluster_state") == "ok"
        })
    });
    assert!(line_of(&nodes[0], &idm).contains("fail"), "{}", line_of(&nodes[0], &idm));
    assert_eq!(info_field_of(&nodes[r], "role"), "master");
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}", nodes[r].port())]).unwrap();
    let mut cc = client.get_connection().unwrap();
    for i in 0..200 {
        let v: i64 = redis::cmd("GET").arg(format!("key:{i}")).query(&mut cc).unwrap();
        assert_eq!(v, i);
    }
    // The new master dies too, and the old one comes back with its stale
    // claim: the others tell it the newer one (UPDATE), and it turns
    // replica of the node that took its slots, though that node is down.
    let idr = ids[r].clone();
    drop(nodes.remove(r));
    let old = keylock_node(dirs[m].path(), &["--cluster-node-timeout", "1000"]);
    assert_eq!(old.id(), idm);
    wait_until(15, "the old master to turn replica", || {
        line_of(&old, &idm).contains(&format!("myself,slave {idr}"))
    });
}

/// Replica migration (`cluster-migration-barrier`): a master whose only
/// replica died is joined, after 5 s orphaned, by a replica of a master
/// that has two (the one with the lesser id), which then replicates it;
/// not while the barrier would leave that master too few.
#[test]
fn a_replica_migrates_to_a_master_left_without_replicas() {
    if !redis_server_found() || !redis_cli_found() {
        return;
    }
    let dirs: Vec<_> = (0..7).map(|_| tempfile::tempdir().unwrap()).collect();
    let extra = ["--cluster-node-timeout", "1000", "--cluster-migration-barrier", "2"];
    let nodes: Vec<Node> = dirs.iter().map(|d| keylock_node(d.path(), &extra)).collect();
    let mut args = vec!["--cluster".to_string(), "create".into()];
    args.extend(nodes[..6].iter().map(|n| format!("127.0.0.1:{}", n.port())));
    args.extend(["--cluster-replicas".into(), "1".into(), "--cluster-yes".into()]);
    let out = redis_cli(&args);
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    wait_for_cluster(&nodes[..6].iter().collect::<Vec<_>>(), 6);
    let ids: Vec<String> = nodes.iter().map(Node::id).collect();
    let masters: Vec<usize> = (0..6).filter(|&i| line_of(&nodes[i], &ids[i]).contains("myself,master")).collect();
    let replica_of = |m: usize| -> Vec<usize> {
        (0..6)
            .filter(|&i| line_of(&nodes[i], &ids[i]).contains(&format!("slave {}", ids[m])))
            .collect()
    };
    // The seventh node joins as a second replica of master `m`.
    let (m, o) = (masters[0], masters[1]);
    let seventh = &nodes[6];
    let (port, cport) = (nodes[m].port().to_string(), nodes[m].cport.to_string());
    assert_eq!(seventh.text(&["CLUSTER", "MEET", "127.0.0.1", &port, &cport]), "+OK\r\n");
    wait_until(10, "the seventh node to know the master", || {
        line_of(seventh, &ids[m]).contains("master")
    });
    assert_eq!(seventh.text(&["CLUSTER", "REPLICATE", &ids[m]]), "+OK\r\n");
    let m_replicas = [replica_of(m)[0], 6];
    wait_until(15, "every node to know the two replicas of m", || {
        nodes.iter().all(|n| {
            m_replicas
                .iter()
                .all(|&r| line_of(n, &ids[r]).contains(&format!("slave {}", ids[m])))
        })
    });
    // Keys in o's slots, for its replica to come.
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}", nodes[o].port())]).unwrap();
    let mut cc = client.get_connection().unwrap();
    for i in 0..200 {
        let _: () = redis::cmd("SET").arg(format!("key:{i}")).arg(i).query(&mut cc).unwrap();
    }
    // o's only replica dies.
    let dead = replica_of(o)[0];
    let dead_id = ids[dead].clone();
    let mut nodes: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    nodes[dead] = None;
    let node = |i: usize| nodes[i].as_ref().unwrap();
    let alive: Vec<usize> = (0..7).filter(|&i| i != dead).collect();
    wait_until(15, "the others to flag the dead replica failed", || {
        alive.iter().all(|&i| line_of(node(i), &dead_id).contains("slave,fail "))
    });
    // A barrier of 2: m would be left with one replica. None migrates.
    std::thread::sleep(std::time::Duration::from_millis(6500));
    for &r in &m_replicas {
        assert!(
            line_of(node(r), &ids[r]).contains(&format!("slave {}", ids[m])),
            "{}",
            line_of(node(r), &ids[r])
        );
    }
    // A barrier of 1: the replica of m with the lesser id goes to o.
    for &i in &alive {
        assert_eq!(node(i).text(&["CONFIG", "SET", "cluster-migration-barrier", "1"]), "+OK\r\n");
    }
    let (go, stay) = if ids[m_replicas[0]] < ids[m_replicas[1]] {
        (m_replicas[0], m_replicas[1])
    } else {
        (m_replicas[1], m_replicas[0])
    };
    wait_until(15, "the replica to migrate to the orphaned master", || {
        alive
            .iter()
            .all(|&i| line_of(node(i), &ids[go]).contains(&format!("slave {}", ids[o])))
    });
    assert!(line_of(node(stay), &ids[stay]).contains(&format!("slave {}", ids[m])));
    wait_until(10, "the migrated replica to replicate its new master", || {
        node(go).text(&["DBSIZE"]) == node(o).text(&["DBSIZE"]) && info_field_of(node(go), "master_link_status") == "up"
    });
    assert_eq!(info_field_of(node(go), "master_port"), node(o).port().to_string());
}

/// A replica in the cluster restarted from its snapshot keeps the keys
/// that expired while it was down (its master deletes them and tells it,
/// as Redis's `iAmMaster` has it), and continues its master's stream
/// with a partial resync rather than a full one.
#[test]
fn a_replica_restarted_from_its_snapshot_keeps_expired_keys_and_continues_its_stream() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = keylock_node(da.path(), &["--enable-debug-command", "yes"]);
    let b = keylock_node(db.path(), &[]);
    assert_eq!(a.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), b"+OK\r\n");
    let meet = b.call(&["CLUSTER", "MEET", "127.0.0.1", &a.port().to_string(), &a.cport.to_string()]);
    assert_eq!(meet, b"+OK\r\n");
    wait_for_cluster(&[&a, &b], 2);
    assert_eq!(b.call(&["CLUSTER", "REPLICATE", &a.id()]), b"+OK\r\n");
    wait_until(10, "the replica to replicate", || info_field_of(&b, "master_link_status") == "up");
    assert_eq!(a.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    assert_eq!(a.call(&["SET", "kept", "1"]), b"+OK\r\n");
    assert_eq!(a.call(&["SET", "leased", "1", "PX", "1000"]), b"+OK\r\n");
    wait_until(10, "the replica to have both keys", || b.call(&["DBSIZE"]) == b":2\r\n");
    assert_eq!(b.call(&["SAVE"]), b"+OK\r\n");
    let (port, cport) = (b.port(), b.cport);
    drop(b);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let b = restarted_node(db.path(), port, cport, &[]);
    assert_eq!(b.call(&["DBSIZE"]), b":2\r\n", "the expired key is kept");
    wait_until(10, "the replica to replicate again", || {
        info_field_of(&b, "master_link_status") == "up"
    });
    let stats = a.text(&["INFO", "stats"]);
    assert!(
        stats.contains("sync_full:1\r\n") && stats.contains("sync_partial_ok:1\r\n"),
        "{stats}"
    );
    // The master's expiry reaches it.
    assert_eq!(a.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
    wait_until(10, "the replica to be told the key expired", || b.call(&["DBSIZE"]) == b":1\r\n");
}

/// Node `of`'s bus links as `node`'s CLUSTER LINKS lists them: direction
/// and create-time.
fn links_with(node: &Node, of: &str) -> Vec<(String, i64)> {
    let mut c = redis::Client::open(format!("redis://{}", node.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    let links: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER").arg("LINKS").query(&mut c).unwrap();
    let field = |l: &[redis::Value], name: &str| -> redis::Value {
        let at = l
            .iter()
            .position(|v| redis::from_redis_value::<String>(v.clone()).ok().as_deref() == Some(name))
            .unwrap();
        l[at + 1].clone()
    };
    links
        .iter()
        .filter(|l| redis::from_redis_value::<String>(field(l, "node")).unwrap() == of)
        .map(|l| {
            let direction: String = redis::from_redis_value(field(l, "direction")).unwrap();
            (direction, redis::from_redis_value(field(l, "create-time")).unwrap())
        })
        .collect()
}

/// A bus link whose peer reads nothing is freed once what it has to send
/// passes `cluster-link-sendbuf-limit` (counted in CLUSTER INFO), and made
/// again; the peer's link to this node stays.
#[test]
fn a_bus_link_past_its_send_buffer_limit_is_freed_and_made_again() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = keylock_node(da.path(), &[]);
    let b = keylock_node(db.path(), &[]);
    form_pair(&a, &b);
    let idb = b.id();
    wait_until(10, "a to have a link each way with b", || links_with(&a, &idb).len() == 2);
    let before = links_with(&a, &idb);
    assert_eq!(a.call(&["CONFIG", "SET", "cluster-node-timeout", "3600000"]), b"+OK\r\n");
    assert_eq!(a.call(&["CONFIG", "SET", "cluster-link-sendbuf-limit", "262144"]), b"+OK\r\n");
    assert_eq!(info_field(&a, "total_cluster_links_buffer_limit_exceeded"), "0");
    let pid: i32 = b
        .text(&["INFO", "server"])
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let message = "x".repeat(128 * 1024);
    let mut sent = 0;
    while info_field(&a, "total_cluster_links_buffer_limit_exceeded") == "0" {
        assert!(sent < 100, "the link was not freed after {sent} messages of 128 kB");
        a.call(&["PUBLISH", "channel", &message]);
        sent += 1;
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    wait_until(10, "the link to b to be made again", || {
        let now = links_with(&a, &idb);
        now.iter()
            .any(|(d, t)| d == "to" && before.iter().any(|(d0, t0)| d0 == "to" && t > t0))
    });
    let from = |links: &[(String, i64)]| links.iter().find(|(d, _)| d == "from").map(|l| l.1);
    assert_eq!(from(&links_with(&a, &idb)), from(&before), "the link from b stays");
    unsafe { libc::kill(pid, libc::SIGCONT) };
}

/// The runs of CLUSTER SLOTS, as "start-end" of each.
fn slot_runs(node: &Node) -> Vec<String> {
    let mut con = redis::Client::open(format!("redis://{}", node.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    let runs: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con).unwrap();
    runs.iter()
        .map(|run| match run {
            redis::Value::Array(fields) => match (&fields[0], &fields[1]) {
                (redis::Value::Int(start), redis::Value::Int(end)) => format!("{start}-{end}"),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn redirections_name_the_node_by_the_preferred_endpoint_type() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = keylock_node(da.path(), &[]);
    let b = keylock_node(db.path(), &[]);
    form_pair(&a, &b);
    assert_eq!(b.call(&["CONFIG", "SET", "cluster-announce-hostname", "them.com"]), b"+OK\r\n");
    wait_until(10, "the hostname to reach the other node", || {
        a.text(&["CLUSTER", "NODES"]).contains(",them.com ")
    });
    // "foo" hashes to slot 12182, on b.
    let moved = |endpoint: &str| format!("-MOVED 12182 {endpoint}:{}\r\n", b.port());
    assert_eq!(text(a.call(&["SET", "foo", "1"])), moved("127.0.0.1"));
    assert_eq!(
        a.call(&["CONFIG", "SET", "cluster-preferred-endpoint-type", "hostname"]),
        b"+OK\r\n"
    );
    assert_eq!(text(a.call(&["SET", "foo", "1"])), moved("them.com"));
    assert_eq!(text(a.call(&["GET", "{foo}x"])), moved("them.com"));
    assert_eq!(
        a.call(&["CONFIG", "SET", "cluster-preferred-endpoint-type", "unknown-endpoint"]),
        b"+OK\r\n"
    );
    assert_eq!(text(a.call(&["SET", "foo", "1"])), moved(""));
    // A node without a hostname is `?` to clients that prefer hostnames.
    assert_eq!(b.call(&["CONFIG", "SET", "cluster-announce-hostname", ""]), b"+OK\r\n");
    wait_until(10, "the hostname to be gone on the other node", || {
        !a.text(&["CLUSTER", "NODES"]).contains(",them.com ")
    });
    assert_eq!(
        a.call(&["CONFIG", "SET", "cluster-preferred-endpoint-type", "hostname"]),
        b"+OK\r\n"
    );
    assert_eq!(text(a.call(&["SET", "foo", "1"])), moved("?"));
    // ASK names the target as MOVED does.
    let id_b = b.id();
    assert_eq!(a.call(&["CLUSTER", "SETSLOT", "0", "MIGRATING", &id_b]), b"+OK\r\n");
    // "{06S}" hashes to slot 0.
    assert_eq!(text(a.call(&["GET", "{06S}"])), format!("-ASK 0 ?:{}\r\n", b.port()));
}

#[test]
fn a_node_learns_a_node_it_cannot_reach_from_the_gossip_of_one_it_can() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let debug = ["--enable-debug-command", "yes", "--cluster-node-timeout", "2000"];
    let (a, b) = (keylock_node(dirs[0].path(), &debug), keylock_node(dirs[1].path(), &debug));
    form_pair(&a, &b);
    let c = keylock_node(dirs[2].path(), &debug);
    // a and c drop each other's PINGs (type 0), so they never talk.
    for node in [&a, &c] {
        assert_eq!(node.call(&["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "0"]), b"+OK\r\n");
    }
    assert_eq!(
        b.call(&["CLUSTER", "MEET", "127.0.0.1", &c.port().to_string(), &c.cport.to_string()]),
        b"+OK\r\n"
    );
    // c takes a in, by its id, from b's gossip; it knows b's slots, as b
    // told it, and not a's, which only a tells.
    let id_a = a.id();
    wait_until(10, "the unreachable node to be known by its id", || {
        c.text(&["CLUSTER", "NODES"]).contains(&id_a) && slot_runs(&c) == ["8192-16383"]
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(slot_runs(&c), ["8192-16383"], "{}", c.text(&["CLUSTER", "NODES"]));
    for node in [&a, &c] {
        assert_eq!(node.call(&["DEBUG", "DROP-CLUSTER-PACKET-FILTER", "-1"]), b"+OK\r\n");
    }
    // The links waiting for the PONGs dropped are made again after the
    // node timeout, and the PINGs pass.
    wait_until(10, "both shards to be known", || slot_runs(&c) == ["0-8191", "8192-16383"]);
    wait_for_cluster(&[&a, &b, &c], 3);
}

#[test]
fn a_replica_loading_its_masters_snapshot_is_hidden_and_shown_loading() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let a = keylock_node(dirs[0].path(), &["--enable-debug-command", "yes"]);
    let r = keylock_node(dirs[1].path(), &[]);
    assert_eq!(a.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), b"+OK\r\n");
    assert_eq!(
        a.call(&["CLUSTER", "MEET", "127.0.0.1", &r.port().to_string(), &r.cport.to_string()]),
        b"+OK\r\n"
    );
    wait_for_cluster(&[&a, &r], 2);
    assert_eq!(r.call(&["CLUSTER", "REPLICATE", &a.id()]), b"+OK\r\n");
    assert_eq!(a.call(&["DEBUG", "POPULATE", "1000", "key", "100"]), b"+OK\r\n");
    // A write, so that the replica's offset is not 0 once it follows.
    assert_eq!(a.call(&["SET", "{0}x", "1"]), b"+OK\r\n");
    let id_r = r.id();
    wait_until(20, "the replica to be listed", || a.text(&["CLUSTER", "SLOTS"]).contains(&id_r));
    // The next sync is a full one, and loads slowly (1100 keys at 4 ms).
    assert_eq!(r.call(&["CONFIG", "SET", "key-load-delay", "4000"]), b"+OK\r\n");
    assert_eq!(a.call(&["CONFIG", "SET", "repl-backlog-size", "100"]), b"+OK\r\n");
    let value = "A".repeat(1024);
    let mut con = Raw::connect(a.addr);
    assert_eq!(con.call(&["MULTI"]), b"+OK\r\n");
    con.call(&["CLIENT", "KILL", "TYPE", "replica"]);
    for i in 0..100 {
        con.call(&["SET", &format!("{{0}}{i}"), &value]);
    }
    con.call(&["EXEC"]);
    // Its offset is 0 until the snapshot has loaded: its master leaves it
    // out of CLUSTER SLOTS, and both show it loading.
    wait_until(20, "the loading replica to be hidden", || {
        !a.text(&["CLUSTER", "SLOTS"]).contains(&id_r)
    });
    wait_until(10, "the replica to load", || info_field_of(&r, "loading") == "1");
    wait_until(10, "the master to show it loading", || {
        a.text(&["CLUSTER", "SHARDS"]).contains("loading")
    });
    assert!(r.text(&["CLUSTER", "SHARDS"]).contains("loading"));
    let mut reader = Raw::connect(r.addr);
    assert_eq!(reader.call(&["READONLY"]), b"+OK\r\n");
    assert_eq!(
        text(reader.call(&["GET", "{0}1"])),
        "-LOADING Redis is loading the dataset in memory\r\n"
    );
    assert_eq!(r.call(&["CONFIG", "SET", "key-load-delay", "0"]), b"+OK\r\n");
    wait_until(20, "the replica to be listed again", || {
        a.text(&["CLUSTER", "SLOTS"]).contains(&id_r)
    });
    assert!(!a.text(&["CLUSTER", "SHARDS"]).contains("loading"));
    assert_eq!(info_field_of(&r, "loading"), "0");
}

/// What subscribers of shard channels are sent when their slots go: one
/// freed by DELSLOTS, the rest by CLUSTER RESET, a RESP2 and a RESP3
/// subscriber.
fn shard_channels_of_lost_slots(node: &Node) -> Vec<String> {
    let mut admin = Raw::connect(node.addr);
    assert_eq!(admin.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), b"+OK\r\n");
    let mut resp2 = Raw::connect(node.addr);
    let mut resp3 = Raw::connect(node.addr);
    resp3.call(&["HELLO", "3"]);
    let mut out = Vec::new();
    for (three, channel) in [(false, "ch1"), (false, "ch2"), (true, "ch1"), (true, "other")] {
        let sub = if three { &mut resp3 } else { &mut resp2 };
        out.push(text(sub.call(&["SSUBSCRIBE", channel])));
    }
    let slot = text(admin.call(&["CLUSTER", "KEYSLOT", "ch1"]));
    let slot = slot.trim().trim_start_matches(':').to_string();
    assert_eq!(admin.call(&["CLUSTER", "DELSLOTS", &slot]), b"+OK\r\n");
    out.push(text(resp2.reply()));
    out.push(text(resp3.reply()));
    assert_eq!(admin.call(&["CLUSTER", "RESET"]), b"+OK\r\n");
    out.push(text(resp2.reply()));
    out.push(text(resp3.reply()));
    // Nothing more, and both still answer.
    out.push(text(resp3.call(&["PING"])));
    out.push(text(resp2.call(&["SSUBSCRIBE", "ch9"])));
    out
}

#[test]
fn subscribers_of_a_slot_that_goes_are_told_sunsubscribe_as_redis_does() {
    let dir = tempfile::tempdir().unwrap();
    let ours = shard_channels_of_lost_slots(&keylock_node(dir.path(), &[]));
    assert_eq!(ours[4], "*3\r\n$12\r\nsunsubscribe\r\n$3\r\nch1\r\n:1\r\n");
    assert_eq!(ours[5], ">3\r\n$12\r\nsunsubscribe\r\n$3\r\nch1\r\n:1\r\n");
    assert_eq!(ours[6], "*3\r\n$12\r\nsunsubscribe\r\n$3\r\nch2\r\n:0\r\n");
    let Some(redis) = redis_node(&[]) else { return };
    assert_eq!(ours, shard_channels_of_lost_slots(&redis));
}
