//! Start-up configuration: redis-server's command line and config file
//! syntax turned into a [`Config`].
//!
//! Like redis-server, keylock takes an optional config file path followed by
//! `--name value…` flags, where every flag is a config directive; file lines
//! are `name value…` with redis.conf quoting. The few settings the network
//! side needs are typed fields here; every directive is also kept in
//! `directives` so the engine's parameter table (CONFIG GET/SET) starts from
//! the same values. Hand-parsed rather than through an argument-parsing
//! crate because the grammar is "any config directive", validated by that
//! table, exactly as redis-server does it.

use std::time::Duration;

use crate::clock::Clock;
use crate::request::split_args;

#[derive(Clone, Debug)]
pub struct Config {
    pub bind: Vec<String>,
    /// 0 binds a free port, or, with a `unixsocket`, no TCP port at all.
    pub port: u16,
    /// Also (or, with port 0, only) serve on a Unix domain socket at this path.
    pub unixsocket: Option<String>,
    /// The socket file's mode (`unixsocketperm`, octal); 0 leaves it as created.
    pub unixsocketperm: u32,
    pub requirepass: Option<String>,
    pub databases: usize,
    pub proto_max_bulk_len: i64,
    /// Server cron frequency (active expiry runs `hz` times a second).
    pub hz: u32,
    pub maxclients: usize,
    /// Print `listening on ADDR` on stdout once bound (the binary with
    /// --port 0 and no Unix socket).
    pub announce: bool,
    pub clock: Clock,
    /// Every directive as given, in order, for the parameter table.
    pub directives: Vec<(String, Vec<String>)>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            unixsocket: None,
            unixsocketperm: 0,
            requirepass: None,
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            hz: 10,
            maxclients: 10000,
            announce: false,
            clock: Clock::real(),
            directives: Vec::new(),
        }
    }
}

impl Config {
    /// The in-process test double's defaults: a free port on loopback.
    pub fn ephemeral() -> Config {
        Config {
            port: 0,
            ..Config::default()
        }
    }

    /// Parses redis-server style arguments (without the program name).
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut config = Config::default();
        let mut rest = args;
        if let Some(first) = rest.first()
            && !first.starts_with("--")
        {
            let text = std::fs::read_to_string(first).map_err(|e| format!("Fatal error, can't open config file '{first}': {e}"))?;
            config.apply_file(&text)?;
            rest = &rest[1..];
        }
        let mut i = 0;
        while i < rest.len() {
            let name = rest[i]
                .strip_prefix("--")
                .ok_or_else(|| format!("Invalid argument '{}': directives start with --", rest[i]))?;
            let mut values = Vec::new();
            i += 1;
            while i < rest.len() && !rest[i].starts_with("--") {
                values.push(rest[i].clone());
                i += 1;
            }
            config.apply(name, values)?;
        }
        Ok(config)
    }

    /// Applies redis.conf-style text.
    pub fn apply_file(&mut self, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = split_args(line.as_bytes()).ok_or_else(|| format!("line {}: unbalanced quotes", n + 1))?;
            let mut words = words.into_iter().map(|w| String::from_utf8_lossy(&w).into_owned());
            let Some(name) = words.next() else { continue };
            self.apply(&name, words.collect()).map_err(|e| format!("line {}: {e}", n + 1))?;
        }
        Ok(())
    }

    /// Applies one directive; unknown names are checked by the parameter table later.
    pub fn apply(&mut self, name: &str, values: Vec<String>) -> Result<(), String> {
        let name = name.to_ascii_lowercase();
        let one = || -> Result<&String, String> {
            match values.as_slice() {
                [v] => Ok(v),
                _ => Err(format!("wrong number of arguments for '{name}'")),
            }
        };
        match name.as_str() {
            "port" => self.port = one()?.parse().map_err(|_| "Invalid port".to_string())?,
            "bind" => self.bind = values.clone(),
            "requirepass" => {
                let v = one()?;
                self.requirepass = if v.is_empty() { None } else { Some(v.clone()) };
            }
            "databases" => {
                self.databases = one()?
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n >= 1)
                    .ok_or("Invalid number of databases")?
            }
            "proto-max-bulk-len" => {
                self.proto_max_bulk_len = crate::config_params::memtoull(one()?)
                    .and_then(|n| i64::try_from(n).ok())
                    .filter(|&n| n >= 1024 * 1024)
                    .ok_or("Invalid proto-max-bulk-len")?
            }
            "hz" => self.hz = one()?.parse::<u32>().map_err(|_| "Invalid hz")?.clamp(1, 500),
            "maxclients" => self.maxclients = one()?.parse().map_err(|_| "Invalid max clients limit")?,
            "unixsocket" => self.unixsocket = Some(one()?.clone()).filter(|p| !p.is_empty()),
            "unixsocketperm" => {
                self.unixsocketperm = u32::from_str_radix(one()?, 8)
                    .ok()
                    .filter(|&p| p <= 0o777)
                    .ok_or("Invalid socket file permissions")?
            }
            _ => {}
        }
        self.directives.push((name, values));
        Ok(())
    }

    /// Whether the server listens on TCP: always, except for port 0 with a
    /// Unix socket (Redis's `--port 0 --unixsocket PATH`: the socket only).
    pub fn serves_tcp(&self) -> bool {
        self.port != 0 || self.unixsocket.is_none()
    }

    /// Checks every directive against the parameter table, as redis-server
    /// does before it starts: an unknown name or a bad value is an error.
    pub fn validate(&self) -> Result<(), String> {
        let mut params = crate::config_params::ConfigParams::new();
        for (name, values) in &self.directives {
            params
                .apply_directive(name, values)
                .map_err(|e| format!("bad directive '{name} {}': {e}", values.join(" ")))?;
        }
        Ok(())
    }

    pub fn cron_interval(&self) -> Duration {
        Duration::from_millis(1000 / self.hz.max(1) as u64)
    }
}
