//! keylock started the way test harnesses and init systems start
//! redis-server: over a Unix socket, waiting for the ready line on stdout,
//! daemonized with a pid file, with bad options. Where redis-server is
//! installed, each behaviour is compared with what redis-server 7.0.15
//! does when started the same way.

mod common;
use common::*;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

const KEYLOCK: &str = env!("CARGO_BIN_EXE_keylock");

/// A server process whose stdout is read line by line, as a harness
/// reads redis-server's.
struct Process {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Process {
    fn start(program: &str, args: &[&str]) -> Process {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Process {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads stdout until a line contains `needle`; returns that line.
    fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no line with {needle:?} in 10 s; seen: {:#?}", self.seen),
                Err(RecvTimeoutError::Disconnected) => panic!("stdout closed before {needle:?}; seen: {:#?}", self.seen),
            }
        }
    }

    fn signal(&self, signal: &str) {
        Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
    }

    /// Waits for the process to exit; its status and every stdout line.
    fn finish(mut self) -> (ExitStatus, Vec<String>) {
        let status = wait_with_timeout(&mut self.child);
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        (status, std::mem::take(&mut self.seen))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_with_timeout(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the process did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A Redis log line split as `serverLogRaw` writes it:
/// `pid:role dd Mon yyyy hh:mm:ss.mmm mark message`, or the signal
/// handler's `pid:signal-handler (secs) message` (role `s`, mark `#`).
/// None if the line is not in either format.
fn parse_log_line(line: &str) -> Option<(char, char, String)> {
    let (pid, rest) = line.split_once(':')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if let Some(rest) = rest.strip_prefix("signal-handler (") {
        let (secs, message) = rest.split_once(") ")?;
        secs.parse::<u64>().ok()?;
        return Some(('s', '#', message.to_string()));
    }
    let mut chars = rest.chars();
    let role = chars.next()?;
    let rest = chars.as_str().strip_prefix(' ')?;
    // "25 Nov 2026 15:46:15.500"
    let (stamp, rest) = rest.split_at_checked(24)?;
    let b = stamp.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let shape = digits(0..2)
        && b[2] == b' '
        && b[3..6].iter().all(u8::is_ascii_alphabetic)
        && b[6] == b' '
        && digits(7..11)
        && b[11] == b' '
        && digits(12..14)
        && b[14] == b':'
        && digits(15..17)
        && b[17] == b':'
        && digits(18..20)
        && b[20] == b'.'
        && digits(21..24);
    if !shape || !"CMSX".contains(role) {
        return None;
    }
    let rest = rest.strip_prefix(' ')?;
    let mut chars = rest.chars();
    let mark = chars.next()?;
    if !".-*#".contains(mark) {
        return None;
    }
    Some((role, mark, chars.as_str().strip_prefix(' ')?.to_string()))
}

/// The log lines as (role, mark, message), with what differs from run to
/// run (pids, ports, socket paths) replaced by placeholders. Panics on a
/// line in neither of Redis's formats.
fn normalized(lines: &[String], replace: &[(&str, &str)]) -> Vec<(char, char, String)> {
    lines
        .iter()
        .filter(|l| !l.starts_with("listening on "))
        .map(|l| {
            let (role, mark, mut message) = parse_log_line(l).unwrap_or_else(|| panic!("not a Redis log line: {l:?}"));
            if let Some(at) = message.find("pid=") {
                let end = message[at..].find(',').map_or(message.len(), |e| at + e);
                message.replace_range(at..end, "pid=PID");
            }
            for (from, to) in replace {
                message = message.replace(from, to);
            }
            (role, mark, message)
        })
        .collect()
}

/// Asserts that every one of keylock's lines is one of Redis's, in the
/// same order (Redis prints more: its memory and clock notes).
fn assert_subsequence(keylock: &[(char, char, String)], redis: &[(char, char, String)]) {
    let mut theirs = redis.iter();
    for line in keylock {
        assert!(
            theirs.any(|r| r == line),
            "keylock's {line:?} is not among redis-server's lines in order:\nkeylock: {keylock:#?}\nredis: {redis:#?}"
        );
    }
}

/// keylock's first line names it; the rest of the banner is Redis's.
fn without_keylock_banner(mut lines: Vec<(char, char, String)>) -> Vec<(char, char, String)> {
    let first = lines.remove(0);
    assert_eq!(
        first,
        (
            'C',
            '#',
            format!("oO0OoO0OoO0Oo keylock {} is starting oO0OoO0OoO0Oo", keylock::VERSION)
        )
    );
    lines
}

fn unix_connection(path: &Path) -> redis::Connection {
    redis::Client::open(format!("unix://{}", path.display()))
        .unwrap()
        .get_connection()
        .expect("connect over the Unix socket")
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|f| f.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

#[test]
fn serves_a_unix_socket_only_with_port_zero_and_removes_it_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keylock.sock");
    let sock_text = sock.to_str().unwrap();
    let mut keylock = Process::start(KEYLOCK, &["--port", "0", "--unixsocket", sock_text]);
    let ready = keylock.wait_for("ready to accept connections");
    assert!(
        ready.ends_with(&format!("* The server is now ready to accept connections at {sock_text}")),
        "{ready}"
    );

    let mut c = unix_connection(&sock);
    q::<()>(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    assert_eq!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "port"]), ["port", "0"]);
    let _ = redis::cmd("SHUTDOWN").query::<()>(&mut c);
    let (status, lines) = keylock.finish();
    assert!(status.success(), "{status:?}");
    assert!(!sock.exists(), "the socket file is left behind");
    // No TCP port: neither `listening on` nor Redis's TCP ready line.
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("listening on") || l.ends_with("Ready to accept connections")),
        "{lines:#?}"
    );
}

#[test]
fn serves_a_unix_socket_beside_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keylock.sock");
    let port = free_port();
    let mut keylock = Process::start(KEYLOCK, &["--port", &port.to_string(), "--unixsocket", sock.to_str().unwrap()]);
    keylock.wait_for("Ready to accept connections");
    keylock.wait_for("The server is now ready to accept connections at");
    let mut over_unix = unix_connection(&sock);
    q::<()>(&mut over_unix, &["SET", "k", "from unix"]);
    let mut over_tcp = Raw::connect(format!("127.0.0.1:{port}").parse().unwrap());
    assert_eq!(over_tcp.call(&["GET", "k"]), b"$9\r\nfrom unix\r\n");
}

#[test]
fn a_unix_socket_client_is_shown_and_treated_as_redis_server_does() {
    if !redis_server_found() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut info = Vec::new();
    for (program, name) in [(KEYLOCK, "keylock"), ("redis-server", "redis")] {
        let sock = dir.path().join(format!("{name}.sock"));
        let sock_text = sock.to_str().unwrap();
        let mut server = Process::start(
            program,
            &[
                "--port",
                "0",
                "--unixsocket",
                sock_text,
                "--unixsocketperm",
                "700",
                "--enable-protected-configs",
                "local",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                dir.path().to_str().unwrap(),
            ],
        );
        server.wait_for("ready to accept connections");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;

        let mut c = unix_connection(&sock);
        let client: String = q(&mut c, &["CLIENT", "INFO"]);
        let mut monitor = BufReader::new(std::os::unix::net::UnixStream::connect(&sock).unwrap());
        std::io::Write::write_all(monitor.get_mut(), b"MONITOR\r\n").unwrap();
        let mut line = String::new();
        monitor.read_line(&mut line).unwrap();
        assert_eq!(line, "+OK\r\n");
        q::<()>(&mut c, &["PING"]);
        line.clear();
        monitor.read_line(&mut line).unwrap();
        // +1700000000.123456 [0 unix:/path] "PING"
        let origin = line[line.find('[').unwrap()..=line.find(']').unwrap()].to_string();
        let mut config: Vec<String> = q(&mut c, &["CONFIG", "GET", "unixsocket"]);
        config.extend(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "unixsocketperm"]));
        // Protected configs are local clients' with `local`: the socket's are.
        let set_dir: String = q(&mut c, &["CONFIG", "SET", "dir", dir.path().to_str().unwrap()]);
        let kill: i64 = q(&mut c, &["CLIENT", "KILL", "ADDR", &format!("{sock_text}:0"), "SKIPME", "yes"]);
        info.push((
            field(&client, "addr").replace(sock_text, "SOCK"),
            field(&client, "laddr").replace(sock_text, "SOCK"),
            field(&client, "flags").to_string(),
            origin.replace(sock_text, "SOCK"),
            mode,
            config.join(" ").replace(sock_text, "SOCK"),
            set_dir,
            kill,
        ));
    }
    assert_eq!(
        info[0],
        (
            "SOCK:0".to_string(),
            "SOCK:0".to_string(),
            "U".to_string(),
            "[0 unix:SOCK]".to_string(),
            0o700,
            "unixsocket SOCK unixsocketperm 700".to_string(),
            "OK".to_string(),
            1,
        )
    );
    assert_eq!(info[0], info[1]);
}

#[test]
fn start_up_lines_and_the_ready_line_are_redis_servers() {
    if !redis_server_found() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut logs = Vec::new();
    for program in [KEYLOCK, "redis-server"] {
        let port = free_port().to_string();
        let args = [
            "--port",
            &port,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            dir.path().to_str().unwrap(),
        ];
        let mut server = Process::start(program, &args);
        server.wait_for("Ready to accept connections");
        server.signal("-TERM");
        let (status, lines) = server.finish();
        assert!(status.success(), "{program}: {status:?}");
        logs.push(normalized(&lines, &[(&port, "PORT")]));
    }
    let keylock = without_keylock_banner(logs.remove(0));
    let redis = logs.remove(0);
    assert_eq!(
        keylock.iter().map(|(_, _, m)| m.as_str()).collect::<Vec<_>>(),
        [
            "Redis version=7.0.15, bits=64, commit=00000000, modified=0, pid=PID, just started",
            "Configuration loaded",
            "Running mode=standalone, port=PORT.",
            "Server initialized",
            "Ready to accept connections",
            "Received SIGTERM scheduling shutdown...",
            "User requested shutdown...",
            "Redis is now ready to exit, bye bye...",
        ]
    );
    assert_subsequence(&keylock, &redis);
}

#[test]
fn loglevel_and_logfile_send_redis_servers_lines_to_the_file() {
    if !redis_server_found() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut logs = Vec::new();
    for (program, name) in [(KEYLOCK, "keylock"), ("redis-server", "redis")] {
        let sock = dir.path().join(format!("{name}.sock"));
        let sock_text = sock.to_str().unwrap();
        let log = dir.path().join(format!("{name}.log"));
        let port = free_port().to_string();
        let args = [
            "--port",
            &port,
            "--unixsocket",
            sock_text,
            "--logfile",
            log.to_str().unwrap(),
            "--loglevel",
            "verbose",
            "--save",
            "",
            "--dir",
            dir.path().to_str().unwrap(),
        ];
        let server = Process::start(program, &args);
        wait_until(10, "the ready line in the log file", || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains("ready to accept connections at"))
        });
        let mut c = unix_connection(&sock);
        assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
        q::<()>(&mut c, &["CONFIG", "SET", "loglevel", "notice"]);
        let _ = redis::cmd("SHUTDOWN").query::<()>(&mut c);
        let (status, stdout) = server.finish();
        assert!(status.success(), "{program}: {status:?}");
        assert!(stdout.is_empty(), "{program} wrote to stdout: {stdout:#?}");
        assert!(!sock.exists(), "{program} left its socket file");
        let lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
        logs.push(normalized(&lines, &[(&port, "PORT"), (sock_text, "SOCK")]));
    }
    let keylock = without_keylock_banner(logs.remove(0));
    let redis = logs.remove(0);
    for expected in [
        "Ready to accept connections",
        "The server is now ready to accept connections at SOCK",
        "Accepted connection to SOCK",
        "Removing the unix socket file.",
    ] {
        assert!(keylock.iter().any(|(_, _, m)| m == expected), "no {expected:?} in {keylock:#?}");
    }
    assert_subsequence(&keylock, &redis);
}

/// What a daemonized server leaves in its pid file and log.
struct Daemon {
    /// The launcher's exit status (the parent of the fork).
    launcher: ExitStatus,
    log: Vec<(char, char, String)>,
}

/// Starts `program` daemonized as an init script does, finds it by its
/// pid file, checks that it serves, stops it by that pid and waits for
/// the pid file to go.
fn run_daemon(program: &str, dir: &Path, name: &str) -> Daemon {
    let pidfile: PathBuf = dir.join(format!("{name}.pid"));
    let log = dir.join(format!("{name}.log"));
    let port = free_port();
    let mut launcher = Command::new(program)
        .args(["--daemonize", "yes", "--port", &port.to_string(), "--save", ""])
        .arg("--pidfile")
        .arg(&pidfile)
        .arg("--logfile")
        .arg(&log)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher_status = wait_with_timeout(&mut launcher);
    let mut out = String::new();
    launcher.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(out, "", "{program} printed on stdout");
    let mut pid = String::new();
    wait_until(10, "the pid file", || {
        pid = std::fs::read_to_string(&pidfile).unwrap_or_default();
        pid.ends_with('\n')
    });
    let pid: u32 = pid.trim().parse().unwrap();
    assert_ne!(pid, launcher.id(), "{program} did not fork");
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(Raw::connect(addr).call(&["PING"]), b"+PONG\r\n");
    Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    wait_until(10, "the pid file removed", || !pidfile.exists());
    wait_until(10, "the daemon gone", || !Path::new(&format!("/proc/{pid}")).exists());
    let lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    Daemon {
        launcher: launcher_status,
        log: normalized(&lines, &[(&port.to_string(), "PORT")]),
    }
}

#[test]
fn daemonizes_writes_its_pid_file_and_stops_by_that_pid() {
    let dir = tempfile::tempdir().unwrap();
    let keylock = run_daemon(KEYLOCK, dir.path(), "keylock");
    assert!(keylock.launcher.success(), "{:?}", keylock.launcher);
    let keylock_log = without_keylock_banner(keylock.log);
    for expected in [
        "Ready to accept connections",
        "Removing the pid file.",
        "Redis is now ready to exit, bye bye...",
    ] {
        assert!(
            keylock_log.iter().any(|(_, _, m)| m == expected),
            "no {expected:?} in {keylock_log:#?}"
        );
    }
    if !redis_server_found() {
        return;
    }
    let redis = run_daemon("redis-server", dir.path(), "redis");
    assert_eq!(keylock.launcher.code(), redis.launcher.code());
    assert_subsequence(&keylock_log, &redis.log);
}

/// Runs `program` to completion: exit code, stdout, stderr.
fn run(program: &str, args: &[&str], dir: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_options_fail_with_redis_servers_report_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.conf"), "# a comment\nport 7000\nno-such-directive yes\n").unwrap();
    std::fs::write(dir.path().join("quotes.conf"), "requirepass \"unbalanced\n").unwrap();
    let cases: &[&[&str]] = &[
        &["--nosuchoption", "1"],
        &["--port", "abc"],
        &["--port"],
        &["--port", "70000"],
        &["--unixsocketperm", "999"],
        &["--loglevel", "loud"],
        &["--daemonize", "maybe"],
        &["--logfile", "/nonexistent-keylock-dir/x.log"],
        &["bad.conf", "--port", "7001"],
        &["quotes.conf"],
        &["-x"],
    ];
    let (code, stdout, stderr) = run(KEYLOCK, &["--nosuchoption", "1"], dir.path());
    assert_eq!(code, Some(1));
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line 2\n>>> 'nosuchoption \"1\"'\nBad directive or wrong number of arguments\n"
    );
    if !redis_server_found() {
        return;
    }
    for args in cases {
        let keylock = run(KEYLOCK, args, dir.path());
        let redis = run("redis-server", args, dir.path());
        assert_eq!(keylock, redis, "{args:?}");
    }
}

#[test]
fn an_unreadable_config_file_is_logged_as_redis_server_logs_it() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = run(KEYLOCK, &["missing.conf"], dir.path());
    assert_eq!((code, stderr.as_str()), (Some(1), ""));
    let lines: Vec<String> = stdout.lines().map(String::from).collect();
    let expected = format!(
        "Fatal error, can't open config file '{}': No such file or directory",
        dir.path().join("missing.conf").display()
    );
    assert_eq!(normalized(&lines, &[]), [('C', '#', expected.clone())]);
    if !redis_server_found() {
        return;
    }
    let (code, stdout, stderr) = run("redis-server", &["missing.conf"], dir.path());
    let lines: Vec<String> = stdout.lines().map(String::from).collect();
    assert_eq!((code, stderr.as_str()), (Some(1), ""));
    assert_eq!(normalized(&lines, &[]), [('C', '#', expected)]);
}

#[test]
fn version_prints_redis_servers_line_with_keylocks_version_after_it() {
    let (code, stdout, _) = run(KEYLOCK, &["--version"], Path::new("."));
    assert_eq!(code, Some(0));
    assert_eq!(run(KEYLOCK, &["-v"], Path::new(".")).1, stdout);
    // How tools read it: the fields of one line, `v=` the version.
    let parse = |out: &str| -> Vec<(String, String)> {
        assert_eq!(out.lines().count(), 1, "{out:?}");
        let line = out.trim_end().strip_prefix("Redis server ").unwrap_or_else(|| panic!("{out:?}"));
        line.split(' ')
            .map(|f| {
                let (k, v) = f.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    };
    let ours = parse(&stdout);
    let names: Vec<&str> = ours.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["v", "sha", "malloc", "bits", "build", "keylock"]);
    assert_eq!(ours[0].1, "7.0.15");
    assert_eq!(ours[5].1, keylock::VERSION);
    if !redis_server_found() {
        return;
    }
    let theirs = parse(&run("redis-server", &["--version"], Path::new(".")).1);
    let their_names: Vec<&str> = theirs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names[..5], their_names[..]);
    assert_eq!((&ours[0], &ours[3]), (&theirs[0], &theirs[3]));
}

#[test]
fn test_memory_is_refused() {
    let (code, stdout, stderr) = run(KEYLOCK, &["--test-memory", "16"], Path::new("."));
    assert_eq!(code, Some(1));
    assert_eq!(stdout, "");
    assert!(stderr.contains("does not test memory"), "{stderr}");
}

#[test]
fn port_zero_prints_its_address_first_then_the_log() {
    let mut keylock = Process::start(KEYLOCK, &["--port", "0"]);
    let ready = keylock.wait_for("Ready to accept connections");
    let first = &keylock.seen[0];
    let addr = first.strip_prefix("listening on ").unwrap_or_else(|| panic!("first line: {first}"));
    let port = addr.rsplit(':').next().unwrap();
    assert!(ready.ends_with("* Ready to accept connections"), "{ready}");
    let banner = normalized(&keylock.seen[1..], &[(port, "PORT")]);
    assert!(
        banner.contains(&('M', '*', "Running mode=standalone, port=PORT.".to_string())),
        "{banner:#?}"
    );
    Raw::connect(addr.parse().unwrap()).call(&["PING"]);
}

/// Starts `program` under a fake systemd (`NOTIFY_SOCKET`), stops it with
/// SHUTDOWN, and returns what it told systemd and its log.
fn run_under_systemd(program: &str, dir: &Path, name: &str) -> (Vec<String>, Vec<(char, char, String)>) {
    let notify = dir.join(format!("{name}.notify"));
    let socket = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let port = free_port();
    let mut child = Command::new(program)
        .args(["--supervised", "systemd", "--port", &port.to_string(), "--save", ""])
        .arg("--dir")
        .arg(dir)
        .env("NOTIFY_SOCKET", &notify)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut messages = Vec::new();
    let mut buf = [0u8; 512];
    while messages.last().is_none_or(|m| m != "READY=1\n") {
        let n = socket.recv(&mut buf).expect("a notification");
        messages.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    Raw::connect(format!("127.0.0.1:{port}").parse().unwrap()).send_cmd(&[b"SHUTDOWN"]);
    let n = socket.recv(&mut buf).expect("the stopping notification");
    messages.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    assert!(wait_with_timeout(&mut child).success());
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let lines: Vec<String> = out.lines().map(String::from).collect();
    (messages, normalized(&lines, &[(&port.to_string(), "PORT")]))
}

#[test]
fn supervised_systemd_is_told_of_readiness_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let (messages, log) = run_under_systemd(KEYLOCK, dir.path(), "keylock");
    assert_eq!(
        messages,
        [
            "STATUS=Redis is loading...\n",
            "STATUS=Ready to accept connections\n",
            "READY=1\n",
            "STOPPING=1\n"
        ]
    );
    if !redis_server_found() {
        return;
    }
    let (their_messages, their_log) = run_under_systemd("redis-server", dir.path(), "redis");
    assert_eq!(messages, their_messages);
    let mut log = log;
    // keylock's banner line sits second, after the supervision notice.
    let banner = log.remove(1);
    assert!(banner.2.contains("keylock"), "{banner:?}");
    assert_subsequence(&log, &their_log);
}

#[test]
fn sockets_that_cannot_be_opened_fail_as_redis_server_does() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let long = format!("/tmp/{}.sock", "s".repeat(120));
    let cases: &[&[&str]] = &[
        &["--port", "0", "--unixsocket", "/nonexistent-keylock-dir/k.sock"],
        &["--port", "0", "--unixsocket", &long],
        &["--port", &port, "--bind", "127.0.0.1"],
    ];
    let last_line = |program: &str, args: &[&str]| {
        let (code, stdout, _) = run(program, args, dir.path());
        let lines: Vec<String> = stdout.lines().map(String::from).collect();
        (code, normalized(&lines, &[]).pop())
    };
    let ours: Vec<_> = cases.iter().map(|args| last_line(KEYLOCK, args)).collect();
    assert_eq!(
        ours[0],
        (
            Some(1),
            Some(('M', '#', "Failed opening Unix socket: bind: No such file or directory".to_string()))
        )
    );
    if !redis_server_found() {
        return;
    }
    for (args, ours) in cases.iter().zip(ours) {
        assert_eq!(ours, last_line("redis-server", args), "{args:?}");
    }
}
