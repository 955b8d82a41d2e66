//! The network side: the listener, one task per connection, and the
//! public [`Server`] / [`ServerHandle`] API used by the binary and by tests
//! that embed keylock.
//!
//! Connections run on a small tokio runtime; the data lives on the engine
//! thread (see `engine`). Nothing here touches the keyspace.

pub mod conn;
pub mod parser;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::config::Config;
use crate::engine::{self, Request, State};

/// Shared by the listener and connection tasks.
pub(crate) struct Shared {
    pub engine: Sender<Request>,
    pub next_client_id: AtomicU64,
    pub proto_max_bulk_len: i64,
    pub maxclients: usize,
    pub connected: AtomicU64,
    /// Whether new clients start unauthenticated (the engine reports changes).
    pub auth_required_at_start: bool,
}

/// A keylock server, configured but not yet started.
pub struct Server {
    config: Config,
}

/// A running server: its address, its clock, and how to stop it.
pub struct ServerHandle {
    addr: SocketAddr,
    clock: Clock,
    engine_tx: Sender<Request>,
    stopped: watch::Receiver<bool>,
    runtime: Option<tokio::runtime::Runtime>,
    engine_thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn new(config: Config) -> Server {
        Server { config }
    }

    /// A test double: loopback, a free port, default settings.
    pub fn ephemeral() -> Server {
        Server::new(Config::ephemeral())
    }

    /// Starts the engine thread and the listener on a runtime of its own,
    /// and returns once the socket is bound and accepting.
    pub fn start(self) -> std::io::Result<ServerHandle> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("keylock-net")
            .enable_all()
            .build()?;
        let config = self.config;
        let listeners = runtime.block_on(bind_all(&config))?;
        let addr = listeners[0].local_addr()?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let state = State::new(config.clone(), addr.port());
        let (engine_tx, engine_thread) = engine::spawn(state, stop_tx)?;
        let shared = Arc::new(Shared {
            engine: engine_tx.clone(),
            next_client_id: AtomicU64::new(1),
            proto_max_bulk_len: config.proto_max_bulk_len,
            maxclients: config.maxclients,
            connected: AtomicU64::new(0),
            auth_required_at_start: config.requirepass.is_some(),
        });
        for listener in listeners {
            runtime.spawn(accept_loop(listener, shared.clone(), stop_rx.clone()));
        }
        if config.announce {
            println!("listening on {addr}");
            use std::io::Write;
            let _ = std::io::stdout().flush();
        }
        tracing::info!(%addr, "keylock ready to accept connections");
        Ok(ServerHandle {
            addr,
            clock: config.clock.clone(),
            engine_tx,
            stopped: stop_rx,
            runtime: Some(runtime),
            engine_thread: Some(engine_thread),
        })
    }
}

async fn bind_all(config: &Config) -> std::io::Result<Vec<TcpListener>> {
    let mut listeners = Vec::new();
    let mut port = config.port;
    for host in &config.bind {
        let host = host.trim_start_matches('-');
        let addr = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let listener = TcpListener::bind(&addr).await?;
        // With port 0, every further address shares the first one's port.
        port = listener.local_addr()?.port();
        listeners.push(listener);
    }
    if listeners.is_empty() {
        listeners.push(TcpListener::bind(("127.0.0.1", port)).await?);
    }
    Ok(listeners)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    tokio::spawn(conn::serve(stream, peer, shared.clone(), stop.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
            _ = stop.changed() => return,
        }
    }
}

impl ServerHandle {
    /// The address the server accepts connections on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://ip:port/` for client libraries.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// The server's clock; `Clock::advance` moves TTLs forward in tests.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// A handle that can stop the server from another thread (signal handlers).
    pub fn stopper(&self) -> Stopper {
        Stopper {
            engine_tx: self.engine_tx.clone(),
        }
    }

    /// Blocks until the server stops (SHUTDOWN, or `shutdown`).
    pub fn wait(&mut self) {
        if let Some(rt) = &self.runtime {
            let mut stopped = self.stopped.clone();
            rt.block_on(async {
                while !*stopped.borrow() {
                    if stopped.changed().await.is_err() {
                        break;
                    }
                }
            });
        }
        self.finish();
    }

    /// Stops accepting, closes every connection and stops the engine.
    pub fn shutdown(mut self) {
        let _ = self.engine_tx.send(Request::Shutdown);
        self.wait();
    }

    fn finish(&mut self) {
        if let Some(t) = self.engine_thread.take() {
            let _ = t.join();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(std::time::Duration::from_millis(200));
        }
    }
}

/// Stops a running server from anywhere: `SHUTDOWN` without a client.
#[derive(Clone)]
pub struct Stopper {
    engine_tx: Sender<Request>,
}

impl Stopper {
    pub fn stop(&self) {
        let _ = self.engine_tx.send(Request::Shutdown);
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.engine_thread.is_some() {
            let _ = self.engine_tx.send(Request::Shutdown);
            self.finish();
        }
    }
}
