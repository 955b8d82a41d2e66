//! Server commands, the binary's command line, and stopping cleanly.

mod common;
use common::*;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn info_reports_redis_compatible_version_and_keylock_version() {
    let s = start();
    let mut c = conn(&s);
    let info: String = q(&mut c, &["INFO"]);
    assert!(info.contains("redis_version:7.0.15\r\n"));
    assert!(info.contains(&format!("keylock_version:{}\r\n", keylock::VERSION)));
    for section in ["# Server", "# Clients", "# Memory", "# Stats", "# Replication", "# Keyspace"] {
        assert!(info.contains(section), "missing {section}");
    }
    assert!(info.contains("role:master\r\nconnected_slaves:0\r\n"));
}

#[test]
fn info_shows_hz_and_maxclients_as_config_set_left_them_as_redis_does() {
    let s = start();
    let mut c = conn(&s);
    let _: () = q(&mut c, &["CONFIG", "SET", "hz", "50", "maxclients", "100"]);
    let info: String = q(&mut c, &["INFO"]);
    for line in ["hz:50\r\n", "configured_hz:50\r\n", "maxclients:100\r\n"] {
        assert!(info.contains(line), "INFO lacks {line:?}");
    }
    // Set at start-up, as a config file line, they show the same way.
    let s = start_with(|c| c.set("hz", &["20"]).unwrap());
    let info: String = q(&mut conn(&s), &["INFO", "server"]);
    assert!(info.contains("hz:20\r\n"));
    assert_eq!(q::<Vec<String>>(&mut conn(&s), &["CONFIG", "GET", "hz"]), ["hz", "20"]);
}

#[test]
fn info_with_a_section_returns_only_that_section() {
    let s = start();
    let mut c = conn(&s);
    let info: String = q(&mut c, &["INFO", "replication"]);
    assert!(info.starts_with("# Replication\r\n"));
    assert!(!info.contains("# Server"));
}

#[test]
fn info_keyspace_counts_keys_and_expires() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "a", "1"]);
    q::<()>(&mut c, &["SET", "b", "1", "EX", "100"]);
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=2,expires=1,avg_ttl=0"), "{info}");
}

#[test]
fn config_resetstat_resets_command_stats() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "a", "1"]);
    let stats: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_set:calls=1,"), "{stats}");
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    let stats: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(!stats.contains("cmdstat_set:"), "{stats}");
}

#[test]
fn commandstats_usec_measures_the_time_a_command_took() {
    let s = start();
    let mut c = conn(&s);
    // Past the first 10 ms the tick rate is measured, not assumed.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let started = std::time::Instant::now();
    q::<i64>(&mut c, &["EVAL", "local t = 0 for i = 1, 3000000 do t = t + i end return 1", "0"]);
    let wall_us = started.elapsed().as_micros() as u64;
    let stats: String = q(&mut c, &["INFO", "commandstats"]);
    let line = stats.lines().find(|l| l.starts_with("cmdstat_eval:")).expect("eval counted");
    let usec: u64 = line
        .split(",usec=")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap()
        .parse()
        .unwrap();
    // The script's time, seen from inside the server: no more than the
    // client waited, and most of it (the rest is the round trip).
    assert!(usec <= wall_us, "{line} but the client waited {wall_us} us");
    assert!(usec * 10 >= wall_us * 3, "{line} but the client waited {wall_us} us");
}

#[test]
fn errorstats_count_error_replies_by_prefix() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "s", "x"]);
    let _ = q_err(&mut c, &["INCR", "s"]);
    let _ = q_err(&mut c, &["NOSUCH"]);
    let info: String = q(&mut c, &["INFO", "errorstats"]);
    assert!(info.contains("errorstat_ERR:count=2"), "{info}");
}

#[test]
fn command_count_matches_command_list() {
    let s = start();
    let mut c = conn(&s);
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    let all: Vec<redis::Value> = q(&mut c, &["COMMAND"]);
    assert_eq!(count as usize, all.len());
    assert!(count > 80);
}

#[test]
fn command_info_describes_arity_and_keys() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    let reply = raw.call(&["COMMAND", "INFO", "get"]);
    assert!(
        reply.starts_with(b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
}

#[test]
fn command_docs_answers_for_every_command() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    let reply = raw.call(&["COMMAND", "DOCS"]);
    assert!(reply.starts_with(b"*"), "{}", String::from_utf8_lossy(&reply[..50]));
}

#[test]
fn function_flush_list_and_stats_answer_as_an_empty_server() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["FUNCTION", "FLUSH"]), b"+OK\r\n");
    assert_eq!(raw.call(&["FUNCTION", "LIST"]), b"*0\r\n");
    assert!(
        raw.call(&["FUNCTION", "STATS"])
            .starts_with(b"*4\r\n$14\r\nrunning_script\r\n$-1\r\n")
    );
}

#[test]
fn flushall_empties_every_database() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["SET", "a", "1"]);
    q::<()>(&mut c, &["SELECT", "5"]);
    q::<()>(&mut c, &["SET", "b", "1"]);
    q::<()>(&mut c, &["FLUSHALL"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    q::<()>(&mut c, &["SELECT", "0"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
}

#[test]
fn shutdown_stops_the_server_without_a_reply() {
    let s = start();
    let addr = s.addr();
    let mut raw = Raw::connect(addr);
    raw.send_cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(raw.is_closed());
    wait_until_closed(addr);
}

#[test]
fn client_list_and_kill_see_other_connections() {
    let s = start();
    let mut a = conn(&s);
    let mut b = conn(&s);
    q::<()>(&mut b, &["CLIENT", "SETNAME", "victim"]);
    let id: i64 = q(&mut b, &["CLIENT", "ID"]);
    let list: String = q(&mut a, &["CLIENT", "LIST"]);
    assert!(list.contains(&format!("id={id} ")) && list.contains("name=victim"), "{list}");
    assert_eq!(q::<i64>(&mut a, &["CLIENT", "KILL", "ID", &id.to_string()]), 1);
    // The victim's connection closes as soon as its task runs again.
    wait_until(5, "killed client still served", || {
        redis::cmd("PING").query::<String>(&mut b).is_err()
    });
}

#[test]
fn client_setinfo_shows_in_client_info() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CLIENT", "SETINFO", "LIB-NAME", "redisson"]);
    q::<()>(&mut c, &["CLIENT", "SETINFO", "lib-ver", "4.7.0"]);
    let info: String = q(&mut c, &["CLIENT", "INFO"]);
    assert!(info.contains("lib-name=redisson lib-ver=4.7.0"), "{info}");
    assert_eq!(q_err(&mut c, &["CLIENT", "SETINFO", "foo", "x"]), "ERR Unrecognized option 'foo'");
}

/// Spawns the binary on port 0 and reads the address it announces.
fn spawn_binary(extra: &[&str]) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args(["--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").expect("announce line").to_string();
    (child, addr)
}

#[test]
fn binary_on_port_zero_announces_its_address() {
    let (mut child, addr) = spawn_binary(&[]);
    let mut raw = Raw::connect(addr.parse().unwrap());
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
    raw.send_cmd(&[b"SHUTDOWN"]);
    assert!(child.wait().unwrap().success());
}

#[test]
fn sigterm_and_sigint_stop_the_binary_cleanly() {
    for signal in ["-TERM", "-INT"] {
        let (mut child, addr) = spawn_binary(&[]);
        Raw::connect(addr.parse().unwrap()).call(&["SET", "k", "v"]);
        Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "{signal}: {status:?}");
    }
}

#[test]
fn a_signal_the_moment_the_binary_announces_itself_stops_it_cleanly() {
    // The handlers are installed before the server announces or accepts.
    for _ in 0..20 {
        let (mut child, _addr) = spawn_binary(&[]);
        Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "{status:?}");
    }
}

#[test]
fn binary_reads_a_config_file_then_flags() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keylock.conf");
    std::fs::write(&path, "# comment\nrequirepass \"from file\"\ndatabases 4\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_keylock"))
        .arg(&path)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr: std::net::SocketAddr = line.trim().strip_prefix("listening on ").unwrap().parse().unwrap();
    let mut raw = Raw::connect(addr);
    assert_eq!(raw.call(&["PING"]), b"-NOAUTH Authentication required.\r\n");
    assert_eq!(raw.call(&["AUTH", "from file"]), b"+OK\r\n");
    assert_eq!(raw.call(&["SELECT", "4"]), b"-ERR DB index is out of range\r\n");
    raw.send_cmd(&[b"SHUTDOWN"]);
    assert!(child.wait().unwrap().success());
}

#[test]
fn config_set_port_moves_the_listening_port_and_keeps_open_connections() {
    let server = start();
    let first = server.addr().port();
    let mut c = conn(&server);
    // To a free port: served there, no longer on the first one.
    let moved = free_port();
    let _: () = q(&mut c, &["CONFIG", "SET", "port", &moved.to_string()]);
    assert!(answers_ping(([127, 0, 0, 1], moved).into()));
    assert!(!answers_ping(([127, 0, 0, 1], first).into()));
    let _: String = q(&mut c, &["PING"]);
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "port"]);
    assert_eq!(got, ["port".to_string(), moved.to_string()]);
    let info: String = q(&mut c, &["INFO", "server"]);
    assert!(info.contains(&format!("tcp_port:{moved}\r\n")), "{info}");
    // To a port in use: refused with Redis's text, every parameter of the
    // command as it was, the port still served.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let maxmemory: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(
        q_err(&mut c, &["CONFIG", "SET", "maxmemory", "10000001", "port", &taken_port.to_string()]),
        "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
    );
    let after: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(after, maxmemory);
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "port"]);
    assert_eq!(got[1], moved.to_string());
    assert!(answers_ping(([127, 0, 0, 1], moved).into()));
    // Port 0: no TCP port at all, connections kept; then one again.
    let _: () = q(&mut c, &["CONFIG", "SET", "port", "0"]);
    assert!(!answers_ping(([127, 0, 0, 1], moved).into()));
    let _: String = q(&mut c, &["PING"]);
    let again = free_port();
    let _: () = q(&mut c, &["CONFIG", "SET", "port", &again.to_string()]);
    assert!(answers_ping(([127, 0, 0, 1], again).into()));
    drop(taken);
}
