//! Serving a Unix domain socket (`unixsocket`), in process: the same
//! connection code as TCP, clients shown and treated as Redis shows and
//! treats them.

mod common;
use common::*;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

fn unix_connection(path: &Path) -> redis::Connection {
    redis::Client::open(format!("unix://{}", path.display()))
        .unwrap()
        .get_connection()
        .expect("connect over the Unix socket")
}

/// A raw connection to the socket that reads replies line by line.
fn raw_unix(path: &Path) -> BufReader<UnixStream> {
    let stream = UnixStream::connect(path).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    BufReader::new(stream)
}

fn send_line(c: &mut BufReader<UnixStream>, command: &str) -> String {
    c.get_mut().write_all(format!("{command}\r\n").as_bytes()).unwrap();
    read_line(c)
}

fn read_line(c: &mut BufReader<UnixStream>) -> String {
    let mut line = String::new();
    c.read_line(&mut line).unwrap();
    line
}

#[test]
fn the_in_process_server_serves_a_unix_socket_only_with_port_zero() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keylock.sock");
    let server = start_with(|c| c.unixsocket = Some(sock.to_str().unwrap().to_string()));
    assert_eq!(server.unix_socket(), Some(sock.as_path()));
    assert_eq!(server.url(), format!("unix://{}", sock.display()));
    let mut c = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "port"]), ["port", "0"]);
    server.shutdown();
    assert!(!sock.exists(), "the socket file is left behind");
}

#[test]
fn a_unix_socket_serves_beside_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keylock.sock");
    let server = start_with(|c| {
        c.port = free_port();
        c.unixsocket = Some(sock.to_str().unwrap().to_string());
    });
    let mut over_unix = unix_connection(&sock);
    q::<()>(&mut over_unix, &["SET", "k", "from unix"]);
    assert_eq!(Raw::connect(server.addr()).call(&["GET", "k"]), b"$9\r\nfrom unix\r\n");
}

#[test]
fn unixsocketperm_sets_the_socket_files_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keylock.sock");
    let _server = start_with(|c| {
        c.unixsocket = Some(sock.to_str().unwrap().to_string());
        c.unixsocketperm = 0o700;
    });
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o700);
}

#[test]
fn unix_socket_clients_are_shown_as_redis_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keylock.sock");
    let path = sock.to_str().unwrap().to_string();
    let _server = start_with(|c| c.unixsocket = Some(path.clone()));
    let mut c = unix_connection(&sock);
    let info: String = q(&mut c, &["CLIENT", "INFO"]);
    assert!(info.contains(&format!(" addr={path}:0 laddr={path}:0 ")), "{info}");
    assert!(info.contains(" flags=U "), "{info}");

    let mut monitor = raw_unix(&sock);
    assert_eq!(send_line(&mut monitor, "MONITOR"), "+OK\r\n");
    q::<()>(&mut c, &["PING"]);
    let line = read_line(&mut monitor);
    assert!(line.ends_with(&format!(" [0 unix:{path}] \"PING\"\r\n")), "{line}");

    let mut victim = raw_unix(&sock);
    assert_eq!(send_line(&mut victim, "PING"), "+PONG\r\n");
    let killed: i64 = q(&mut c, &["CLIENT", "KILL", "ADDR", &format!("{path}:0"), "SKIPME", "yes"]);
    assert_eq!(killed, 2);
}

#[test]
fn unix_socket_clients_are_local_for_protected_configs() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keylock.sock");
    let _server = start_with(|c| {
        c.unixsocket = Some(sock.to_str().unwrap().to_string());
        c.directives.push(("enable-protected-configs".into(), vec!["local".into()]));
    });
    let mut c = unix_connection(&sock);
    let reply: String = q(&mut c, &["CONFIG", "SET", "dir", dir.path().to_str().unwrap()]);
    assert_eq!(reply, "OK");
}

#[test]
fn a_unix_socket_client_arriving_during_a_busy_script_is_answered_busy() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keylock.sock");
    let server = start_with(|c| {
        c.port = free_port();
        c.unixsocket = Some(sock.to_str().unwrap().to_string());
    });
    let mut runner = Raw::connect(server.addr());
    assert_eq!(runner.call(&["CONFIG", "SET", "busy-reply-threshold", "100"]), b"+OK\r\n");
    runner.send(b"EVAL \"while true do end\" 0\r\n");
    std::thread::sleep(Duration::from_millis(300));
    // Accepted by the busy responder, not by the (blocked) accept loop.
    let mut late = raw_unix(&sock);
    assert_eq!(
        send_line(&mut late, "PING"),
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(send_line(&mut late, "SCRIPT KILL"), "+OK\r\n");
    assert!(String::from_utf8(runner.reply()).unwrap().starts_with("-ERR Script killed"));
    assert_eq!(send_line(&mut late, "PING"), "+PONG\r\n");
}
