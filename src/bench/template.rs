//! Request templates: the arguments of one command, with placeholders filled
//! in per request, rendered as RESP straight into a reused output buffer.
//!
//! Placeholders (inside one argument, any number of them):
//! - `{rand:N}`: a uniform random integer in `0..N`, drawn per occurrence;
//! - `{key}`: the key number this operation works on (`0..--keys`, chosen
//!   by `--key-order`), the same in every argument of the operation;
//! - `{client}`: the client (connection) number, `0..--clients`;
//! - `{thread}`: the Redisson thread this request acts as (one per
//!   pipeline slot of each client: `client * pipeline + slot`);
//! - `{seq}`: the operation's sequence number within its client.
//!
//! Any other text in braces is kept as it is, so Redisson's hash tags
//! (`redisson_lock__channel:{lock:{key}}`) need no escaping; a known name
//! written wrongly (`{rand}`, `{rand:0}`, `{seq:3}`) is an error rather than
//! literal text.
//!
//! Arguments without placeholders, and the `*N` header, are encoded once
//! when the template is built; rendering copies those bytes and formats
//! only the placeholders, into buffers the caller reuses, so a request
//! costs no allocation once the buffers have grown to size.

use std::fmt;

/// The per-request values placeholders take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vars {
    pub client: u64,
    pub thread: u64,
    pub seq: u64,
    pub key: u64,
}

/// A template that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(Vec<u8>),
    Rand(u64),
    Key,
    Client,
    Thread,
    Seq,
}

/// One argument: literal bytes and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgTemplate {
    segments: Vec<Segment>,
}

impl ArgTemplate {
    /// Parses placeholders in `text`.
    pub fn parse(text: &str) -> Result<ArgTemplate, TemplateError> {
        let bytes = text.as_bytes();
        let mut segments = Vec::new();
        let mut literal = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'{'
                && let Some(placeholder) = placeholder_at(&text[i + 1..])?
            {
                if !literal.is_empty() {
                    segments.push(Segment::Literal(std::mem::take(&mut literal)));
                }
                segments.push(placeholder.0);
                i += placeholder.1 + 2;
                continue;
            }
            literal.push(bytes[i]);
            i += 1;
        }
        if !literal.is_empty() || segments.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Ok(ArgTemplate { segments })
    }

    /// Bytes taken as they are (a script body, binary data).
    pub fn literal(bytes: &[u8]) -> ArgTemplate {
        ArgTemplate {
            segments: vec![Segment::Literal(bytes.to_vec())],
        }
    }

    /// The bytes, when the argument has no placeholder.
    fn constant(&self) -> Option<&[u8]> {
        match self.segments.as_slice() {
            [Segment::Literal(bytes)] => Some(bytes),
            _ => None,
        }
    }

    /// Appends the rendered argument (no RESP framing) to `out`.
    pub fn render(&self, vars: &Vars, rng: &mut fastrand::Rng, out: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        for segment in &self.segments {
            let number = match segment {
                Segment::Literal(bytes) => {
                    out.extend_from_slice(bytes);
                    continue;
                }
                Segment::Rand(bound) => rng.u64(..*bound),
                Segment::Key => vars.key,
                Segment::Client => vars.client,
                Segment::Thread => vars.thread,
                Segment::Seq => vars.seq,
            };
            out.extend_from_slice(digits.format(number).as_bytes());
        }
    }
}

/// The placeholder whose name starts `text` (just after a `{`), with the
/// length of its name; None when the braces hold something else.
fn placeholder_at(text: &str) -> Result<Option<(Segment, usize)>, TemplateError> {
    let Some(close) = text.find('}') else { return Ok(None) };
    let inside = &text[..close];
    let (name, bound) = match inside.split_once(':') {
        Some((name, bound)) => (name, Some(bound)),
        None => (inside, None),
    };
    let segment = match (name, bound) {
        ("key", None) => Segment::Key,
        ("client", None) => Segment::Client,
        ("thread", None) => Segment::Thread,
        ("seq", None) => Segment::Seq,
        ("rand", Some(bound)) => match bound.parse::<u64>() {
            Ok(n) if n > 0 => Segment::Rand(n),
            _ => return Err(TemplateError(format!("{{rand:{bound}}}: the bound must be a positive integer"))),
        },
        ("rand", None) => return Err(TemplateError("{rand} needs a bound: {rand:N}".into())),
        ("key" | "client" | "thread" | "seq", Some(_)) => {
            return Err(TemplateError(format!("{{{inside}}}: {{{name}}} takes no argument")));
        }
        _ => return Ok(None),
    };
    Ok(Some((segment, close)))
}

#[derive(Debug, Clone)]
enum Piece {
    /// Already RESP: the header and runs of constant arguments.
    Encoded(Vec<u8>),
    Arg(ArgTemplate),
}

/// A whole command as a RESP array of bulk strings.
#[derive(Debug, Clone)]
pub struct CommandTemplate {
    pieces: Vec<Piece>,
}

impl CommandTemplate {
    pub fn new(args: Vec<ArgTemplate>) -> CommandTemplate {
        let mut pieces = Vec::new();
        let mut encoded = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            match arg.constant() {
                Some(bytes) => encode_bulk(bytes, &mut encoded),
                None => {
                    pieces.push(Piece::Encoded(std::mem::take(&mut encoded)));
                    pieces.push(Piece::Arg(arg));
                }
            }
        }
        if !encoded.is_empty() {
            pieces.push(Piece::Encoded(encoded));
        }
        CommandTemplate { pieces }
    }

    /// A command from argument texts, each parsed for placeholders.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<CommandTemplate, TemplateError> {
        let args = args.iter().map(|a| ArgTemplate::parse(a.as_ref())).collect::<Result<_, _>>()?;
        Ok(CommandTemplate::new(args))
    }

    /// Appends the command, encoded, to `out`; `scratch` holds each
    /// rendered argument while its length is taken.
    pub fn render(&self, vars: &Vars, rng: &mut fastrand::Rng, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
        for piece in &self.pieces {
            match piece {
                Piece::Encoded(bytes) => out.extend_from_slice(bytes),
                Piece::Arg(arg) => {
                    scratch.clear();
                    arg.render(vars, rng, scratch);
                    encode_bulk(scratch, out);
                }
            }
        }
    }
}

/// Appends `$len\r\nbytes\r\n`.
pub fn encode_bulk(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(bytes.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// A command from fixed arguments, encoded once.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        encode_bulk(arg, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        Vars {
            client: 7,
            thread: 113,
            seq: 42,
            key: 9001,
        }
    }

    fn render(text: &str) -> String {
        let mut out = Vec::new();
        ArgTemplate::parse(text)
            .unwrap()
            .render(&vars(), &mut fastrand::Rng::with_seed(1), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn placeholders_take_the_request_values() {
        assert_eq!(render("lock:{key}"), "lock:9001");
        assert_eq!(render("{client}-{seq}"), "7-42");
        assert_eq!(render("uuid:{thread}"), "uuid:113");
        assert_eq!(render("{key}{key}"), "90019001");
        assert_eq!(render("plain"), "plain");
        assert_eq!(render(""), "");
    }

    #[test]
    fn rand_stays_below_its_bound() {
        let template = ArgTemplate::parse("{rand:10}").unwrap();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let mut out = Vec::new();
            template.render(&vars(), &mut rng, &mut out);
            let n: usize = std::str::from_utf8(&out).unwrap().parse().unwrap();
            seen[n] = true;
        }
        assert!(seen.iter().all(|&s| s), "{seen:?}");
        assert_eq!(render("{rand:1}"), "0");
    }

    #[test]
    fn other_braces_are_literal_text() {
        assert_eq!(render("redisson_lock__channel:{lock:{key}}"), "redisson_lock__channel:{lock:9001}");
        assert_eq!(render("{{key}}"), "{9001}");
        assert_eq!(render("{name}"), "{name}");
        assert_eq!(render("{"), "{");
        assert_eq!(render("}{"), "}{");
        assert_eq!(render("{}"), "{}");
        assert_eq!(render("a{b"), "a{b");
    }

    #[test]
    fn known_names_written_wrongly_are_errors() {
        for bad in ["{rand}", "{rand:}", "{rand:0}", "{rand:-3}", "{rand:x}", "{seq:3}", "{key:}"] {
            assert!(ArgTemplate::parse(bad).is_err(), "{bad}");
        }
        let message = ArgTemplate::parse("k:{rand:abc}").unwrap_err().to_string();
        assert!(message.contains("{rand:abc}"), "{message}");
    }

    #[test]
    fn commands_render_as_resp_arrays() {
        let command = CommandTemplate::parse(&["HSET", "bench:hash", "f:{key}", "xxx"]).unwrap();
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        command.render(&vars(), &mut fastrand::Rng::with_seed(1), &mut scratch, &mut out);
        assert_eq!(out, b"*4\r\n$4\r\nHSET\r\n$10\r\nbench:hash\r\n$6\r\nf:9001\r\n$3\r\nxxx\r\n");
        // Rendering appends: a pipeline is several renders into one buffer.
        let one = out.clone();
        command.render(&vars(), &mut fastrand::Rng::with_seed(1), &mut scratch, &mut out);
        assert_eq!(out, [one.as_slice(), one.as_slice()].concat());
    }

    #[test]
    fn constant_commands_are_encoded_once() {
        let command = CommandTemplate::parse(&["PING"]).unwrap();
        assert!(matches!(command.pieces.as_slice(), [Piece::Encoded(b)] if b == b"*1\r\n$4\r\nPING\r\n"));
        let command = CommandTemplate::parse(&["SET", "k:{key}", "v"]).unwrap();
        assert_eq!(command.pieces.len(), 3);
    }

    #[test]
    fn literal_arguments_are_binary_and_unparsed() {
        let body = b"return {rand:1} \xff";
        let command = CommandTemplate::new(vec![ArgTemplate::literal(b"EVAL"), ArgTemplate::literal(body)]);
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        command.render(&vars(), &mut fastrand::Rng::new(), &mut scratch, &mut out);
        assert_eq!(out, encode_command(&[b"EVAL", body]));
    }
}
