//! How much one connection may make the server hold, so that it cannot
//! harm the others: Redis's limits, which close the connection, and
//! keylock's own bound on unread replies where Redis sets none.
//!
//! Redis 7.0.15 (`networking.c`) closes a client whose unparsed input (its
//! query buffer) passes `client-query-buffer-limit` after a read, and logs
//! it (as keylock does, at warn level); no INFO counter counts these
//! closes in 7.0.15.
//!
//! Redis sets no limit on a normal client's unread replies by default and
//! lets them grow without bound; keylock instead stops reading a
//! connection whose replies wait unread ([`NetLimits::hold_at`]).

/// While a script is busy, a connection with this many bytes of replies
/// unread is not read again until they drain.
pub const BUSY_HOLD: usize = 64 * 1024;

/// The limits in force, copied from the engine's settings after every
/// batch so the busy responder can read them while the engine is lent out.
#[derive(Clone, Copy, Debug)]
pub struct NetLimits {
    pub proto_max_bulk_len: i64,
    pub query_buffer_limit: usize,
}

impl NetLimits {
    /// The unwritten output at which a connection is no longer read until
    /// it drains: at once in the normal path, at [`BUSY_HOLD`] while a
    /// script is busy.
    pub fn hold_at(&self, busy: bool) -> usize {
        if busy { BUSY_HOLD } else { 1 }
    }
}
