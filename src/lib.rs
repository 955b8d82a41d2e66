//! keylock: an in-memory server that speaks the Redis protocol, built as a
//! lock server for Redisson and as a test double for any Redis client.
//!
//! The crate is a library plus the `keylock` binary. Embedding it:
//!
//! ```no_run
//! let server = keylock::Server::ephemeral().start().unwrap();
//! println!("keylock on {}", server.addr());
//! server.shutdown();
//! ```
//!
//! Module map (data flows top to bottom):
//! - [`server`]: listener, connections, the RESP request parser.
//! - [`engine`]: the single command loop that owns all data.
//! - [`commands`]: the command table and one module per command family.
//! - [`db`]: databases, value types and expiry.
//! - [`pubsub`]: the subscription index.
//! - [`reply`]: replies and their RESP2/RESP3 encoding.
//! - [`request`]: request-level primitives below the network side
//!   (`sdssplitargs`, the small-request size).
//! - [`scripting`]: the Lua 5.1 VM and the libraries Redis ships, and the
//!   Redisson lock scripts run natively (`scripting::native`).
//! - [`config`], [`config_params`]: start-up flags and the CONFIG parameter table.
//! - [`clock`]: real or test-controlled time.
//! - [`cluster`]: Redis Cluster mode: hash slots, the nodes, the bus.
//! - [`geohash`]: Redis's geohash cells, search areas and distances.
//! - [`csort`]: glibc's `qsort` and Redis's `pqsort`, step for step.
//! - [`log`]: Redis's server log (stdout or `logfile`, `loglevel`).
//! - [`process`]: redis-server's process contract (`--version`, daemonize,
//!   supervised).
//! - [`bench`]: `keylock bench`, the load generator (a client of any RESP
//!   server; it shares no code with the server side). Behind the default
//!   `bench` feature: embedding keylock with `default-features = false`
//!   compiles the server without it or its crates.

pub mod acl;
#[cfg(feature = "bench")]
pub mod bench;
pub mod clock;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod config_params;
pub mod config_rewrite;
pub mod csort;
pub mod db;
pub mod engine;
pub mod error;
pub mod geohash;
pub mod glob;
pub mod log;
pub mod memory;
pub mod numfmt;
pub mod process;
pub mod pubsub;
#[cfg(feature = "raft")]
pub mod raft;
pub mod rdb;
pub mod reply;
pub mod request;
pub mod scripting;
pub mod server;
pub mod tls;

pub use clock::Clock;
pub use config::Config;
pub use server::{BoundServer, Server, ServerHandle};

/// keylock's own version, reported as `keylock_version` in INFO.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The Redis version keylock answers as, for clients that check it.
pub const REDIS_VERSION: &str = "7.0.15";
