//! Start-up configuration: redis-server's command line and config file
//! syntax turned into a [`Config`].
//!
//! Like redis-server, keylock takes an optional config file path followed by
//! `--name value…` flags, where every flag is a config directive; file lines
//! are `name value…` with redis.conf quoting. The command line is read as
//! Redis 7.0.15 reads it (`main` and `loadServerConfig` in server.c and
//! config.c): the flags become lines appended to the file's text (after a
//! newline, so the first flag is line 2 without a file), a lone `-` reads
//! the config from stdin, and each line is checked against the parameter
//! table as it is read. A bad line stops there with Redis's
//! `*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***` report naming the line
//! (see [`ConfigError`]), which the binary prints on stderr before exiting
//! with status 1, as redis-server does.
//!
//! What the process needs before the engine exists (addresses, sockets,
//! the log, daemonizing) are typed fields here. Every directive is kept in
//! `directives`, from which the engine's parameter table
//! (`config_params::ConfigParams`) is built: that table is the one place
//! every other setting lives, read by CONFIG GET and changed by CONFIG SET
//! (the engine's `RuntimeSettings` is its typed view, rebuilt from it). Hand-parsed rather than
//! through an argument-parsing crate because the grammar is "any config
//! directive", validated by that table, exactly as redis-server does it.

use std::fmt;

use crate::clock::Clock;
use crate::log::Level;
use crate::request::split_args;

#[derive(Clone, Debug)]
pub struct Config {
    pub bind: Vec<String>,
    /// 0 binds a free port, or, with a `unixsocket`, no TCP port at all.
    pub port: u16,
    /// Also serve TLS on this port (0: no TLS listener); with port 0, only
    /// TLS, as redis-server's `--port 0 --tls-port N`.
    pub tls_port: u16,
    /// Also (or, with port 0, only) serve on a Unix domain socket at this path.
    pub unixsocket: Option<String>,
    /// The socket file's mode (`unixsocketperm`, octal); 0 leaves it as created.
    pub unixsocketperm: u32,
    /// The listen(2) backlog of the TCP sockets (`tcp-backlog`, Redis's 511):
    /// connections the kernel holds for the server while it accepts.
    pub tcp_backlog: i32,
    /// Written with the server's pid once it listens, removed at shutdown.
    pub pidfile: Option<String>,
    /// Detach from the terminal (the binary forks before anything starts).
    pub daemonize: bool,
    /// `supervised`: `no`, `upstart`, `systemd` or `auto`.
    pub supervised: String,
    /// Redis's log goes here rather than stdout.
    pub logfile: Option<String>,
    /// `dir`: the binary changes to it, as redis-server does, so relative
    /// paths (`unixsocket`, `pidfile`, `logfile`) are relative to it.
    pub dir: Option<String>,
    pub loglevel: Level,
    /// Print `listening on ADDR` on stdout once bound (the binary with
    /// --port 0 and no Unix socket).
    pub announce: bool,
    pub clock: Clock,
    /// Load the snapshot at `dir`/`dbfilename` at start, if there is one
    /// (redis-server does; the in-process test double starts empty).
    pub load_at_start: bool,
    /// Without a `dir` directive, keep snapshots in a directory of the
    /// server's own, made at start and removed when it stops (the
    /// in-process test double: nothing lands in the process's working
    /// directory).
    pub private_dir: bool,
    /// Consumers of the effect stream (every write as it must be
    /// replayed; see `engine::effects`), for embedders.
    pub effects: Vec<crate::engine::effects::EffectsTap>,
    /// `user` lines (name, then rules), in order, for the ACL.
    pub users: Vec<Vec<String>>,
    /// `rename-command old new` lines, in order (`new` empty: the command
    /// is removed).
    pub renamed_commands: Vec<(String, String)>,
    /// Every directive as given, in order, for the parameter table.
    pub directives: Vec<(String, Vec<String>)>,
    /// The config file given on the command line, as an absolute path
    /// (INFO's `config_file`, and what CONFIG REWRITE rewrites).
    pub config_file: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bind: vec!["127.0.0.1".into()],
            port: 6379,
            tls_port: 0,
            unixsocket: None,
            unixsocketperm: 0,
            tcp_backlog: 511,
            pidfile: None,
            daemonize: false,
            supervised: "no".into(),
            logfile: None,
            dir: None,
            loglevel: Level::Notice,
            announce: false,
            clock: Clock::real(),
            load_at_start: true,
            private_dir: false,
            effects: Vec::new(),
            users: Vec::new(),
            directives: Vec::new(),
            config_file: None,
            renamed_commands: Vec::new(),
        }
    }
}

/// Why the command line or config file was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// Redis's `FATAL CONFIG FILE ERROR` report, for stderr: the line
    /// (number, and its text as read) when one is to blame, and why.
    Fatal { line: Option<(usize, String)>, reason: String },
    /// A config file that cannot be read: Redis logs this line (to stdout,
    /// its log before any logfile is known) and exits.
    Unreadable(String),
}

impl fmt::Display for ConfigError {
    /// The report exactly as redis-server writes it to stderr.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Fatal { line, reason } => {
                writeln!(f, "\n*** FATAL CONFIG FILE ERROR (Redis {}) ***", crate::REDIS_VERSION)?;
                if let Some((number, text)) = line {
                    writeln!(f, "Reading the configuration file, at line {number}")?;
                    writeln!(f, ">>> '{text}'")?;
                }
                writeln!(f, "{reason}")
            }
            ConfigError::Unreadable(text) => writeln!(f, "{text}"),
        }
    }
}

impl Config {
    /// The in-process test double's defaults: a free port on loopback.
    pub fn ephemeral() -> Config {
        Config {
            port: 0,
            load_at_start: false,
            private_dir: true,
            ..Config::default()
        }
    }

    /// Parses redis-server style arguments (without the program name): an
    /// optional config file, a lone `-` for stdin, then `--name value…`.
    pub fn from_args(args: &[String]) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        if args.is_empty() {
            return Ok(config);
        }
        let mut text = String::new();
        let mut rest = args;
        if let Some(first) = args.first()
            && !first.starts_with('-')
        {
            let path = std::path::absolute(first).unwrap_or_else(|_| first.into());
            let bytes = std::fs::read(&path).map_err(|e| {
                ConfigError::Unreadable(format!(
                    "Fatal error, can't open config file '{}': {}",
                    path.display(),
                    crate::error::os_error_text(&e)
                ))
            })?;
            text.push_str(&String::from_utf8_lossy(&bytes));
            config.config_file = Some(path);
            rest = &args[1..];
        }
        let (options, from_stdin) = command_line_options(rest, args.len() - rest.len());
        if from_stdin {
            crate::log::warning(format_args!("Reading config from stdin"));
            let mut input = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut input);
            text.push_str(&String::from_utf8_lossy(&input));
        }
        text.push('\n');
        text.push_str(&options);
        config.load(&text)?;
        Ok(config)
    }

    /// Applies redis.conf-style text, line by line, as Redis's
    /// `loadServerConfigFromString`: every directive is checked by the
    /// parameter table, and the first bad line is the error.
    pub fn load(&mut self, text: &str) -> Result<(), ConfigError> {
        let mut params = crate::config_params::ConfigParams::new();
        for (n, line) in text.split('\n').enumerate() {
            let line = line.trim_matches([' ', '\t', '\r', '\n']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |reason: String| ConfigError::Fatal {
                line: Some((n + 1, line.to_string())),
                reason,
            };
            let words = split_args(line.as_bytes()).ok_or_else(|| fail("Unbalanced quotes in configuration line".into()))?;
            let mut words = words.into_iter().map(|w| String::from_utf8_lossy(&w).into_owned());
            let Some(name) = words.next() else { continue };
            let values: Vec<String> = words.collect();
            if name.eq_ignore_ascii_case("user") && !values.is_empty() {
                // Redis's `ACLAppendUserForLoading`: checked now, applied
                // once the server starts (see `acl`).
                let argv: Vec<String> = std::iter::once(name.clone()).chain(values.iter().cloned()).collect();
                if self.users.iter().any(|u| u[0] == values[0]) {
                    return Err(fail(format!(
                        "Error in user declaration '{}': {}",
                        values[0],
                        crate::acl::RuleError::Duplicate.text()
                    )));
                }
                crate::acl::validate_config_user(&argv).map_err(fail)?;
                self.users.push(values);
                continue;
            }
            if let ("rename-command", [old, new]) = (name.to_ascii_lowercase().as_str(), values.as_slice()) {
                // Checked against the names renamed so far, as Redis renames
                // in its command table line by line.
                self.renamed_commands.push((old.clone(), new.clone()));
                let mut renames = crate::commands::table::Renames::default();
                for (old, new) in &self.renamed_commands {
                    renames.rename(old.as_bytes(), new.as_bytes()).map_err(|e| fail(e.to_string()))?;
                }
                continue;
            }
            params.apply_directive(&name, &values).map_err(fail)?;
            self.apply(&name, values).map_err(fail)?;
        }
        // Redis opens it from `dir`, where it has already changed to.
        let logfile = self.logfile.as_ref().map(|path| match &self.dir {
            Some(dir) => std::path::Path::new(dir).join(path),
            None => path.into(),
        });
        if let Some(path) = logfile
            && let Err(e) = std::fs::OpenOptions::new().append(true).create(true).open(path)
        {
            return Err(ConfigError::Fatal {
                line: None,
                reason: format!("Can't open the log file: {}", crate::error::os_error_text(&e)),
            });
        }
        // A cluster node replicates the master the cluster gives it.
        if params.int("cluster-enabled") == Some(1) && params.value("replicaof").is_some_and(|v| !v.is_empty()) {
            return Err(ConfigError::Fatal {
                line: None,
                reason: "replicaof directive not allowed in cluster mode".to_string(),
            });
        }
        Ok(())
    }

    /// Sets a parameter as a config file line `name value…` would (for
    /// embedders: `config.set("requirepass", &["s3cret"])`), checked by the
    /// parameter table as redis-server checks it.
    pub fn set(&mut self, name: &str, values: &[&str]) -> Result<(), String> {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        crate::config_params::ConfigParams::new().apply_directive(name, &values)?;
        self.apply(name, values)
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
            "tls-port" => self.tls_port = one()?.parse().map_err(|_| "Invalid port".to_string())?,
            "bind" => self.bind = values.clone(),
            "unixsocket" => self.unixsocket = Some(one()?.clone()).filter(|p| !p.is_empty()),
            "unixsocketperm" => {
                self.unixsocketperm = u32::from_str_radix(one()?, 8)
                    .ok()
                    .filter(|&p| p <= 0o777)
                    .ok_or("Invalid socket file permissions")?
            }
            "tcp-backlog" => {
                self.tcp_backlog = one()?
                    .parse::<i32>()
                    .ok()
                    .filter(|&b| b >= 0)
                    .ok_or("argument must be between 0 and 2147483647 inclusive")?
            }
            "pidfile" => self.pidfile = Some(one()?.clone()).filter(|p| !p.is_empty()),
            "dir" => self.dir = Some(one()?.clone()),
            "logfile" => self.logfile = Some(one()?.clone()).filter(|p| !p.is_empty()),
            "loglevel" => self.loglevel = Level::from_name(one()?).ok_or("Invalid log level")?,
            "daemonize" => self.daemonize = one()?.eq_ignore_ascii_case("yes"),
            "supervised" => self.supervised = one()?.to_ascii_lowercase(),
            _ => {}
        }
        self.directives.push((name, values));
        Ok(())
    }

    /// Whether the server listens on plain TCP: always, except for port 0
    /// with a Unix socket or a TLS port (Redis's `--port 0 --unixsocket
    /// PATH` or `--port 0 --tls-port N`: those only).
    pub fn serves_tcp(&self) -> bool {
        self.port != 0 || (self.unixsocket.is_none() && self.tls_port == 0)
    }

    /// Checks every directive against the parameter table, as redis-server
    /// does before it starts: an unknown name or a bad value is an error.
    pub fn validate(&self) -> Result<(), String> {
        self.params()?;
        self.validate_users()
    }

    /// The parameter table the directives make (the engine's starts so).
    pub fn params(&self) -> Result<crate::config_params::ConfigParams, String> {
        let mut params = crate::config_params::ConfigParams::new();
        // `dir` was checked as it was read; the binary has changed to it
        // since, so a relative path would no longer be found.
        for (name, values) in self.directives.iter().filter(|(name, _)| name != "dir") {
            params
                .apply_directive(name, values)
                .map_err(|e| format!("bad directive '{name} {}': {e}", values.join(" ")))?;
        }
        Ok(params)
    }

    /// Redis's `ACLLoadUsersAtStartup`: `user` lines or an ACL file, not
    /// both, and either must load, or the server does not start.
    fn validate_users(&self) -> Result<(), String> {
        let aclfile = self
            .directives
            .iter()
            .rev()
            .find(|(name, _)| name == "aclfile")
            .and_then(|(_, values)| values.first())
            .filter(|path| !path.is_empty());
        if aclfile.is_some() && !self.users.is_empty() {
            return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
        }
        let mut acl = crate::acl::Acl::default();
        let users: Vec<Vec<bytes::Bytes>> = self
            .users
            .iter()
            .map(|line| line.iter().map(|w| bytes::Bytes::copy_from_slice(w.as_bytes())).collect())
            .collect();
        acl.load_configured(&users)
            .map_err(|e| format!("{e}. Critical error while loading ACLs. Exiting."))?;
        if let Some(path) = aclfile {
            acl.load_file(path)
                .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        }
        Ok(())
    }
}

/// The command-line arguments after the config file as the config text
/// they stand for (Redis's `main`): `--name` starts a line, each other
/// argument is appended to it quoted, and `--save` with nothing after it
/// means `save ""`. Also whether a lone `-` (first or last) asks for the
/// config on stdin. `first` is the index of `args[0]` on the command line.
fn command_line_options(args: &[String], first: usize) -> (String, bool) {
    let mut options = String::new();
    let mut from_stdin = false;
    let mut handled_last = true;
    let last = first + args.len();
    for (i, arg) in args.iter().enumerate() {
        let j = first + i + 1;
        let next_is_option = args.get(i + 1).is_some_and(|a| a.starts_with("--"));
        if arg == "-" && (j == 1 || j == last) {
            from_stdin = true;
        } else if handled_last && arg.starts_with("--") {
            if !options.is_empty() {
                options.push('\n');
            }
            options.push_str(&arg[2..]);
            options.push(' ');
            let words = split_args(arg.as_bytes()).map_or(0, |w| w.len());
            if words == 1 {
                handled_last = false;
                let save = arg.eq_ignore_ascii_case("--save");
                let sentinel = arg.eq_ignore_ascii_case("--sentinel");
                if save && (next_is_option || j == last) {
                    options.push_str("\"\"");
                    handled_last = next_is_option;
                } else if sentinel && next_is_option {
                    handled_last = true;
                }
            } else {
                handled_last = true;
            }
        } else {
            options.push_str(&crate::engine::repr(arg.as_bytes()));
            options.push(' ');
            handled_last = true;
        }
    }
    (options, from_stdin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_become_config_lines_as_redis_builds_them() {
        let (text, stdin) = command_line_options(&args(&["--port", "6380", "--bind", "a", "b"]), 0);
        assert_eq!(text, "port \"6380\" \nbind \"a\" \"b\" ");
        assert!(!stdin);
        let (text, _) = command_line_options(&args(&["--save", "--port", "1"]), 0);
        assert_eq!(text, "save \"\"\nport \"1\" ");
        let (text, _) = command_line_options(&args(&["--port", "1", "--save"]), 0);
        assert_eq!(text, "port \"1\" \nsave \"\"");
        let (text, _) = command_line_options(&args(&["--save", "3600 1", "--port 6380"]), 0);
        assert_eq!(text, "save \"3600 1\" \nport 6380 ");
        let (text, _) = command_line_options(&args(&["--port 6380"]), 0);
        assert_eq!(text, "port 6380 ");
    }

    #[test]
    fn a_bad_flag_is_reported_at_its_line_as_redis_reports_it() {
        let err = Config::from_args(&args(&["--nosuchoption", "1"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line 2\n>>> 'nosuchoption \"1\"'\nBad directive or wrong number of arguments\n"
        );
        let err = Config::from_args(&args(&["--port", "abc"])).unwrap_err();
        assert!(
            err.to_string()
                .ends_with(">>> 'port \"abc\"'\nargument couldn't be parsed into an integer\n"),
            "{err}"
        );
    }

    #[test]
    fn unix_socket_settings_are_read() {
        let c = Config::from_args(&args(&["--port", "0", "--unixsocket", "/tmp/k.sock", "--unixsocketperm", "770"])).unwrap();
        assert_eq!(c.unixsocket.as_deref(), Some("/tmp/k.sock"));
        assert_eq!(c.unixsocketperm, 0o770);
        assert!(!c.serves_tcp());
    }
}
