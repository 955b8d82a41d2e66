//! Shared test harness: an in-process keylock on a free port, clients for
//! it (the `redis` crate, and a raw connection for byte-exact checks), and
//! a real redis-server for differential tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use keylock::{Config, Server, ServerHandle};

/// Starts keylock in-process on a free loopback port.
pub fn start() -> ServerHandle {
    start_with(|_| {})
}

/// Starts keylock with a configuration tweak. A replica's full
/// synchronization starts at once (`repl-diskless-sync-delay 0`, as in
/// Redis's own test suite) unless the tweak says otherwise.
pub fn start_with(f: impl FnOnce(&mut Config)) -> ServerHandle {
    let mut config = Config::ephemeral();
    config.set("repl-diskless-sync-delay", &["0"]).unwrap();
    f(&mut config);
    Server::new(config).start().expect("keylock starts")
}

/// A `redis` crate connection.
pub fn conn(server: &ServerHandle) -> redis::Connection {
    redis::Client::open(server.url()).unwrap().get_connection().expect("connect")
}

/// Runs one command and returns the value, panicking on errors.
pub fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs one command expecting an error; returns its full text ("ERR …").
pub fn q_err(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(v) => panic!("{args:?} succeeded with {v:?}, expected an error"),
        Err(e) => {
            let code = e.code().unwrap_or("").to_string();
            let detail = e.detail().unwrap_or("").to_string();
            if code.is_empty() {
                detail
            } else if detail.is_empty() {
                code
            } else {
                format!("{code} {detail}")
            }
        }
    }
}

/// A raw TCP connection that reads whole replies as the bytes the server sent.
pub struct Raw {
    pub reader: BufReader<TcpStream>,
    pub writer: TcpStream,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Raw {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// Sends a command as a RESP array of bulk strings.
    pub fn send_cmd(&mut self, args: &[&[u8]]) {
        self.send(&encode(args));
    }

    /// Sends a command and returns its raw reply.
    pub fn call(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send_cmd(&args);
        self.reply()
    }

    fn line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).expect("read reply line");
        assert!(!line.is_empty(), "connection closed");
        line
    }

    /// One whole reply, raw.
    pub fn reply(&mut self) -> Vec<u8> {
        let line = self.line();
        let kind = line[0];
        let rest = std::str::from_utf8(&line[1..line.len() - 2]).unwrap_or("").to_string();
        let mut out = line.clone();
        if b"$=!".contains(&kind) && rest != "-1" {
            let n: usize = rest.parse().unwrap();
            let mut data = vec![0; n + 2];
            self.reader.read_exact(&mut data).unwrap();
            out.extend(data);
        } else if b"*~>%|".contains(&kind) && rest != "-1" {
            let n: usize = rest.parse().unwrap();
            let n = if b"%|".contains(&kind) { n * 2 } else { n };
            for _ in 0..n {
                out.extend(self.reply());
            }
        }
        out
    }

    /// True once the server has closed the connection.
    pub fn is_closed(&mut self) -> bool {
        let mut buf = [0u8; 1];
        matches!(self.reader.read(&mut buf), Ok(0))
    }
}

pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend(b"\r\n");
    }
    out
}

/// A real redis-server on a free port, stopped on drop.
pub struct RealRedis {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for RealRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Debian's redis-server, or returns None (after printing how to
/// install it) when it is missing. With KEYLOCK_REQUIRE_REDIS=1 a missing
/// redis-server is a test failure instead.
pub fn real_redis() -> Option<RealRedis> {
    real_redis_with(&[])
}

/// [`real_redis`] with extra command-line directives (e.g.
/// `--enable-debug-command local`).
pub fn real_redis_with(extra: &[&str]) -> Option<RealRedis> {
    real_redis_from(None, extra)
}

/// [`real_redis_with`] reading the config file `conf` first.
pub fn real_redis_from_file(conf: &std::path::Path, extra: &[&str]) -> Option<RealRedis> {
    real_redis_from(Some(conf), extra)
}

fn real_redis_from(conf: Option<&std::path::Path>, extra: &[&str]) -> Option<RealRedis> {
    if !redis_server_found() {
        return None;
    }
    // The port is free when picked, but another server started beside
    // this test (an in-process keylock on port 0) may take it before
    // redis-server binds it: the server found there must be this child.
    for _ in 0..10 {
        if let Some(redis) = try_real_redis(conf, extra) {
            return Some(redis);
        }
    }
    panic!("redis-server did not start on a free port in 10 tries");
}

fn try_real_redis(conf: Option<&std::path::Path>, extra: &[&str]) -> Option<RealRedis> {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new("redis-server");
    command.args(conf);
    let mut child = command
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir.path())
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    // Redis logs "Ready to accept connections" once its port is bound
    // (and exits if it cannot bind); the log is drained to its end so
    // that redis-server never waits on a full pipe.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut ready = Some(ready_tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("Ready to accept connections")
                && let Some(tx) = ready.take()
            {
                let _ = tx.send(true);
            }
        }
        if let Some(tx) = ready {
            let _ = tx.send(false);
        }
    });
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    if ready_rx.recv_timeout(Duration::from_secs(5)) == Ok(true) {
        return Some(RealRedis { child, addr, _dir: dir });
    }
    // It could not bind: the port was taken meanwhile.
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Whether redis-server is on PATH. When it is not, prints how to install
/// it (the caller skips its test), or, with KEYLOCK_REQUIRE_REDIS=1,
/// fails the test.
pub fn redis_server_found() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        if std::env::var("KEYLOCK_REQUIRE_REDIS").is_ok_and(|v| v == "1") {
            panic!("redis-server is required (KEYLOCK_REQUIRE_REDIS=1) but not on PATH");
        }
        eprintln!("skipping differential test: redis-server not found; install it with `apt-get install -y redis-server`");
    }
    found
}

/// A free TCP port on loopback (free when this returns).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Polls `done` until it holds, failing with `what` after `secs` seconds.
pub fn wait_until(secs: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a server at `addr` accepts a connection and answers PING.
pub fn answers_ping(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Waits until nothing accepts connections on `addr` (the server stopped).
pub fn wait_until_closed(addr: SocketAddr) {
    wait_until(5, "still accepting connections", || TcpStream::connect(addr).is_err());
}

/// How a connection ended up after [`exchange_raw`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Still open once the server went quiet.
    Open,
    /// Closed by the server (an orderly close, or a reset because input
    /// was left unread: either way the server dropped the connection).
    Closed,
}

/// Sends raw bytes on a new connection and collects everything the server
/// sends until it closes the connection or stays quiet for `quiet`.
pub fn exchange_raw(addr: SocketAddr, input: &[u8], quiet: Duration) -> (Vec<u8>, Ending) {
    let mut s = TcpStream::connect(addr).expect("connect");
    // A server that closes before reading everything may refuse the rest.
    let _ = s.write_all(input);
    read_until_closed(&mut s, quiet)
}

/// Everything the server sends on `s` until it closes it or stays quiet
/// for `quiet`.
pub fn read_until_closed(s: &mut TcpStream, quiet: Duration) -> (Vec<u8>, Ending) {
    s.set_read_timeout(Some(quiet)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, Ending::Closed),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return (out, Ending::Open);
            }
            Err(_) => return (out, Ending::Closed),
        }
    }
}

/// Resident set size in bytes of process `pid` (/proc/<pid>/status VmRSS).
pub fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// The keylock binary on a free port, killed on drop.
pub struct Binary {
    child: Child,
    pub addr: SocketAddr,
    /// Its `dir` when the test named none: what it saves (a disk-based
    /// sync's snapshot, say) goes there, not into the working directory.
    _dir: Option<tempfile::TempDir>,
}

impl Binary {
    /// Started as [`start_with`] starts one in-process: a replica's full
    /// synchronization starts at once unless `extra` says otherwise.
    pub fn start(extra: &[&str]) -> Binary {
        Binary::start_program(env!("CARGO_BIN_EXE_keylock"), extra)
    }

    /// [`Binary::start`] with another build of keylock (a release one).
    pub fn start_program(program: &str, extra: &[&str]) -> Binary {
        let mut command = Command::new(program);
        command.args(["--repl-diskless-sync-delay", "0"]);
        let dir = (!extra.contains(&"--dir")).then(|| tempfile::tempdir().unwrap());
        if let Some(dir) = &dir {
            command.arg("--dir").arg(dir.path());
        }
        let mut binary = Binary::spawn(command, extra);
        binary._dir = dir;
        binary
    }

    /// Keylock reading the config file `conf` first, as `keylock conf
    /// --port 0 extra…`, with nothing else set (its CONFIG REWRITE is to
    /// be what the file and `extra` make).
    pub fn start_from_file(conf: &std::path::Path, extra: &[&str]) -> Binary {
        let mut command = Command::new(env!("CARGO_BIN_EXE_keylock"));
        command.arg(conf);
        Binary::spawn(command, extra)
    }

    fn spawn(mut command: Command, extra: &[&str]) -> Binary {
        let mut child = command
            .args(["--port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("listening on ").expect("announce line").parse().unwrap();
        Binary { child, addr, _dir: None }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in bytes.
    pub fn rss(&self) -> u64 {
        rss_of(self.child.id())
    }

    /// The largest RSS seen over `period`.
    pub fn peak_rss(&self, period: Duration) -> u64 {
        let end = Instant::now() + period;
        let mut peak = self.rss();
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
            peak = peak.max(self.rss());
        }
        peak
    }

    pub fn ping(&self) {
        assert_eq!(Raw::connect(self.addr).call(&["PING"]), b"+PONG\r\n");
    }

    /// Waits up to `secs` seconds for the process to exit.
    pub fn wait_exit(&mut self, secs: u64) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "keylock did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends the process a signal (`libc::SIGTERM` …).
    pub fn signal(&self, signal: i32) {
        // SAFETY: signals the child this handle owns.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// keylock's binary keeping its snapshots and append-only file in `dir`,
/// with DEBUG enabled, plus `extra` flags.
pub fn keylock_in_dir(dir: &std::path::Path, extra: &[&str]) -> Binary {
    let mut args = vec!["--dir", dir.to_str().unwrap(), "--enable-debug-command", "yes"];
    args.extend_from_slice(extra);
    Binary::start(&args)
}

/// The incremental file of the append-only file kept in `dir` (the one
/// writes go to, when a rewrite has not made another).
#[allow(dead_code)]
pub fn aof_incr_file(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incremental AOF file")
}

/// A raw reply as text.
pub fn text(reply: Vec<u8>) -> String {
    String::from_utf8_lossy(&reply).into_owned()
}

/// The value of `field` in INFO `section`.
pub fn info_value(c: &mut Raw, section: &str, field: &str) -> String {
    let info = text(c.call(&["INFO", section]));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .trim()
        .to_string()
}

/// How many cases a property test runs: `default`, unless the environment
/// variable `var` says otherwise (to run a longer search by hand).
pub fn cases_from_env(var: &str, default: u32) -> u32 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The runner of a differential property test: [`cases_from_env`] cases,
/// no failure file (a failing case is printed, shrunk).
pub fn case_runner(var: &str, default: u32) -> proptest::test_runner::TestRunner {
    proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: cases_from_env(var, default),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    })
}

/// Literal words as the owned strings generated command lines are made of.
pub fn words(base: &[&str]) -> Vec<String> {
    base.iter().map(|s| s.to_string()).collect()
}

impl Raw {
    /// Sends a generated command line and returns its raw reply.
    pub fn call_words(&mut self, words: &[String]) -> Vec<u8> {
        let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        self.send_cmd(&words);
        self.reply()
    }
}

/// Sends a command without waiting for its reply (a blocking command, or
/// one whose reply is read later).
pub fn send_args(c: &mut Raw, args: &[&str]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send_cmd(&args);
}

/// Whether nothing arrives on `c` within `wait`.
pub fn silent_for(c: &mut Raw, wait: Duration) -> bool {
    c.writer.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    let silent = c.reader.get_mut().peek(&mut byte).is_err();
    c.writer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    silent && c.reader.buffer().is_empty()
}

/// Runs `scenario` against keylock and redis-server and compares what it
/// recorded (skipped without redis-server, as the differential tests are).
pub fn same_on_both_servers(scenario: fn(SocketAddr) -> Vec<Vec<u8>>) {
    let Some(redis) = real_redis() else { return };
    let keylock = start();
    let theirs = scenario(redis.addr);
    let ours = scenario(keylock.addr());
    let show = |r: &Vec<Vec<u8>>| r.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>();
    assert_eq!(show(&ours), show(&theirs), "keylock (left) and redis-server (right) differ");
}

/// A child process, killed (and reaped) on drop; a stopped one is
/// continued first, so that it dies.
#[allow(dead_code)]
pub struct Killed(pub Child);

#[allow(dead_code)]
impl Killed {
    /// Sends the process a signal (`libc::SIGSTOP` …).
    pub fn signal(&self, signal: i32) {
        // SAFETY: signals the child this handle owns.
        unsafe { libc::kill(self.0.id() as i32, signal) };
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads one RESP array request (what a replica sends its master), its
/// arguments as text.
pub fn read_request(reader: &mut impl BufRead) -> Vec<String> {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let n: usize = line.trim()[1..].parse().unwrap();
    (0..n)
        .map(|_| {
            let mut len = String::new();
            reader.read_line(&mut len).unwrap();
            let mut arg = vec![0; len.trim()[1..].parse::<usize>().unwrap() + 2];
            reader.read_exact(&mut arg).unwrap();
            String::from_utf8_lossy(&arg[..arg.len() - 2]).into_owned()
        })
        .collect()
}

/// Runs `scenario` against a keylock master and a redis-server master,
/// both made to send replicas no PINGs meanwhile (and redis-server its
/// snapshots from disk, as `$<length>`), asserts the two outcomes equal
/// and returns keylock's; None when redis-server is missing.
pub fn same_on_both_masters(scenario: fn(SocketAddr) -> Vec<String>) -> Option<Vec<String>> {
    let s = start_with(|c| {
        c.set("repl-ping-replica-period", &["3600"]).unwrap();
        c.set("repl-diskless-sync", &["no"]).unwrap();
    });
    let ours = scenario(s.addr());
    let redis = real_redis_with(&["--repl-diskless-sync", "no", "--repl-ping-replica-period", "3600"])?;
    // redis-server PINGs its replicas on its replication cron's first
    // round whatever the period; a round trip makes sure that round has
    // passed (its first event-loop pass runs the cron after the commands
    // it read) before the scenario's replica connects.
    assert_eq!(Raw::connect(redis.addr).call(&["PING"]), b"+PONG\r\n");
    let theirs = scenario(redis.addr);
    assert_eq!(ours, theirs);
    Some(ours)
}

/// Plays a master's side of a replica's handshake on `stream` (PONG to
/// PING, OK to AUTH and REPLCONF) up to its PSYNC: the PSYNC's arguments,
/// and the reader, past it.
pub fn answer_replica_handshake(stream: &TcpStream) -> (BufReader<TcpStream>, Vec<String>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream.try_clone().unwrap();
    loop {
        let request = read_request(&mut reader);
        if request[0].eq_ignore_ascii_case("psync") {
            return (reader, request);
        }
        let reply: &[u8] = if request[0].eq_ignore_ascii_case("ping") {
            b"+PONG\r\n"
        } else {
            b"+OK\r\n"
        };
        writer.write_all(reply).unwrap();
    }
}

/// `REPLICAOF` the server at `master` (on 127.0.0.1), answered OK.
pub fn replicaof(r: &mut Raw, master: SocketAddr) {
    assert_eq!(r.call(&["REPLICAOF", "127.0.0.1", &master.port().to_string()]), b"+OK\r\n");
}

/// Waits until the replica `r`'s link to its master is up.
pub fn wait_link_up(r: &mut Raw) {
    wait_until(20, "the replica's link comes up", || {
        info_value(r, "replication", "master_link_status") == "up"
    });
}

/// Waits until the replica has applied everything the master sent.
pub fn wait_offsets_equal(master: &mut Raw, replica: &mut Raw) {
    wait_until(20, "the replica reaches the master's offset", || {
        info_value(master, "replication", "master_repl_offset") == info_value(replica, "replication", "master_repl_offset")
    });
}
