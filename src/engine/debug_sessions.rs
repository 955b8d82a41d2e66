//! Forked Lua debugging sessions (`SCRIPT DEBUG YES`, then EVAL), as
//! Redis runs them: the server forks, the child runs the script under the
//! debugger (`scripting::ldb`) on the client's socket and exits, and what
//! the script wrote goes with it; the parent closes its side of the
//! connection without a word and goes on serving. The cron reaps the
//! children; SHUTDOWN kills those still running.
//!
//! The child is one thread of a process whose other threads (the
//! append-only file's syncer, a Raft shard's engine, the runtime's
//! workers) did not come along: before the script runs it lets go of
//! everything that reaches them (the effect stream and its consumers, the
//! append-only file, the shard), without running their destructors, so
//! that nothing the script does waits on a thread that is not there or
//! writes where the parent writes. A session on a shard member therefore
//! runs as if the member were standalone. It writes no log (another
//! thread may have held the log's lock at the fork), saves no snapshot
//! (a FLUSHALL would otherwise overwrite the parent's file, or stop the
//! parent's BGSAVE child), and dies with the server: killed at SHUTDOWN,
//! and by the kernel if the server's engine thread ends any other way
//! (`PR_SET_PDEATHSIG`), so that it never holds the listening sockets
//! it inherited after the server is gone.

use super::State;

/// The forked sessions still running (Redis's `ldb.children`).
#[derive(Debug, Default)]
pub struct DebugSessions {
    children: Vec<libc::pid_t>,
}

/// Which side of a fork this process is on.
pub enum Forked {
    Parent,
    Child,
}

impl State {
    /// Forks for a debugging session. Err with the reason when the fork
    /// failed.
    pub fn fork_debug_session(&mut self) -> Result<Forked, std::io::Error> {
        super::persistence::before_fork();
        let started = std::time::Instant::now();
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the child runs the script on this thread's copy of the
        // engine after `detach_in_child`, and leaves with `_exit`, never
        // returning into the runtime.
        let pid = unsafe { libc::fork() };
        match pid {
            0 => {
                // A panic's report would take locks another thread may
                // have held at the fork.
                std::panic::set_hook(Box::new(|_| {}));
                // Whatever happens here, the child never returns into the
                // server's loop as a second server.
                let detached = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.detach_in_child(parent)));
                if detached.is_err() {
                    // SAFETY: ends the child without the parent's destructors.
                    unsafe { libc::_exit(1) };
                }
                Ok(Forked::Child)
            }
            pid if pid < 0 => Err(std::io::Error::last_os_error()),
            pid => {
                self.persistence.forks += 1;
                self.persistence.latest_fork_usec = started.elapsed().as_micros() as u64;
                self.debug_sessions.children.push(pid);
                Ok(Forked::Parent)
            }
        }
    }

    /// The child lets go of what other threads serve (see the module doc),
    /// and of the signals the parent handles: a SIGTERM meant for the
    /// server must not reach its handler here, which would tell the
    /// parent's runtime.
    fn detach_in_child(&mut self, parent: libc::pid_t) {
        // SAFETY: setting this process's signal dispositions and parent
        // death signal; getppid has no preconditions.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                // The server ended before the signal was armed.
                libc::_exit(1);
            }
        }
        crate::log::silence();
        std::mem::forget(std::mem::replace(&mut self.effects, super::effects::Effects::new(&[])));
        std::mem::forget(self.aof.take());
        self.aof_tap = None;
        #[cfg(feature = "raft")]
        std::mem::forget(self.raft.take());
        // The parent's children are not this process's to stop or wait for.
        self.persistence.child = None;
        std::mem::forget(self.aof_rewrites.running.take());
        self.params.set_default("save", "");
        self.debug_sessions.children.clear();
    }

    /// Reaps the sessions that ended (from the cron).
    pub fn reap_debug_sessions(&mut self) {
        self.debug_sessions.children.retain(|&pid| {
            let mut status = 0;
            // SAFETY: waits without blocking for this process's own child.
            let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            done == 0
        });
    }

    /// Kills the sessions still running (shutdown).
    pub fn kill_debug_sessions(&mut self) {
        for pid in self.debug_sessions.children.drain(..) {
            crate::log::warning(format_args!("Killing debugging session {pid}"));
            // SAFETY: signals and reaps this process's own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
            }
        }
    }
}
