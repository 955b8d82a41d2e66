//! The `keylock` binary: redis-server's command line, then serve until
//! SHUTDOWN, SIGINT or SIGTERM; or `keylock bench …`, the load generator.

use keylock::{Config, Server};

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("KEYLOCK_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("bench") {
        #[cfg(feature = "bench")]
        std::process::exit(keylock::bench::main(&args[1..]));
        #[cfg(not(feature = "bench"))]
        {
            eprintln!("keylock: built without the `bench` feature");
            std::process::exit(1);
        }
    }
    if matches!(args.first().map(String::as_str), Some("-h" | "--help")) {
        print!("{}", HELP);
        return;
    }
    if matches!(args.first().map(String::as_str), Some("-v" | "--version")) {
        println!("keylock {} (redis_version {})", keylock::VERSION, keylock::REDIS_VERSION);
        return;
    }
    let mut config = match Config::from_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("keylock: {e}");
            std::process::exit(1);
        }
    };
    config.announce = config.port == 0 && config.unixsocket.is_none();
    // Handlers go in before the server announces itself or accepts: a
    // signal that arrives right after start must stop it cleanly too.
    let signals = StopSignals::register();
    let server = match Server::new(config).start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("keylock: could not start: {e}");
            std::process::exit(1);
        }
    };
    signals.stop(&server);
    let mut server = server;
    server.wait();
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

    /// Waits for either signal on a thread of its own, then stops `server`.
    fn stop(self, server: &keylock::ServerHandle) {
        let stopper = server.stopper();
        let StopSignals {
            runtime,
            mut term,
            mut int,
        } = self;
        std::thread::spawn(move || {
            runtime.block_on(async {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
            });
            tracing::warn!("received a stop signal, shutting down");
            stopper.stop();
        });
    }
}

const HELP: &str = "\
keylock: a Redis-protocol server for locks and tests

Usage:
  keylock [/path/to/keylock.conf] [--directive value ...]
  keylock bench WORKLOAD [options]   load any RESP server (see keylock bench --help)

Every redis.conf directive is accepted as a flag, as with redis-server:
  --port N                 TCP port (default 6379; 0 picks a free port and
                           prints `listening on ADDR`)
  --bind ADDR ...          addresses to listen on (default 127.0.0.1)
  --requirepass PASS       require AUTH
  --databases N            number of databases (default 16)
  --proto-max-bulk-len N   largest bulk argument accepted (default 512mb)
  --hz N                   background task frequency (default 10)

Logging: KEYLOCK_LOG=info (tracing filter syntax).
";

#[global_allocator]
static ALLOC: keylock::memory::CountingAlloc = keylock::memory::CountingAlloc;
