//! The `keylock` binary: redis-server's command line and process contract
//! (config errors, `--version`, daemonize, pid file, the log and its
//! start-up and shutdown lines), then serve until SHUTDOWN, SIGINT or
//! SIGTERM; or `keylock bench …`, the load generator.

use keylock::config::ConfigError;
use keylock::log;
use keylock::process::{self, Supervision};
use keylock::{Config, Server};

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("KEYLOCK_LOG").unwrap_or_else(|_| "warn,openraft=error".into()))
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
    if args.first().map(String::as_str) == Some("bench") {
        #[cfg(feature = "bench")]
        std::process::exit(keylock::bench::main(&args[1..]));
        #[cfg(not(feature = "bench"))]
        {
            eprintln!("keylock: built without the `bench` feature");
            std::process::exit(1);
        }
    }
    match args.first().map(String::as_str) {
        Some("-h" | "--help") => {
            print!("{}", HELP);
            return;
        }
        Some("-v" | "--version") => {
            println!("{}", process::version_line());
            return;
        }
        Some("--test-memory") => {
            eprintln!(
                "keylock does not test memory: --test-memory is redis-server's memory tester, not a server option. Use `redis-server --test-memory MB` or memtester."
            );
            std::process::exit(1);
        }
        _ => {}
    }
    // Until the configuration names a log file, Redis's log is stdout
    // (where a config file that cannot be read is reported).
    log::install(log::Target::Stdout, log::Level::Notice);
    let mut config = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e @ ConfigError::Fatal { .. }) => {
            eprint!("{e}");
            std::process::exit(1);
        }
        Err(ConfigError::Unreadable(line)) => {
            log::warning(format_args!("{line}"));
            std::process::exit(1);
        }
    };
    if let Some(dir) = &config.dir
        && let Err(e) = std::env::set_current_dir(dir)
    {
        eprint!(
            "{}",
            ConfigError::Fatal {
                line: None,
                reason: keylock::error::os_error_text(&e),
            }
        );
        std::process::exit(1);
    }
    let target = match &config.logfile {
        Some(path) => log::Target::File(path.into()),
        None => log::Target::Stdout,
    };
    log::install(target, config.loglevel);
    let supervision = process::supervise(&config.supervised);
    if config.daemonize && supervision == Supervision::None {
        process::daemonize();
        if config.pidfile.is_none() {
            // Redis's CONFIG_DEFAULT_PID_FILE, for a daemon without one.
            config.pidfile = Some("/var/run/redis.pid".into());
            config.directives.push(("pidfile".into(), vec!["/var/run/redis.pid".into()]));
        }
    }
    // `--port 0` alone binds a free port and prints it first; Redis's
    // banner then follows it. Otherwise the banner comes first, as Redis's.
    config.announce = config.port == 0 && config.unixsocket.is_none() && config.tls_port == 0;
    let announce = config.announce;
    if !announce {
        banner(&args);
    }
    // Handlers go in before the server announces itself or accepts: a
    // signal that arrives right after start must stop it cleanly too.
    let signals = StopSignals::register();
    // A file that reaches the process's size limit (RLIMIT_FSIZE) fails
    // the write (EFBIG), which the append-only file and snapshots report
    // as any write error, instead of killing the process.
    // SAFETY: sets a signal's disposition to "ignore"; no handler runs.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let bound = match Server::new(config).bind() {
        Ok(b) => b,
        Err(e) => {
            if announce {
                banner(&args);
            }
            log::warning(format_args!("{e}"));
            std::process::exit(1);
        }
    };
    if announce {
        banner(&args);
    }
    let server = match bound.start() {
        Ok(s) => s,
        Err(e) => {
            log::warning(format_args!("could not start the server thread: {e}"));
            std::process::exit(1);
        }
    };
    if supervision == Supervision::Systemd {
        process::notify_systemd("STATUS=Ready to accept connections\n");
        process::notify_systemd("READY=1\n");
    }
    signals.stop(&server);
    let mut server = server;
    server.wait();
}

/// The first lines Redis logs: starting, its version, how it was configured.
fn banner(args: &[String]) {
    log::warning(format_args!("oO0OoO0OoO0Oo keylock {} is starting oO0OoO0OoO0Oo", keylock::VERSION));
    log::warning(format_args!(
        "Redis version={}, bits=64, commit=00000000, modified=0, pid={}, just started",
        keylock::REDIS_VERSION,
        std::process::id()
    ));
    if args.is_empty() {
        let program = std::env::args().next().unwrap_or_else(|| "keylock".into());
        log::warning(format_args!(
            "Warning: no config file specified, using the default config. In order to specify a config file use {program} /path/to/redis.conf"
        ));
    } else {
        log::warning(format_args!("Configuration loaded"));
    }
}

/// SIGINT and SIGTERM stop the server cleanly, as SHUTDOWN does.
struct StopSignals {
    runtime: tokio::runtime::Runtime,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the handlers now, on this thread.
    fn register() -> StopSignals {
        use tokio::signal::unix::{SignalKind, signal};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("signal runtime");
        let (term, int) = {
            let _context = runtime.enter();
            (
                signal(SignalKind::terminate()).expect("SIGTERM handler"),
                signal(SignalKind::interrupt()).expect("SIGINT handler"),
            )
        };
        StopSignals { runtime, term, int }
    }

    /// Waits for the signals on a thread of its own: the first stops
    /// `server`, logged as Redis logs it; a second SIGINT exits at once
    /// with status 1, as Redis's "You insist" does.
    fn stop(self, server: &keylock::ServerHandle) {
        let stopper = server.stopper();
        let StopSignals {
            runtime,
            mut term,
            mut int,
        } = self;
        std::thread::spawn(move || {
            runtime.block_on(async {
                loop {
                    let sigint = tokio::select! {
                        _ = term.recv() => false,
                        _ = int.recv() => true,
                    };
                    if stopper.stopping() {
                        if sigint {
                            log::from_signal_handler("You insist... exiting now.");
                            std::process::exit(1);
                        }
                        continue;
                    }
                    log::from_signal_handler(if sigint {
                        "Received SIGINT scheduling shutdown..."
                    } else {
                        "Received SIGTERM scheduling shutdown..."
                    });
                    stopper.stop_on_signal();
                }
            });
        });
    }
}

const HELP: &str = "\
keylock: a Redis-protocol server for locks and tests

Usage:
  keylock [/path/to/keylock.conf] [--directive value ...]
  keylock bench WORKLOAD [options]   load any RESP server (see keylock bench --help)
  keylock -v | --version

Every redis.conf directive is accepted as a flag, as with redis-server:
  --port N                 TCP port (default 6379; 0 picks a free port and
                           prints `listening on ADDR`; 0 with --unixsocket:
                           the socket only)
  --bind ADDR ...          addresses to listen on (default 127.0.0.1)
  --unixsocket PATH        also listen on a Unix domain socket
  --unixsocketperm MODE    the socket file's mode, octal (e.g. 700)
  --requirepass PASS       require AUTH (the default user's password)
  --user NAME RULE ...     an ACL user, as in redis.conf (repeat for more)
  --aclfile PATH           ACL users from a file (ACL LOAD / ACL SAVE)
  --databases N            number of databases (default 16)
  --proto-max-bulk-len N   largest bulk argument accepted (default 512mb)
  --hz N                   background task frequency (default 10)
  --daemonize yes          run in the background (--pidfile FILE for its pid)
  --logfile FILE           Redis's log there instead of stdout
  --loglevel LEVEL         debug, verbose, notice (default) or warning
  --cluster-enabled yes    a Redis Cluster node (--cluster-port, nodes.conf)
  --replication raft       a member of a Raft-replicated shard: --raft-id N
                           --raft-members \"1=HOST:PORT:RAFTPORT 2=... 3=...\"

Redis's log lines go to stdout (or --logfile); keylock's own diagnostics go
to stderr: KEYLOCK_LOG=info (tracing filter syntax).
";

#[global_allocator]
static ALLOC: keylock::memory::CountingAlloc = keylock::memory::CountingAlloc;
