//! The test controls from Rust: [`ServerHandle::reset`],
//! [`ServerHandle::restart`] and [`ServerHandle::faults`] send the same
//! `KEYLOCK` commands a client in any language sends, over a loopback
//! connection, so both share one implementation (and one gate:
//! `enable-test-commands`). [`ServerHandle::clock`] is the server's own
//! clock: moving it is time passing (keys expire when touched or by the
//! background cycle, as in real time); [`ServerHandle::advance`] is
//! KEYLOCK CLOCK ADVANCE, which also expires what became due before it
//! returns.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};

use super::ServerHandle;

/// A control command's reply: the status or the integer.
enum Answer {
    Status,
    Integer(i64),
}

impl ServerHandle {
    /// KEYLOCK RESET: the data, scripts, statistics and faults emptied and
    /// the clock back to real time, connections kept.
    pub fn reset(&self) -> std::io::Result<()> {
        self.control(&["RESET"]).map(|_| ())
    }

    /// KEYLOCK RESTART: every connection dropped and all data lost, as a
    /// crash and restart would; the server goes on listening.
    pub fn restart(&self) -> std::io::Result<()> {
        self.control(&["RESTART"]).map(|_| ())
    }

    /// KEYLOCK CLOCK ADVANCE: moves the clock `ms` forward and expires
    /// every key that became due; returns the new time in ms.
    pub fn advance(&self, ms: u64) -> std::io::Result<u64> {
        match self.control(&["CLOCK", "ADVANCE", &ms.to_string()])? {
            Answer::Integer(now) => Ok(now as u64),
            Answer::Status => Err(std::io::Error::other("CLOCK ADVANCE answered without the time")),
        }
    }

    /// The injected faults (KEYLOCK FAULT).
    pub fn faults(&self) -> Faults<'_> {
        Faults { server: self }
    }

    fn control(&self, args: &[&str]) -> std::io::Result<Answer> {
        let mut addr = self.addr();
        if addr.ip().is_unspecified() {
            addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port());
        }
        let mut stream = TcpStream::connect(addr)?;
        let mut request = format!("*{}\r\n$7\r\nKEYLOCK\r\n", args.len() + 1);
        for a in args {
            request.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        stream.write_all(request.as_bytes())?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line)?;
        let line = line.trim_end();
        match line.split_at_checked(1) {
            Some(("+", _)) => Ok(Answer::Status),
            Some((":", n)) => n.parse().map(Answer::Integer).map_err(std::io::Error::other),
            Some(("-", text)) => Err(std::io::Error::other(text.to_string())),
            _ => Err(std::io::Error::other(format!(
                "unexpected reply to KEYLOCK {}: {line:?}",
                args.join(" ")
            ))),
        }
    }
}

/// The server's injected faults, as `KEYLOCK FAULT` manages them.
pub struct Faults<'a> {
    server: &'a ServerHandle,
}

impl Faults<'_> {
    /// Adds a rule, given as FAULT ADD's arguments
    /// (`["ERROR", "script:lock-renew*", "LOADING later", "COUNT", "1"]`);
    /// returns its id.
    pub fn add(&self, rule: &[&str]) -> std::io::Result<u64> {
        let mut args = vec!["FAULT", "ADD"];
        args.extend_from_slice(rule);
        match self.server.control(&args)? {
            Answer::Integer(id) => Ok(id as u64),
            Answer::Status => Err(std::io::Error::other("FAULT ADD answered without an id")),
        }
    }

    /// Removes a rule; false if there was none with that id.
    pub fn remove(&self, id: u64) -> std::io::Result<bool> {
        let id = id.to_string();
        Ok(matches!(self.server.control(&["FAULT", "DEL", &id])?, Answer::Integer(1)))
    }

    /// Removes every rule; returns how many there were.
    pub fn clear(&self) -> std::io::Result<u64> {
        match self.server.control(&["FAULT", "CLEAR"])? {
            Answer::Integer(n) => Ok(n as u64),
            Answer::Status => Ok(0),
        }
    }
}
