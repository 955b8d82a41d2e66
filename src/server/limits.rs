//! How much one connection may make the server hold, so that it cannot
//! harm the others: Redis's limits, which close the connection, and
//! keylock's own bound on unread replies where Redis sets none.
//!
//! Redis 7.0.15 (`networking.c`) closes a client
//! - whose unparsed input (its query buffer) passes
//!   `client-query-buffer-limit` after a read;
//! - that has not authenticated, as soon as a reply no longer fits in its
//!   reply buffer (`used_mem > 1024 && authRequired(c)` in
//!   `checkClientOutputBufferLimits`, as Debian's 7.0.15 has it: the first
//!   reply block past the buffer is already over 1024 bytes). That buffer
//!   is the client's own (`engine::output::ReplyBuffer`): 16 KB when the
//!   client connects, 1 KB once the cron has shrunk it;
//! - whose unwritten replies beyond its reply buffer reach the `hard`
//!   limit of its class in `client-output-buffer-limit`, or stay at `soft`
//!   or above for more than `soft seconds`.
//!
//! A closed client's unsent replies are dropped, and Redis logs why (as
//! keylock does, at warn level). No INFO counter counts these closes in
//! 7.0.15.
//!
//! The output limits themselves, every class, are checked by the engine
//! (`engine::output`) as replies and pushes are queued and from its cron;
//! the busy responder checks its own replies here with the same rules.
//!
//! Where keylock differs: Redis sets no `normal` limit by default and lets unread
//! replies grow without bound; keylock instead stops reading a connection
//! once [`PIPELINE_HOLD`] bytes of its replies wait unread
//! ([`NetLimits::hold_at`]), unless a limit that closes it applies to its
//! class: then, as with Redis, it keeps reading and the limit decides.
//! Below that bound a client that pipelines without reading is served as
//! Redis serves it (Redis's own suite sends a million commands before it
//! reads a reply). Pushes (pub/sub messages, MONITOR lines) cannot
//! be held back that way: for a `normal` client with no limit, such as a
//! MONITOR client, they grow without bound as in Redis.

use crate::engine::{ClientClass, OutputLimits, REPLY_BUFFER};

/// A connection with this many bytes of replies unread is not read again
/// until they drain (when no configured limit would close it first).
pub const PIPELINE_HOLD: usize = 32 << 20;

/// While a script is busy, a connection with this many bytes of replies
/// unread is not read again until they drain (when no configured limit
/// would close it first).
pub const BUSY_HOLD: usize = 64 * 1024;

/// The limits in force, copied from the engine's settings after every
/// batch so the busy responder can read them while the engine is lent out.
#[derive(Clone, Copy, Debug)]
pub struct NetLimits {
    /// `requirepass` is set: a batch ends after each command that can
    /// change a client's authentication (see `conn::process_input`).
    pub auth_required: bool,
    pub proto_max_bulk_len: i64,
    pub query_buffer_limit: usize,
    pub output: OutputLimits,
    /// `maxmemory-clients` is set: each read is accounted (see
    /// `engine::client_evict`).
    pub evicts_clients: bool,
}

impl NetLimits {
    /// The unwritten output at which a connection is no longer read until
    /// it drains: at [`PIPELINE_HOLD`] in the normal path, at
    /// [`BUSY_HOLD`] while a script is busy; never while a limit that closes the connection
    /// applies, client eviction included (it is read on and the limit
    /// decides, as with Redis); with only a soft limit, where that limit
    /// is reached so that it can fire.
    pub fn hold_at(&self, class: ClientClass, authenticated: bool, busy: bool) -> usize {
        let limit = self.output.of(class);
        if !authenticated || limit.hard > 0 || self.evicts_clients {
            return usize::MAX;
        }
        let base = if busy { BUSY_HOLD } else { PIPELINE_HOLD };
        if limit.soft > 0 {
            base.max(REPLY_BUFFER + limit.soft)
        } else {
            base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(param: &str) -> NetLimits {
        NetLimits {
            auth_required: false,
            proto_max_bulk_len: 512 << 20,
            query_buffer_limit: 1 << 30,
            output: OutputLimits::parse(param),
            evicts_clients: false,
        }
    }

    #[test]
    fn connections_are_held_back_unless_a_closing_limit_applies_to_their_class() {
        let none = limits("normal 0 0 0 slave 0 0 0 pubsub 1000 0 0");
        assert_eq!(none.hold_at(ClientClass::Normal, true, false), PIPELINE_HOLD);
        assert_eq!(none.hold_at(ClientClass::Normal, true, true), BUSY_HOLD);
        assert_eq!(none.hold_at(ClientClass::Normal, false, true), usize::MAX);
        assert_eq!(none.hold_at(ClientClass::Pubsub, true, false), usize::MAX);
        let hard = limits("normal 1048576 0 0 slave 0 0 0 pubsub 0 0 0");
        assert_eq!(hard.hold_at(ClientClass::Normal, true, false), usize::MAX);
        assert_eq!(hard.hold_at(ClientClass::Pubsub, true, false), PIPELINE_HOLD);
        let soft = limits("normal 0 1048576 5 slave 0 0 0 pubsub 0 0 0");
        assert_eq!(soft.hold_at(ClientClass::Normal, true, false), PIPELINE_HOLD);
        let soft = limits("normal 0 67108864 5 slave 0 0 0 pubsub 0 0 0");
        assert_eq!(soft.hold_at(ClientClass::Normal, true, false), 16384 + (64 << 20));
    }
}
