//! Injected faults: the rules `KEYLOCK FAULT ADD` sets up so that a test
//! can make a command fail, a connection drop or a pub/sub message vanish
//! on purpose (see `commands::keylock`).
//!
//! Kinds: DROP-PUBLISH (messages to matching channels reach nobody),
//! ERROR (a command refused with a given error), DISCONNECT BEFORE|AFTER
//! (the connection closed before the command runs, or after it ran with
//! its reply unsent: the lost acknowledgement) and DELAY (the reply held
//! back; the command itself runs at once, and other clients are not
//! delayed), and SLOW-FSYNC (every sync of the append-only file takes
//! longer, as on a slow disk: replies that wait for it with `appendfsync
//! always` wait longer too).
//!
//! A rule matches commands as clients send them: the command's full name
//! (`get`, `client|setname`), or, for EVAL and EVALSHA of a script keylock
//! recognizes, `script:<name>` as well (`script:lock-renew-batch@4.7.0`),
//! glob patterns matched without regard to case. Commands a script runs
//! are not matched (their script is). A rule may be limited to clients
//! whose CLIENT SETNAME name matches a glob, and to a number of firings,
//! after which it is removed. Checking costs nothing while no rule is set.

use bytes::Bytes;

use crate::glob;
use crate::reply::Reply;

/// What a rule does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Messages published to matching channels reach no subscriber; the
    /// publisher is told the receiver count it would have been.
    DropPublish { channel: Bytes },
    /// Matching commands are refused with this error, without running.
    Error { command: Bytes, text: Bytes },
    /// The client's connection is closed before the command runs, or after
    /// it ran and before its reply is sent.
    Disconnect { command: Bytes, after: bool },
    /// The command runs at once; its reply (and what follows it on that
    /// connection) is held back this many milliseconds.
    Delay { command: Bytes, ms: u64 },
    /// Every sync of the append-only file takes this many milliseconds
    /// longer.
    SlowFsync { ms: u64 },
}

/// One rule, as FAULT LIST shows it.
#[derive(Clone, Debug)]
pub struct Rule {
    pub id: u64,
    pub kind: Kind,
    /// Firings left before the rule is removed (None: no limit).
    pub remaining: Option<u64>,
    /// Only commands of clients whose name matches.
    pub client: Option<Bytes>,
    pub fired: u64,
}

/// What a matching rule does to a client's command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandFault {
    Error(Bytes),
    DisconnectBefore,
    DisconnectAfter,
    Delay(u64),
}

#[derive(Debug, Default)]
pub struct Faults {
    rules: Vec<Rule>,
    next_id: u64,
    /// Where SLOW-FSYNC rules take effect (the syncing thread reads it).
    durability: std::sync::Arc<super::durable::Durability>,
}

impl Faults {
    pub fn new(durability: std::sync::Arc<super::durable::Durability>) -> Faults {
        Faults {
            durability,
            ..Faults::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The syncing thread follows the SLOW-FSYNC rules in force.
    fn rules_changed(&self) {
        let ms = self
            .rules
            .iter()
            .filter_map(|r| match r.kind {
                Kind::SlowFsync { ms } => Some(ms),
                _ => None,
            })
            .max();
        self.durability.set_slow_sync(ms);
    }

    /// Adds a rule; returns its id (ids start at 1 and are never reused).
    pub fn add(&mut self, kind: Kind, remaining: Option<u64>, client: Option<Bytes>) -> u64 {
        self.next_id += 1;
        self.rules.push(Rule {
            id: self.next_id,
            kind,
            remaining,
            client,
            fired: 0,
        });
        self.rules_changed();
        self.next_id
    }

    /// Removes a rule; false if there was none with that id.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.rules.len();
        self.rules.retain(|r| r.id != id);
        self.rules_changed();
        self.rules.len() != before
    }

    /// Removes every rule; returns how many there were.
    pub fn clear(&mut self) -> usize {
        let n = std::mem::take(&mut self.rules).len();
        self.rules_changed();
        n
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The fault for a client's command, if a rule matches: `names` are the
    /// names the command goes by (its full name, and `script:<name>` for a
    /// recognized script). The first matching rule in the order they were
    /// added fires.
    pub fn for_command(&mut self, client_name: Option<&[u8]>, names: &[&[u8]]) -> Option<CommandFault> {
        let i = self.rules.iter().position(|r| {
            let pattern = match &r.kind {
                Kind::Error { command, .. } | Kind::Disconnect { command, .. } | Kind::Delay { command, .. } => command,
                Kind::DropPublish { .. } | Kind::SlowFsync { .. } => return false,
            };
            r.applies_to(client_name) && names.iter().any(|n| glob::matches(pattern, n, true))
        })?;
        let fault = match &self.rules[i].kind {
            Kind::Error { text, .. } => CommandFault::Error(text.clone()),
            Kind::Disconnect { after: false, .. } => CommandFault::DisconnectBefore,
            Kind::Disconnect { after: true, .. } => CommandFault::DisconnectAfter,
            Kind::Delay { ms, .. } => CommandFault::Delay(*ms),
            Kind::DropPublish { .. } | Kind::SlowFsync { .. } => unreachable!("not matched above"),
        };
        self.fire(i);
        Some(fault)
    }

    /// Whether a message published to `channel` by the client named
    /// `client_name` is to be dropped.
    pub fn drops_publish(&mut self, client_name: Option<&[u8]>, channel: &[u8]) -> bool {
        let found = self.rules.iter().position(|r| match &r.kind {
            Kind::DropPublish { channel: pattern } => r.applies_to(client_name) && glob::matches(pattern, channel, false),
            _ => false,
        });
        match found {
            Some(i) => {
                self.fire(i);
                true
            }
            None => false,
        }
    }

    fn fire(&mut self, i: usize) {
        let rule = &mut self.rules[i];
        rule.fired += 1;
        if let Some(left) = rule.remaining.as_mut() {
            *left -= 1;
            if *left == 0 {
                self.rules.remove(i);
            }
        }
    }

    /// FAULT LIST: one map per rule, oldest first.
    pub fn list(&self) -> Reply {
        let text = |s: &'static str| Reply::bulk_static(s);
        Reply::Array(
            self.rules
                .iter()
                .map(|r| {
                    let mut fields = vec![(text("id"), Reply::Int(r.id as i64))];
                    match &r.kind {
                        Kind::DropPublish { channel } => {
                            fields.push((text("kind"), text("drop-publish")));
                            fields.push((text("channel"), Reply::Bulk(channel.clone())));
                        }
                        Kind::Error { command, text: error } => {
                            fields.push((text("kind"), text("error")));
                            fields.push((text("command"), Reply::Bulk(command.clone())));
                            fields.push((text("error"), Reply::Bulk(error.clone())));
                        }
                        Kind::Disconnect { command, after } => {
                            fields.push((text("kind"), text("disconnect")));
                            fields.push((text("command"), Reply::Bulk(command.clone())));
                            fields.push((text("when"), text(if *after { "after" } else { "before" })));
                        }
                        Kind::Delay { command, ms } => {
                            fields.push((text("kind"), text("delay")));
                            fields.push((text("command"), Reply::Bulk(command.clone())));
                            fields.push((text("ms"), Reply::Int(*ms as i64)));
                        }
                        Kind::SlowFsync { ms } => {
                            fields.push((text("kind"), text("slow-fsync")));
                            fields.push((text("ms"), Reply::Int(*ms as i64)));
                        }
                    }
                    let fired = match r.kind {
                        // The syncing thread counts the syncs it slowed.
                        Kind::SlowFsync { .. } => self.durability.slowed_syncs(),
                        _ => r.fired,
                    };
                    fields.push((text("client"), r.client.clone().map_or(Reply::Nil, Reply::Bulk)));
                    fields.push((text("remaining"), r.remaining.map_or(Reply::Nil, |n| Reply::Int(n as i64))));
                    fields.push((text("fired"), Reply::Int(fired as i64)));
                    Reply::Map(fields)
                })
                .collect(),
        )
    }
}

impl Rule {
    fn applies_to(&self, client_name: Option<&[u8]>) -> bool {
        match &self.client {
            None => true,
            Some(pattern) => glob::matches(pattern, client_name.unwrap_or(b""), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(command: &'static str) -> Kind {
        Kind::Error {
            command: Bytes::from_static(command.as_bytes()),
            text: Bytes::from_static(b"LOADING later"),
        }
    }

    #[test]
    fn a_counted_rule_fires_that_many_times_then_goes() {
        let mut f = Faults::default();
        let id = f.add(error("get"), Some(2), None);
        assert_eq!(id, 1);
        let get: &[&[u8]] = &[b"get"];
        assert_eq!(
            f.for_command(None, get),
            Some(CommandFault::Error(Bytes::from_static(b"LOADING later")))
        );
        assert_eq!(f.rules()[0].fired, 1);
        assert!(f.for_command(None, get).is_some());
        assert!(f.is_empty());
        assert_eq!(f.for_command(None, get), None);
    }

    #[test]
    fn rules_match_command_names_without_case_and_client_names_by_glob() {
        let mut f = Faults::default();
        f.add(error("script:lock-renew*"), None, Some(Bytes::from_static(b"app-*")));
        let names: &[&[u8]] = &[b"evalsha", b"script:lock-renew-batch@4.7.0"];
        assert_eq!(f.for_command(None, names), None);
        assert_eq!(f.for_command(Some(b"other"), names), None);
        assert!(f.for_command(Some(b"app-1"), names).is_some());
        f.add(error("CLIENT|*"), None, None);
        assert!(f.for_command(None, &[b"client|setname"]).is_some());
    }

    #[test]
    fn drop_publish_matches_channels_and_ids_are_not_reused() {
        let mut f = Faults::default();
        let a = f.add(
            Kind::DropPublish {
                channel: Bytes::from_static(b"redisson_lock__channel:*"),
            },
            None,
            None,
        );
        assert!(f.drops_publish(None, b"redisson_lock__channel:{x}"));
        assert!(!f.drops_publish(None, b"other"));
        assert!(f.remove(a));
        assert!(!f.remove(a));
        assert_eq!(f.add(error("x"), None, None), a + 1);
        assert_eq!(f.clear(), 1);
    }
}
