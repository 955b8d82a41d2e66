//! How much one connection may make the server hold, so that it cannot
//! harm the others: Redis's limits, which close the connection, and
//! keylock's own bound on unread replies where Redis sets none.
//!
//! Redis 7.0.15 (`networking.c`) closes a client
//! - whose unparsed input (its query buffer) passes
//!   `client-query-buffer-limit` after a read;
//! - that has not authenticated, as soon as a reply no longer fits in its
//!   reply buffer (`used_mem > 1024 && authRequired(c)` in
//!   `checkClientOutputBufferLimits`: the first reply block past the
//!   buffer is already over 1024 bytes). That buffer is 16 KB when the
//!   client connects and shrinks to 1 KB at the first cron pass that finds
//!   it less than half used, so an unauthenticated client may leave at most
//!   16 KB of replies unread until the cron has seen it, and 1 KB after;
//! - whose unwritten replies beyond its reply buffer reach the `hard`
//!   limit of its class in `client-output-buffer-limit`, or stay at `soft`
//!   or above for more than `soft seconds`.
//!
//! A closed client's unsent replies are dropped, and Redis logs why (as
//! keylock does, at warn level). No INFO counter counts these closes in
//! 7.0.15.
//!
//! Where keylock differs: an authenticated client's reply buffer is taken
//! to be 16 KB (Redis resizes it between 1 KB and 16 KB with the client's
//! recent peak), and pub/sub clients are held to the `normal` class here
//! (the engine applies the pub/sub limit to published messages). Redis
//! sets no `normal` limit by default and lets unread replies grow without
//! bound; keylock instead stops reading a connection whose replies wait
//! unread ([`NetLimits::hold_at`]), unless a limit that closes it applies:
//! then, as with Redis, it keeps reading and the limit decides. The soft
//! limit is also checked by the cron, as Redis's `clientsCron` does, so
//! that it fires on a connection that is held back.

use std::cell::Cell;
use std::time::Instant;

use crate::engine::{OutputCaps, OutputLimit};

/// The reply buffer of a new client (PROTO_REPLY_CHUNK_BYTES).
pub const REPLY_BUFFER: usize = 16 * 1024;
/// The reply buffer once the cron has shrunk it (PROTO_REPLY_MIN_BYTES).
pub const REPLY_BUFFER_SHRUNK: usize = 1024;
/// While a script is busy, a connection with this many bytes of replies
/// unread is not read again until they drain (when no configured limit
/// would close it first).
pub const BUSY_HOLD: usize = 64 * 1024;

/// The limits in force, copied from the engine's settings after every
/// batch so the busy responder can read them while the engine is lent out.
#[derive(Clone, Copy, Debug)]
pub struct NetLimits {
    pub proto_max_bulk_len: i64,
    pub query_buffer_limit: usize,
    pub normal: OutputLimit,
}

impl NetLimits {
    /// Pending output above which a connection is closed at once.
    /// `cron_has_seen` says whether a cron pass has run since the
    /// connection was accepted (an unauthenticated client's buffer shrank).
    pub fn caps(&self, cron_has_seen: bool) -> OutputCaps {
        let unauthenticated = if cron_has_seen { REPLY_BUFFER_SHRUNK } else { REPLY_BUFFER };
        let authenticated = match self.normal.hard {
            0 => usize::MAX,
            hard => REPLY_BUFFER + hard - 1,
        };
        OutputCaps {
            unauthenticated,
            authenticated: authenticated.max(unauthenticated),
        }
    }

    /// The unwritten output at which a connection is no longer read until
    /// it drains: at once in the normal path, at [`BUSY_HOLD`] while a
    /// script is busy; never while a limit that closes the connection
    /// applies (it is read on and the limit decides, as with Redis); with
    /// only a soft limit, where that limit is reached so that it can fire.
    pub fn hold_at(&self, authenticated: bool, busy: bool) -> usize {
        if !authenticated || self.normal.hard > 0 {
            return usize::MAX;
        }
        let base = if busy { BUSY_HOLD } else { 1 };
        if self.normal.soft > 0 {
            base.max(REPLY_BUFFER + self.normal.soft)
        } else {
            base
        }
    }

    /// Checks the soft limit for `pending` unwritten bytes, keeping track
    /// in `since` of when it was first reached; true once it has been
    /// reached for longer than its seconds.
    pub fn over_soft_limit(&self, authenticated: bool, pending: usize, since: &Cell<Option<Instant>>) -> bool {
        let soft = self.normal.soft;
        if !authenticated || soft == 0 || pending.saturating_sub(REPLY_BUFFER) < soft {
            since.set(None);
            return false;
        }
        match since.get() {
            None => {
                since.set(Some(Instant::now()));
                false
            }
            Some(t) => t.elapsed().as_secs() > self.normal.soft_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(hard: usize, soft: usize) -> NetLimits {
        NetLimits {
            proto_max_bulk_len: 512 << 20,
            query_buffer_limit: 1 << 30,
            normal: OutputLimit {
                hard,
                soft,
                soft_seconds: 0,
            },
        }
    }

    #[test]
    fn unauthenticated_clients_may_leave_16k_unread_then_1k_after_the_cron() {
        assert_eq!(limits(0, 0).caps(false).unauthenticated, 16384);
        assert_eq!(limits(0, 0).caps(true).unauthenticated, 1024);
        assert_eq!(limits(0, 0).caps(true).authenticated, usize::MAX);
    }

    #[test]
    fn a_hard_limit_counts_beyond_the_reply_buffer() {
        let caps = limits(1 << 20, 0).caps(true);
        assert_eq!(caps.authenticated, 16384 + (1 << 20) - 1);
    }

    #[test]
    fn connections_are_held_back_unless_a_closing_limit_applies() {
        assert_eq!(limits(0, 0).hold_at(true, false), 1);
        assert_eq!(limits(0, 0).hold_at(true, true), BUSY_HOLD);
        assert_eq!(limits(0, 0).hold_at(false, true), usize::MAX);
        assert_eq!(limits(1 << 20, 0).hold_at(true, false), usize::MAX);
        assert_eq!(limits(0, 1 << 20).hold_at(true, false), 16384 + (1 << 20));
    }

    #[test]
    fn the_soft_limit_fires_once_reached_for_longer_than_its_seconds() {
        let since = Cell::new(None);
        let l = limits(0, 1000);
        assert!(!l.over_soft_limit(true, 16384 + 999, &since));
        assert!(since.get().is_none());
        assert!(!l.over_soft_limit(true, 16384 + 1000, &since));
        assert!(since.get().is_some());
        since.set(Some(Instant::now() - std::time::Duration::from_secs(2)));
        assert!(l.over_soft_limit(true, 16384 + 1000, &since));
        assert!(!l.over_soft_limit(true, 10, &since));
        assert!(since.get().is_none());
    }
}
