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
//! runs as if the member were standalone.

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
        // SAFETY: the child runs the script on this thread's copy of the
        // engine after `detach_in_child`, and leaves with `_exit`, never
        // returning into the runtime.
        let pid = unsafe { libc::fork() };
        match pid {
            0 => {
                self.detach_in_child();
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
    fn detach_in_child(&mut self) {
        // SAFETY: setting dispositions of this process's signals.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
            libc::signal(libc::SIGINT, libc::SIG_IGN);
        }
        std::mem::forget(std::mem::replace(&mut self.effects, super::effects::Effects::new(&[])));
        std::mem::forget(self.aof.take());
        self.aof_tap = None;
        #[cfg(feature = "raft")]
        std::mem::forget(self.raft.take());
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
