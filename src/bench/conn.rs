//! One connection to the server under test: a TCP stream, a read buffer
//! scanned in place by [`resp::scan`](super::resp::scan), and the
//! handshake every connection makes (AUTH, HELLO 3, PING).
//!
//! The buffer is reused for the life of the connection: consumed bytes are
//! dropped by moving the unread tail to the front only when the buffer is
//! full, and it grows only when one reply is larger than all of it.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::BenchError;
use super::resp::{Reply, scan};
use super::template::encode_command;

const INITIAL_BUFFER: usize = 64 * 1024;

/// How every connection introduces itself.
#[derive(Debug, Clone, Default)]
pub struct Handshake {
    /// `(user, password)`; user None for the single-argument AUTH.
    pub auth: Option<(Option<String>, String)>,
    pub resp3: bool,
}

pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Start of the unread bytes.
    start: usize,
    /// End of the bytes read.
    filled: usize,
    target: String,
}

impl Conn {
    /// Connects and makes the handshake; errors say what failed and where.
    pub async fn open(target: &str, handshake: &Handshake) -> Result<Conn, BenchError> {
        let stream = TcpStream::connect(target)
            .await
            .map_err(|e| BenchError(format!("cannot connect to {target}: {e}")))?;
        stream.set_nodelay(true).map_err(|e| BenchError(format!("{target}: {e}")))?;
        let mut conn = Conn {
            stream,
            buf: vec![0; INITIAL_BUFFER],
            start: 0,
            filled: 0,
            target: target.to_string(),
        };
        if let Some((user, password)) = &handshake.auth {
            let reply = match user {
                Some(user) => conn.call(&[b"AUTH", user.as_bytes(), password.as_bytes()]).await?,
                None => conn.call(&[b"AUTH", password.as_bytes()]).await?,
            };
            if let Some(error) = reply.error {
                return Err(BenchError(format!("authentication failed on {target}: {error}")));
            }
        }
        if handshake.resp3
            && let Some(error) = conn.call(&[b"HELLO", b"3"]).await?.error
        {
            return Err(BenchError(format!("HELLO 3 refused by {target}: {error}")));
        }
        if let Some(error) = conn.call(&[b"PING"]).await?.error {
            return Err(BenchError(format!("{target} refused PING: {error}")));
        }
        Ok(conn)
    }

    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), BenchError> {
        self.stream.write_all(bytes).await.map_err(|e| self.io_error(e))
    }

    /// The next complete reply already read, consuming it; None when more
    /// must be read first (see [`Conn::fill`]).
    pub fn next_reply(&mut self) -> Result<Option<Reply<'_>>, BenchError> {
        let unread = &self.buf[self.start..self.filled];
        match scan(unread) {
            Ok(Some((reply, len))) => {
                self.start += len;
                Ok(Some(reply))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(BenchError(format!("{}: {e}", self.target))),
        }
    }

    /// Reads more bytes; a closed connection is an error.
    pub async fn fill(&mut self) -> Result<(), BenchError> {
        if self.start == self.filled {
            self.start = 0;
            self.filled = 0;
        } else if self.filled == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.filled, 0);
                self.filled -= self.start;
                self.start = 0;
            } else {
                let len = self.buf.len();
                self.buf.resize(len * 2, 0);
            }
        }
        match self.stream.read(&mut self.buf[self.filled..]).await {
            Ok(0) => Err(BenchError(format!("{} closed the connection", self.target))),
            Ok(n) => {
                self.filled += n;
                Ok(())
            }
            Err(e) => Err(self.io_error(e)),
        }
    }

    /// The next reply, reading as needed, summarized as owned data.
    pub async fn reply(&mut self) -> Result<Answer, BenchError> {
        loop {
            if let Some(reply) = self.next_reply()? {
                return Ok(Answer::of(&reply));
            }
            self.fill().await?;
        }
    }

    /// Sends one command and waits for its reply (setup, not the hot path).
    pub async fn call(&mut self, args: &[&[u8]]) -> Result<Answer, BenchError> {
        self.write(&encode_command(args)).await?;
        self.reply().await
    }

    fn io_error(&self, e: io::Error) -> BenchError {
        BenchError(format!("{}: {e}", self.target))
    }
}

/// A reply reduced to what setup code and the waiting client look at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    pub error: Option<String>,
    pub nil: bool,
    pub integer: Option<i64>,
    pub text: Option<Vec<u8>>,
    /// The first element of an array or push (a pub/sub message's kind).
    pub first: Option<Vec<u8>>,
}

impl Answer {
    pub fn of(reply: &Reply<'_>) -> Answer {
        let mut answer = Answer::default();
        match *reply {
            Reply::Error(text) => answer.error = Some(String::from_utf8_lossy(text).into_owned()),
            Reply::Nil => answer.nil = true,
            Reply::Integer(n) => answer.integer = Some(n),
            Reply::Simple(text) | Reply::Bulk(text) | Reply::Number(text) => answer.text = Some(text.to_vec()),
            Reply::Boolean(b) => answer.integer = Some(i64::from(b)),
            Reply::Aggregate { first, .. } | Reply::Push { first, .. } => answer.first = first.map(<[u8]>::to_vec),
        }
        answer
    }
}

/// A short, readable form of a reply for reports.
pub fn describe(reply: &Reply<'_>) -> String {
    let text = |b: &[u8]| {
        let s = String::from_utf8_lossy(&b[..b.len().min(80)]).into_owned();
        if b.len() > 80 { format!("{s}…") } else { s }
    };
    match *reply {
        Reply::Nil => "nil".into(),
        Reply::Integer(n) => format!("integer {n}"),
        Reply::Simple(s) => format!("status {}", text(s)),
        Reply::Error(s) => format!("error {}", text(s)),
        Reply::Bulk(s) => format!("bulk string \"{}\"", text(s)),
        Reply::Boolean(b) => format!("boolean {b}"),
        Reply::Number(s) => format!("number {}", text(s)),
        Reply::Aggregate { len, .. } => format!("aggregate of {len}"),
        Reply::Push { len, .. } => format!("push of {len}"),
    }
}
