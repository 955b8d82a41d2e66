//! Who is subscribed to what: channels, patterns and shard channels to
//! client ids, in subscription order (Redis delivers in that order).
//!
//! Delivery itself happens in the engine (`State::publish`), which owns the
//! clients' outboxes; this module is only the index.

use std::collections::HashMap;

use bytes::Bytes;

use crate::db::ClientId;
use crate::db::value::Hasher;
use crate::glob;

#[derive(Default)]
pub struct PubSub {
    channels: HashMap<Bytes, Vec<ClientId>, Hasher>,
    shard_channels: HashMap<Bytes, Vec<ClientId>, Hasher>,
    /// Patterns in the order they were first subscribed.
    patterns: Vec<(Bytes, Vec<ClientId>)>,
}

/// Which namespace a subscription lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Shard,
}

impl PubSub {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Bytes, Vec<ClientId>, Hasher> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    pub fn subscribe(&mut self, kind: Kind, channel: Bytes, client: ClientId) {
        let subs = self.map(kind).entry(channel).or_default();
        if !subs.contains(&client) {
            subs.push(client);
        }
    }

    pub fn unsubscribe(&mut self, kind: Kind, channel: &[u8], client: ClientId) {
        let map = self.map(kind);
        if let Some(subs) = map.get_mut(channel) {
            subs.retain(|&c| c != client);
            if subs.is_empty() {
                map.remove(channel);
            }
        }
    }

    pub fn psubscribe(&mut self, pattern: Bytes, client: ClientId) {
        match self.patterns.iter_mut().find(|(p, _)| *p == pattern) {
            Some((_, subs)) => {
                if !subs.contains(&client) {
                    subs.push(client);
                }
            }
            None => self.patterns.push((pattern, vec![client])),
        }
    }

    pub fn punsubscribe(&mut self, pattern: &[u8], client: ClientId) {
        if let Some(i) = self.patterns.iter().position(|(p, _)| p == pattern) {
            self.patterns[i].1.retain(|&c| c != client);
            if self.patterns[i].1.is_empty() {
                self.patterns.remove(i);
            }
        }
    }

    /// Subscribers of a channel, in subscription order.
    pub fn subscribers(&self, kind: Kind, channel: &[u8]) -> &[ClientId] {
        let map = match kind {
            Kind::Channel => &self.channels,
            Kind::Shard => &self.shard_channels,
        };
        map.get(channel).map(Vec::as_slice).unwrap_or(&[])
    }

    /// (pattern, subscriber) pairs whose pattern matches `channel`.
    pub fn pattern_matches<'a>(&'a self, channel: &'a [u8]) -> impl Iterator<Item = (&'a Bytes, ClientId)> + 'a {
        self.patterns
            .iter()
            .filter(move |(p, _)| glob::matches(p, channel, false))
            .flat_map(|(p, subs)| subs.iter().map(move |&c| (p, c)))
    }

    /// Active channels (with at least one subscriber) matching an optional pattern.
    pub fn channel_names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let map = match kind {
            Kind::Channel => &self.channels,
            Kind::Shard => &self.shard_channels,
        };
        map.keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches(p, c, false)))
            .cloned()
            .collect()
    }

    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    pub fn shard_channel_count(&self) -> usize {
        self.shard_channels.len()
    }
}
