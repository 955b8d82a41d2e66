//! What a request is, below the network layer: Redis's `sdssplitargs`
//! (inline requests, config files and script shebang lines all split words
//! with it) and the size under which a request's arguments share one
//! allocation (what `db::value::owned` must copy out of). The server's
//! parser, the config file reader, scripting and the keyspace use these;
//! none of them reaches into `server` for them.

/// The largest request (after its `*N` line) whose arguments share one
/// allocation.
pub const SMALL_REQUEST: usize = 512;

/// Redis's `sdssplitargs`: words separated by spaces, with "double quotes"
/// (C escapes and `\xHH`) and 'single quotes'. `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut i = 0;
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    loop {
        while at(i) != 0 && at(i).is_ascii_whitespace() || at(i) == 0x0b {
            i += 1;
        }
        if at(i) == 0 {
            return Some(words);
        }
        let mut word = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = at(i);
            if in_double {
                if c == b'\\' && at(i + 1) == b'x' && at(i + 2).is_ascii_hexdigit() && at(i + 3).is_ascii_hexdigit() {
                    let hex = [at(i + 2), at(i + 3)];
                    let s = std::str::from_utf8(&hex).ok()?;
                    word.push(u8::from_str_radix(s, 16).ok()?);
                    i += 3;
                } else if c == b'\\' && at(i + 1) != 0 {
                    i += 1;
                    word.push(match at(i) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(i + 1) != 0 && !is_space(at(i + 1)) {
                        return None;
                    }
                    i += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    word.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(i + 1) == b'\'' {
                    i += 1;
                    word.push(b'\'');
                } else if c == b'\'' {
                    if at(i + 1) != 0 && !is_space(at(i + 1)) {
                        return None;
                    }
                    i += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    word.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => word.push(c),
                }
            }
            i += 1;
        }
        words.push(word);
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_args_handles_escapes() {
        assert_eq!(
            split_args(b"a \"\\x41\\n\" 'it\\'s'").unwrap(),
            vec![b"a".to_vec(), b"A\n".to_vec(), b"it's".to_vec()]
        );
        assert!(split_args(b"\"a\"b").is_none());
    }
}
