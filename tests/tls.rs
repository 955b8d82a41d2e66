//! TLS on `tls-port`, over real TCP: a CA, a server certificate and a
//! client certificate are made at test time (rcgen), and clients connect
//! with the `redis` crate's rustls support, a raw rustls client (to pick
//! protocol versions and certificates), and redis-cli when it is
//! installed.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::{Config, Server, ServerHandle, conn, free_port, q, q_err, wait_until};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;

/// A CA, with a server certificate for 127.0.0.1 / localhost and a client
/// certificate it signed, as PEM files in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
    client_cert: String,
    client_key: String,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "keylock test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let signed = |names: Vec<String>, cn: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(names).unwrap();
            params.distinguished_name.push(DnType::CommonName, cn);
            let cert = params.signed_by(&key, &issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = signed(vec!["127.0.0.1".into(), "localhost".into()], "keylock");
        let (client_cert, client_key) = signed(vec!["client".into()], "client");
        let pki = Pki {
            dir,
            ca_pem: ca_cert.pem(),
            client_cert,
            client_key,
        };
        std::fs::write(pki.path("ca.crt"), &pki.ca_pem).unwrap();
        std::fs::write(pki.path("server.crt"), server_cert).unwrap();
        std::fs::write(pki.path("server.key"), server_key).unwrap();
        std::fs::write(pki.path("client.crt"), &pki.client_cert).unwrap();
        std::fs::write(pki.path("client.key"), &pki.client_key).unwrap();
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn file(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }

    /// The directives of a server with this PKI on `tls_port`.
    fn server_flags(&self, tls_port: u16) -> Vec<(String, String)> {
        vec![
            ("tls-port".into(), tls_port.to_string()),
            ("tls-cert-file".into(), self.file("server.crt")),
            ("tls-key-file".into(), self.file("server.key")),
            ("tls-ca-cert-file".into(), self.file("ca.crt")),
        ]
    }
}

/// keylock in-process with a plain port and a TLS port, and `extra`
/// directives. (Port 0 with a TLS port would serve TLS only, as Redis.)
/// Ports picked free may be taken meanwhile by a server another test
/// starts on port 0: then others are picked.
fn start_tls(pki: &Pki, extra: &[(&str, &str)]) -> ServerHandle {
    for _ in 0..10 {
        let mut config = Config::ephemeral();
        config.set("port", &[&free_port().to_string()]).unwrap();
        config.set("repl-diskless-sync-delay", &["0"]).unwrap();
        for (name, value) in pki.server_flags(free_port()) {
            config.set(&name, &[&value]).unwrap();
        }
        for (name, value) in extra {
            config.set(name, &[value]).unwrap();
        }
        match Server::new(config).start() {
            Ok(server) => return server,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => panic!("keylock starts with TLS: {e}"),
        }
    }
    panic!("keylock did not start with TLS on free ports in 10 tries");
}

fn tls_addr(server: &ServerHandle) -> SocketAddr {
    server.tls_addr().expect("a TLS port")
}

/// A `redis` crate connection over TLS, trusting the test CA, with the
/// client certificate or without.
fn rediss(pki: &Pki, addr: SocketAddr, with_cert: bool) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::build_with_tls(
        format!("rediss://{addr}/"),
        redis::TlsCertificates {
            client_tls: with_cert.then(|| redis::ClientTlsConfig {
                client_cert: pki.client_cert.clone().into_bytes(),
                client_key: pki.client_key.clone().into_bytes(),
            }),
            root_cert: Some(pki.ca_pem.clone().into_bytes()),
        },
    )?;
    client.get_connection_with_timeout(Duration::from_secs(5))
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A raw rustls client speaking only `versions`, with the client
/// certificate or without; the handshake is not forced here.
fn raw_client(pki: &Pki, addr: SocketAddr, with_cert: bool, versions: &[&'static rustls::SupportedProtocolVersion]) -> TlsStream {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der(&pki.ca_pem)).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let config = if with_cert {
        let cert = cert_der(&pki.client_cert);
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(pki.client_key.as_bytes()).unwrap();
        builder.with_client_auth_cert(vec![cert], key).unwrap()
    } else {
        builder.with_no_client_auth()
    };
    let conn = rustls::ClientConnection::new(Arc::new(config), "127.0.0.1".try_into().unwrap()).unwrap();
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    rustls::StreamOwned::new(conn, sock)
}

fn cert_der(pem: &str) -> rustls::pki_types::CertificateDer<'static> {
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// Sends PING and reads the reply; Err when the TLS session or the
/// connection failed.
fn raw_ping(stream: &mut TlsStream) -> std::io::Result<Vec<u8>> {
    stream.write_all(b"PING\r\n")?;
    stream.flush()?;
    let mut reply = [0u8; 64];
    let n = stream.read(&mut reply)?;
    Ok(reply[..n].to_vec())
}

#[test]
fn ping_set_and_get_over_tls_with_a_client_certificate() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let mut c = rediss(&pki, tls_addr(&server), true).expect("TLS connection");
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v"]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
}

#[test]
fn plain_and_tls_ports_serve_the_same_keyspace_side_by_side() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let mut tls = rediss(&pki, tls_addr(&server), true).unwrap();
    let mut plain = common::conn(&server);
    q::<String>(&mut tls, &["SET", "shared", "from-tls"]);
    assert_eq!(q::<String>(&mut plain, &["GET", "shared"]), "from-tls");
    q::<String>(&mut plain, &["SET", "shared", "from-plain"]);
    assert_eq!(q::<String>(&mut tls, &["GET", "shared"]), "from-plain");
    // CLIENT LIST shows the TLS client's server end on the TLS port.
    let list: String = q(&mut plain, &["CLIENT", "LIST"]);
    let laddr = format!("laddr={}", tls_addr(&server));
    assert!(list.lines().any(|l| l.contains(&laddr)), "{list}");
    assert_eq!(list.lines().count(), 2, "{list}");
}

#[test]
fn large_values_cross_tls_whole() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let mut c = rediss(&pki, tls_addr(&server), true).unwrap();
    let big: String = (0..3_000_000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    assert_eq!(q::<String>(&mut c, &["SET", "big", &big]), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "big"]), big);
    // A pipeline of many replies, more than one write takes.
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i);
        pipe.cmd("GET").arg(format!("k{i}"));
    }
    let replies: Vec<redis::Value> = pipe.query(&mut c).unwrap();
    assert_eq!(replies.len(), 4000);
}

#[test]
fn pubsub_messages_reach_a_tls_subscriber() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let mut sub = rediss(&pki, tls_addr(&server), true).unwrap();
    let mut plain = common::conn(&server);
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("news").unwrap();
    assert_eq!(q::<i64>(&mut plain, &["PUBLISH", "news", "hello"]), 1);
    pubsub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "news");
    assert_eq!(msg.get_payload::<String>().unwrap(), "hello");
}

#[test]
fn a_blocked_tls_client_is_served_when_a_plain_client_pushes() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let addr = tls_addr(&server);
    let waiter = {
        let mut c = rediss(&pki, addr, true).unwrap();
        std::thread::spawn(move || q::<Vec<String>>(&mut c, &["BLPOP", "queue", "5"]))
    };
    let mut plain = common::conn(&server);
    common::wait_until(5, "the TLS client blocks", || {
        q::<String>(&mut plain, &["INFO", "clients"]).contains("blocked_clients:1")
    });
    q::<i64>(&mut plain, &["RPUSH", "queue", "job"]);
    assert_eq!(waiter.join().unwrap(), vec!["queue".to_string(), "job".to_string()]);
}

#[test]
fn transactions_and_scripts_run_over_tls() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let mut c = rediss(&pki, tls_addr(&server), true).unwrap();
    let (a, b): (i64, i64) = redis::pipe().atomic().incr("n", 1).incr("n", 2).query(&mut c).unwrap();
    assert_eq!((a, b), (1, 3));
    let r: i64 = redis::cmd("EVAL")
        .arg("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        .arg(1)
        .arg("n")
        .arg(10)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, 13);
}

#[test]
fn a_tls_client_is_answered_busy_while_a_script_runs() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("busy-reply-threshold", "50")]);
    let addr = tls_addr(&server);
    // Connected (handshake done) before the script starts, and one that
    // connects while it runs.
    let mut before = rediss(&pki, addr, true).unwrap();
    let mut runner = common::conn(&server);
    let script = std::thread::spawn(move || {
        redis::cmd("EVAL")
            .arg("local t = redis.call('TIME') while true do local n = redis.call('TIME') if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 3000000 then break end end return 1")
            .arg(0)
            .query::<i64>(&mut runner)
    });
    // Answered BUSY once the script is past the threshold.
    common::wait_until(2, "a BUSY reply over TLS", || {
        redis::cmd("GET")
            .arg("x")
            .query::<Option<String>>(&mut before)
            .is_err_and(|e| e.code() == Some("BUSY"))
    });
    let mut during = rediss(&pki, addr, true).expect("handshake while busy");
    let busy = q_err(&mut during, &["GET", "x"]);
    assert!(busy.starts_with("BUSY"), "{busy}");
    assert_eq!(script.join().unwrap().unwrap(), 1);
    assert_eq!(q::<String>(&mut before, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut during, &["PING"]), "PONG");
}

#[test]
fn a_tls_client_past_maxclients_is_told_so_over_tls() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("maxclients", "1")]);
    let _plain = common::Raw::connect(server.addr()).call(&["PING"]);
    let mut first = common::Raw::connect(server.addr());
    assert_eq!(first.call(&["PING"]), b"+PONG\r\n");
    let mut over = raw_client(&pki, tls_addr(&server), true, &[&rustls::version::TLS13]);
    let mut reply = Vec::new();
    let _ = over.read_to_end(&mut reply);
    assert_eq!(String::from_utf8_lossy(&reply), "-ERR max number of clients reached\r\n");
}

#[test]
fn an_idle_tls_connection_that_never_shakes_hands_is_closed_by_timeout() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("timeout", "1")]);
    let mut silent = TcpStream::connect(tls_addr(&server)).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    let started = std::time::Instant::now();
    assert_eq!(silent.read(&mut buf).unwrap_or(0), 0, "closed, nothing sent");
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[test]
fn auth_clients_yes_refuses_a_client_without_a_certificate() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let addr = tls_addr(&server);
    let mut stream = raw_client(&pki, addr, false, &[&rustls::version::TLS13]);
    let reply = raw_ping(&mut stream);
    assert!(!matches!(&reply, Ok(r) if r == b"+PONG\r\n"), "{reply:?}");
    let mut stream = raw_client(&pki, addr, false, &[&rustls::version::TLS12]);
    assert!(raw_ping(&mut stream).is_err());
    // With the certificate it is served.
    let mut stream = raw_client(&pki, addr, true, &[&rustls::version::TLS13]);
    assert_eq!(raw_ping(&mut stream).unwrap(), b"+PONG\r\n");
}

#[test]
fn auth_clients_optional_serves_clients_with_and_without_certificates() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("tls-auth-clients", "optional")]);
    let addr = tls_addr(&server);
    for with_cert in [false, true] {
        let mut c = rediss(&pki, addr, with_cert).unwrap();
        assert_eq!(q::<String>(&mut c, &["PING"]), "PONG", "with a certificate: {with_cert}");
    }
}

#[test]
fn a_ca_directory_verifies_client_certificates() {
    let pki = Pki::new();
    let cas = tempfile::tempdir().unwrap();
    std::fs::write(cas.path().join("test-ca.pem"), &pki.ca_pem).unwrap();
    let mut config = Config::ephemeral();
    config.set("port", &[&free_port().to_string()]).unwrap();
    config.set("tls-port", &[&free_port().to_string()]).unwrap();
    config.set("tls-cert-file", &[&pki.file("server.crt")]).unwrap();
    config.set("tls-key-file", &[&pki.file("server.key")]).unwrap();
    config.set("tls-ca-cert-dir", &[cas.path().to_str().unwrap()]).unwrap();
    let server = Server::new(config).start().unwrap();
    let addr = tls_addr(&server);
    assert_eq!(q::<String>(&mut rediss(&pki, addr, true).unwrap(), &["PING"]), "PONG");
    let mut stream = raw_client(&pki, addr, false, &[&rustls::version::TLS12]);
    assert!(raw_ping(&mut stream).is_err());
}

/// This machine's address on its outgoing interface, if it is not a
/// loopback one (no packet is sent to find it).
fn external_ip() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.255.255.255:1").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn protected_mode_denies_another_host_over_tls_after_the_handshake() {
    let Some(ip) = external_ip() else {
        eprintln!("no non-loopback address: skipped");
        return;
    };
    let pki = Pki::new();
    let server = start_tls(&pki, &[("bind", "0.0.0.0")]);
    let mut other_host = raw_client(
        &pki,
        SocketAddr::new(ip, tls_addr(&server).port()),
        true,
        &[&rustls::version::TLS13],
    );
    let _ = other_host.write_all(b"PING\r\n");
    let mut reply = Vec::new();
    let _ = other_host.read_to_end(&mut reply);
    assert!(
        reply.starts_with(b"-DENIED Redis is running in protected mode"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let mut local = raw_client(&pki, tls_addr(&server), true, &[&rustls::version::TLS13]);
    assert_eq!(raw_ping(&mut local).unwrap(), b"+PONG\r\n");
}

#[test]
fn auth_clients_no_needs_no_ca() {
    let pki = Pki::new();
    let mut config = Config::ephemeral();
    config.set("tls-port", &[&free_port().to_string()]).unwrap();
    config.set("tls-cert-file", &[&pki.file("server.crt")]).unwrap();
    config.set("tls-key-file", &[&pki.file("server.key")]).unwrap();
    config.set("tls-auth-clients", &["no"]).unwrap();
    let server = Server::new(config).start().unwrap();
    let mut c = rediss(&pki, tls_addr(&server), false).unwrap();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn auth_clients_can_be_set_without_a_ca_as_in_redis_and_then_refuses_everyone() {
    let pki = Pki::new();
    let mut config = Config::ephemeral();
    config.set("port", &[&free_port().to_string()]).unwrap();
    config.set("tls-port", &[&free_port().to_string()]).unwrap();
    config.set("tls-cert-file", &[&pki.file("server.crt")]).unwrap();
    config.set("tls-key-file", &[&pki.file("server.key")]).unwrap();
    config.set("tls-auth-clients", &["no"]).unwrap();
    let server = Server::new(config).start().unwrap();
    let mut plain = common::conn(&server);
    assert_eq!(q::<String>(&mut plain, &["CONFIG", "SET", "tls-auth-clients", "optional"]), "OK");
    assert!(rediss(&pki, tls_addr(&server), true).is_err());
    // Any other TLS parameter rebuilds the context, which needs a CA now.
    let err = q_err(&mut plain, &["CONFIG", "SET", "tls-protocols", "TLSv1.3"]);
    assert!(err.ends_with("Unable to update TLS configuration. Check server logs."), "{err}");
    assert_eq!(q::<String>(&mut plain, &["CONFIG", "SET", "tls-auth-clients", "no"]), "OK");
    assert_eq!(q::<String>(&mut rediss(&pki, tls_addr(&server), false).unwrap(), &["PING"]), "PONG");
}

#[test]
fn auth_clients_set_at_run_time_applies_to_new_connections() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("tls-auth-clients", "no")]);
    let addr = tls_addr(&server);
    let mut plain = common::conn(&server);
    assert_eq!(q::<String>(&mut rediss(&pki, addr, false).unwrap(), &["PING"]), "PONG");
    q::<String>(&mut plain, &["CONFIG", "SET", "tls-auth-clients", "yes"]);
    let mut stream = raw_client(&pki, addr, false, &[&rustls::version::TLS12]);
    assert!(raw_ping(&mut stream).is_err());
}

#[test]
fn tls13_only_refuses_a_tls12_client() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("tls-protocols", "TLSv1.3")]);
    let addr = tls_addr(&server);
    let mut old = raw_client(&pki, addr, true, &[&rustls::version::TLS12]);
    assert!(raw_ping(&mut old).is_err());
    let mut new = raw_client(&pki, addr, true, &[&rustls::version::TLS13]);
    assert_eq!(raw_ping(&mut new).unwrap(), b"+PONG\r\n");
    assert_eq!(new.conn.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
}

#[test]
fn tls12_only_serves_tls12_with_the_ciphers_named() {
    let pki = Pki::new();
    let server = start_tls(
        &pki,
        &[("tls-protocols", "TLSv1.2"), ("tls-ciphers", "ECDHE-ECDSA-CHACHA20-POLY1305")],
    );
    let mut c = raw_client(&pki, tls_addr(&server), true, &[&rustls::version::TLS12, &rustls::version::TLS13]);
    assert_eq!(raw_ping(&mut c).unwrap(), b"+PONG\r\n");
    assert_eq!(c.conn.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
    assert_eq!(
        c.conn.negotiated_cipher_suite().map(|s| s.suite()),
        Some(rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256)
    );
}

#[test]
fn ciphersuites_choose_the_tls13_suite() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[("tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256")]);
    let mut c = raw_client(&pki, tls_addr(&server), true, &[&rustls::version::TLS13]);
    assert_eq!(raw_ping(&mut c).unwrap(), b"+PONG\r\n");
    assert_eq!(
        c.conn.negotiated_cipher_suite().map(|s| s.suite()),
        Some(rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256)
    );
}

#[test]
fn tls_only_with_port_zero() {
    let pki = Pki::new();
    let mut config = Config::ephemeral();
    for (name, value) in pki.server_flags(free_port()) {
        config.set(&name, &[&value]).unwrap();
    }
    let server = Server::new(config).start().unwrap();
    assert_eq!(server.addr().port(), 0, "no plain port");
    assert_eq!(server.url(), format!("rediss://{}/", tls_addr(&server)));
    let mut c = rediss(&pki, tls_addr(&server), true).unwrap();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    // INFO shows the TLS port as the server's, as Redis does without a plain one.
    let info: String = q(&mut c, &["INFO", "server"]);
    let shown = format!("tcp_port:{}", tls_addr(&server).port());
    assert!(info.lines().any(|l| l == shown), "{info}");
}

#[test]
fn config_set_of_the_certificate_applies_to_new_connections() {
    let pki = Pki::new();
    let other = Pki::new();
    let server = start_tls(&pki, &[]);
    let addr = tls_addr(&server);
    let mut old = rediss(&pki, addr, true).unwrap();
    let mut plain = common::conn(&server);
    // A file that cannot be read leaves everything as it was.
    let err = q_err(
        &mut plain,
        &["CONFIG", "SET", "maxmemory", "7mb", "tls-cert-file", "/nonexistent/server.crt"],
    );
    assert_eq!(
        err,
        "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."
    );
    let value: Vec<String> = q(&mut plain, &["CONFIG", "GET", "tls-cert-file"]);
    assert_eq!(value[1], pki.file("server.crt"));
    let value: Vec<String> = q(&mut plain, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(value[1], "0", "the whole command is undone, as in Redis");
    assert_eq!(q::<String>(&mut rediss(&pki, addr, true).unwrap(), &["PING"]), "PONG");
    // The other CA's certificates: new connections are served with them.
    q::<String>(
        &mut plain,
        &[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &other.file("server.crt"),
            "tls-key-file",
            &other.file("server.key"),
            "tls-ca-cert-file",
            &other.file("ca.crt"),
        ],
    );
    assert!(rediss(&pki, addr, true).is_err(), "the old CA no longer verifies the server");
    assert_eq!(q::<String>(&mut rediss(&other, addr, true).unwrap(), &["PING"]), "PONG");
    // The connection made before keeps its session.
    assert_eq!(q::<String>(&mut old, &["PING"]), "PONG");
}

#[test]
fn config_set_tls_port_moves_the_tls_listener() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let old = tls_addr(&server);
    let mut before = rediss(&pki, old, true).unwrap();
    let mut plain = common::conn(&server);
    // A port that cannot be bound changes nothing.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let err = q_err(
        &mut plain,
        &["CONFIG", "SET", "tls-port", &taken.local_addr().unwrap().port().to_string()],
    );
    assert_eq!(
        err,
        "ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs."
    );
    let value: Vec<String> = q(&mut plain, &["CONFIG", "GET", "tls-port"]);
    assert_eq!(value[1], old.port().to_string());
    assert_eq!(q::<String>(&mut rediss(&pki, old, true).unwrap(), &["PING"]), "PONG");
    // A free one: new connections go there, the old port closes, open
    // connections stay.
    let moved: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    assert_eq!(
        q::<String>(&mut plain, &["CONFIG", "SET", "tls-port", &moved.port().to_string()]),
        "OK"
    );
    assert_eq!(q::<String>(&mut rediss(&pki, moved, true).unwrap(), &["PING"]), "PONG");
    common::wait_until(5, "the old TLS port closes", || TcpStream::connect(old).is_err());
    assert_eq!(q::<String>(&mut before, &["PING"]), "PONG");
    // 0 closes the TLS port.
    assert_eq!(q::<String>(&mut plain, &["CONFIG", "SET", "tls-port", "0"]), "OK");
    common::wait_until(5, "the TLS port closes", || TcpStream::connect(moved).is_err());
    assert_eq!(q::<String>(&mut plain, &["PING"]), "PONG");
}

/// Runs the keylock binary with no plain port, a TLS port and its own
/// directory, then `tls_args`; returns its exit status and output.
fn run_binary(tls_args: &[&str]) -> (std::process::ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    let tls_port = free_port().to_string();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_keylock"))
        .args(["--port", "0", "--dir", dir.path().to_str().unwrap(), "--tls-port", &tls_port])
        .args(tls_args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "keylock did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut out).unwrap();
    (status, out)
}

#[test]
fn a_missing_certificate_file_fails_startup_with_exit_1() {
    let pki = Pki::new();
    let (status, out) = run_binary(&[
        "--tls-cert-file",
        "/nonexistent/server.crt",
        "--tls-key-file",
        &pki.file("server.key"),
        "--tls-ca-cert-file",
        &pki.file("ca.crt"),
    ]);
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(
        out.contains("Failed to load certificate: /nonexistent/server.crt: No such file or directory"),
        "{out}"
    );
    assert!(out.contains("Failed to configure TLS. Check logs for more info."), "{out}");
}

#[test]
fn a_missing_ca_with_client_authentication_fails_startup_as_redis() {
    let pki = Pki::new();
    let (status, out) = run_binary(&[
        "--tls-cert-file",
        &pki.file("server.crt"),
        "--tls-key-file",
        &pki.file("server.key"),
    ]);
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(
        out.contains("Either tls-ca-cert-file or tls-ca-cert-dir must be specified"),
        "{out}"
    );
}

#[test]
fn a_key_that_does_not_match_the_certificate_fails_startup() {
    let pki = Pki::new();
    let other = Pki::new();
    let (status, out) = run_binary(&[
        "--tls-cert-file",
        &pki.file("server.crt"),
        "--tls-key-file",
        &other.file("server.key"),
        "--tls-ca-cert-file",
        &pki.file("ca.crt"),
    ]);
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(out.contains("Failed to load private key: "), "{out}");
    assert!(out.contains("server.key: key values mismatch"), "{out}");
}

#[test]
fn the_binary_serves_tls_and_redis_cli_talks_to_it() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let tls_port = free_port().to_string();
    let port = free_port().to_string();
    let mut args = vec!["--port", &port, "--dir", dir.path().to_str().unwrap(), "--tls-port", &tls_port];
    let files = [
        ("--tls-cert-file", pki.file("server.crt")),
        ("--tls-key-file", pki.file("server.key")),
        ("--tls-ca-cert-file", pki.file("ca.crt")),
    ];
    for (flag, file) in &files {
        args.push(flag);
        args.push(file);
    }
    let _server = KillOnDrop(
        std::process::Command::new(env!("CARGO_BIN_EXE_keylock"))
            .args(&args)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let plain: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{tls_port}").parse().unwrap();
    common::wait_until(10, "the ports accept", || {
        TcpStream::connect(plain).is_ok() && TcpStream::connect(addr).is_ok()
    });
    assert_eq!(common::Raw::connect(plain).call(&["PING"]), b"+PONG\r\n");
    let mut c = rediss(&pki, addr, true).unwrap();
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    if !has_tls_redis_cli() {
        eprintln!("skipping the redis-cli check: no redis-cli with --tls (apt-get install -y redis-tools)");
        return;
    }
    let out = std::process::Command::new("redis-cli")
        .args(["--tls", "--cacert", &pki.file("ca.crt")])
        .args(["--cert", &pki.file("client.crt"), "--key", &pki.file("client.key")])
        .args(["-h", "127.0.0.1", "-p", &tls_port, "PING"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "PONG\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The Lua debugger reads and writes the client's socket itself: over
    // TLS through the session, in a forked child and in the server.
    let script = dir.path().join("debugged.lua");
    std::fs::write(&script, "local a = 1\nredis.call('set', KEYS[1], a)\nreturn a + 1\n").unwrap();
    for (mode, kept) in [("--ldb", "0"), ("--ldb-sync-mode", "1")] {
        let mut child = std::process::Command::new("redis-cli")
            .args(["--tls", "--cacert", &pki.file("ca.crt")])
            .args(["--cert", &pki.file("client.crt"), "--key", &pki.file("client.key")])
            .args(["-h", "127.0.0.1", "-p", &tls_port, mode, "--eval"])
            .arg(&script)
            .arg("debugged")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"s\ns\np\nc\n").unwrap();
        let out = String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned();
        for line in [
            "* Stopped at 2, stop reason = step over",
            "<redis> set debugged 1",
            "<value> a = 1",
            "(integer) 2",
        ] {
            assert!(out.contains(line), "{mode}: no {line:?} in {out}");
        }
        let mut plain_client = common::Raw::connect(plain);
        assert_eq!(
            plain_client.call(&["EXISTS", "debugged"]),
            format!(":{kept}\r\n").into_bytes(),
            "{mode}"
        );
    }
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn has_tls_redis_cli() -> bool {
    std::process::Command::new("redis-cli")
        .arg("--help")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--tls") || String::from_utf8_lossy(&o.stderr).contains("--tls"))
}

/// A client speaking plain RESP to the TLS port is reset, not answered
/// and not closed cleanly: Redis's suite ("Not accepting non-TLS
/// connections on a TLS port") expects an I/O error, as the reset OpenSSL
/// leaves behind gives; the server carries on.
#[test]
fn a_plain_client_on_the_tls_port_is_reset() {
    let pki = Pki::new();
    let server = start_tls(&pki, &[]);
    let mut s = TcpStream::connect(tls_addr(&server)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    let end = loop {
        match s.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break Some(e.kind()),
        }
    };
    assert_eq!(end, Some(std::io::ErrorKind::ConnectionReset), "{got:?} read");
    assert!(got.is_empty(), "{got:?} read before the reset");
    let mut plain = common::conn(&server);
    assert_eq!(q::<String>(&mut plain, &["PING"]), "PONG");
}

/// `key_pem` (PKCS#8) encrypted as `openssl pkey -aes256` writes it:
/// PBES2, PBKDF2-HMAC-SHA256 and AES-256-CBC, as `ENCRYPTED PRIVATE KEY`.
fn encrypted_pem(key_pem: &str, password: &str) -> String {
    use pkcs8::der::Decode;
    let (_, der) = pkcs8::der::pem::decode_vec(key_pem.as_bytes()).unwrap();
    let info = pkcs8::PrivateKeyInfo::from_der(&der).unwrap();
    let params = pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, b"keylock-salt", &[7u8; 16]).unwrap();
    let encrypted = info.encrypt_with_params(params, password).unwrap();
    pkcs8::der::pem::encode_string("ENCRYPTED PRIVATE KEY", pkcs8::der::pem::LineEnding::LF, encrypted.as_bytes()).unwrap()
}

#[test]
fn an_encrypted_key_file_is_read_with_tls_key_file_pass() {
    let pki = Pki::new();
    let key = std::fs::read_to_string(pki.path("server.key")).unwrap();
    std::fs::write(pki.path("server.key.encrypted"), encrypted_pem(&key, "1234")).unwrap();
    let encrypted = pki.file("server.key.encrypted");
    let server = start_tls(&pki, &[]);
    let mut c = conn(&server);
    let unable =
        "ERR CONFIG SET failed (possibly related to argument 'tls-key-file') - Unable to update TLS configuration. Check server logs.";
    // Without the password, or with a wrong one, it does not load (and
    // the key in use stays).
    assert_eq!(q_err(&mut c, &["CONFIG", "SET", "tls-key-file", &encrypted]), unable);
    let _: () = q(&mut c, &["CONFIG", "SET", "tls-key-file-pass", "4321"]);
    assert_eq!(q_err(&mut c, &["CONFIG", "SET", "tls-key-file", &encrypted]), unable);
    let file: Vec<String> = q(&mut c, &["CONFIG", "GET", "tls-key-file"]);
    assert_eq!(file[1], pki.file("server.key"));
    // With it, it does, and new TLS connections are served with it.
    let _: () = q(&mut c, &["CONFIG", "SET", "tls-key-file-pass", "1234"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "tls-key-file", &encrypted]);
    let mut t = rediss(&pki, tls_addr(&server), true).unwrap();
    let pong: String = redis::cmd("PING").query(&mut t).unwrap();
    assert_eq!(pong, "PONG");
    // In a file that holds the certificate too, after the key.
    let cert = std::fs::read_to_string(pki.path("server.crt")).unwrap();
    let combined = format!("{}\n{cert}", std::fs::read_to_string(&encrypted).unwrap());
    std::fs::write(pki.path("server.pem"), combined).unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "tls-key-file", &pki.file("server.pem")]);
    // At start too.
    let started = start_tls(&pki, &[("tls-key-file", &encrypted), ("tls-key-file-pass", "1234")]);
    let mut t = rediss(&pki, tls_addr(&started), true).unwrap();
    let pong: String = redis::cmd("PING").query(&mut t).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn a_replica_follows_its_master_over_tls() {
    let pki = Pki::new();
    let master = start_tls(&pki, &[]);
    let mut m = conn(&master);
    let _: () = q(&mut m, &["SET", "before", "1"]);
    // The replica's certificate: tls-client-cert-file, or else its own
    // server certificate (as Redis's test "tls-cert-file is also used as a
    // client cert if none specified").
    for client_cert in [true, false] {
        let extra: Vec<(&str, String)> = if client_cert {
            vec![
                ("tls-client-cert-file", pki.file("client.crt")),
                ("tls-client-key-file", pki.file("client.key")),
            ]
        } else {
            Vec::new()
        };
        let mut flags: Vec<(&str, &str)> = extra.iter().map(|(n, v)| (*n, v.as_str())).collect();
        flags.push(("tls-replication", "yes"));
        let replica = start_tls(&pki, &flags);
        let mut r = conn(&replica);
        let port = tls_addr(&master).port().to_string();
        let _: () = q(&mut r, &["REPLICAOF", "127.0.0.1", &port]);
        wait_until(20, "the TLS link comes up", || {
            q::<String>(&mut r, &["INFO", "replication"]).contains("master_link_status:up")
        });
        let _: () = q(&mut m, &["SET", "after", if client_cert { "a" } else { "b" }]);
        wait_until(10, "the write arrives", || {
            q::<Option<String>>(&mut r, &["GET", "after"]).as_deref() == Some(if client_cert { "a" } else { "b" })
        });
        assert_eq!(q::<Option<String>>(&mut r, &["GET", "before"]).as_deref(), Some("1"));
        // The master lists it with its TLS port, where it listens.
        let info: String = q(&mut m, &["INFO", "replication"]);
        assert!(info.contains(&format!("port={},state=online", tls_addr(&replica).port())), "{info}");
    }
}

#[test]
fn a_replica_without_a_certificate_the_master_trusts_stays_down() {
    let pki = Pki::new();
    let other = Pki::new();
    let master = start_tls(&pki, &[]);
    // Its CA is another one: it trusts neither the master's certificate nor
    // is its own trusted by the master.
    let replica = start_tls(&other, &[("tls-replication", "yes")]);
    let mut r = conn(&replica);
    let port = tls_addr(&master).port().to_string();
    let _: () = q(&mut r, &["REPLICAOF", "127.0.0.1", &port]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let info: String = q(&mut r, &["INFO", "replication"]);
    assert!(info.contains("master_link_status:down"), "{info}");
}
