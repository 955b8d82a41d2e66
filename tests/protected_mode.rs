//! Protected mode, as Redis 7.0's: with `protected-mode yes` (the
//! default) and no password for the default user, a connection from
//! another host gets Redis's DENIED text and is closed; from this host,
//! with a password, or with `protected-mode no`, it is served. Compared
//! byte for byte with redis-server. The "other host" is this machine's
//! own non-loopback address (the test is skipped on a machine without
//! one).

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use common::Binary;

/// This machine's address on its outgoing interface, if it is not a
/// loopback one (no packet is sent to find it).
fn external_ip() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.255.255.255:1").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Sends PING from `ip` to `port` and reads what comes back until the
/// connection closes or goes quiet.
fn ping_from(ip: IpAddr, port: u16) -> Vec<u8> {
    let mut s = TcpStream::connect(SocketAddr::new(ip, port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let _ = s.write_all(b"PING\r\n");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn keylock(extra: &[&str]) -> Binary {
    let mut args = vec!["--bind", "0.0.0.0"];
    args.extend_from_slice(extra);
    Binary::start(&args)
}

#[test]
fn another_host_is_denied_without_a_password_as_by_redis() {
    let Some(ip) = external_ip() else {
        eprintln!("no non-loopback address: skipped");
        return;
    };
    let keylock = keylock(&[]);
    let denied = ping_from(ip, keylock.addr.port());
    assert!(
        denied.starts_with(b"-DENIED Redis is running in protected mode"),
        "{}",
        common::text(denied.clone())
    );
    // From this host it is served.
    assert_eq!(ping_from("127.0.0.1".parse().unwrap(), keylock.addr.port()), b"+PONG\r\n");
    let mut c = common::Raw::connect(keylock.addr);
    assert_eq!(common::info_value(&mut c, "stats", "rejected_connections"), "1");
    if let Some(redis) = common::real_redis_with(&["--bind", "0.0.0.0"]) {
        assert_eq!(ping_from(ip, redis.addr.port()), denied);
    }
}

#[test]
fn a_password_or_protected_mode_no_lets_another_host_in() {
    let Some(ip) = external_ip() else { return };
    let with_password = keylock(&["--requirepass", "secret"]);
    assert_eq!(ping_from(ip, with_password.addr.port()), b"-NOAUTH Authentication required.\r\n");
    let unprotected = keylock(&["--protected-mode", "no"]);
    assert_eq!(ping_from(ip, unprotected.addr.port()), b"+PONG\r\n");
    // CONFIG SET from this host turns it off at once.
    let protected = keylock(&[]);
    let mut c = common::Raw::connect(protected.addr);
    assert_eq!(c.call(&["CONFIG", "SET", "protected-mode", "no"]), b"+OK\r\n");
    assert_eq!(ping_from(ip, protected.addr.port()), b"+PONG\r\n");
}
