//! Redis's glob matching (`stringmatchlen`), used by KEYS, SCAN MATCH,
//! PSUBSCRIBE, PUBSUB CHANNELS and CONFIG GET: `*`, `?`, `[abc]`, `[^a-z]`,
//! `\x` escapes, over bytes.

/// True if `string` matches `pattern`.
pub fn matches(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_inner(pattern, string, nocase, &mut skip_longer, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase { a.eq_ignore_ascii_case(&b) } else { a == b }
}

fn match_inner(mut p: &[u8], mut s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: usize) -> bool {
    // Redis bounds recursion the same way, to stay safe on hostile patterns.
    if nesting > 1000 {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_inner(&p[1..], s, nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                s = &s[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if p[0] == s[0] {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        let mut c = s[0];
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        if nocase {
                            start = start.to_ascii_lowercase();
                            end = end.to_ascii_lowercase();
                            c = c.to_ascii_lowercase();
                        }
                        p = &p[2..];
                        if c >= start && c <= end {
                            matched = true;
                        }
                    } else if eq(p[0], s[0], nocase) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                // Redis treats a missing `]` as the end of the pattern.
                if p.is_empty() {
                    p = &p[0..0];
                    let matched = matched != not;
                    if !matched {
                        return false;
                    }
                    s = &s[1..];
                    continue;
                }
                if matched == not {
                    return false;
                }
                s = &s[1..];
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1.min(p.len())..];
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        assert!(matches(b"*", b"anything", false));
        assert!(matches(b"h?llo", b"hello", false));
        assert!(matches(b"h[ae]llo", b"hallo", false));
        assert!(!matches(b"h[^e]llo", b"hello", false));
        assert!(matches(b"h[a-b]llo", b"hbllo", false));
        assert!(matches(b"redisson_lock__channel:*", b"redisson_lock__channel:{x}", false));
        assert!(matches(b"a\\*b", b"a*b", false));
        assert!(!matches(b"a\\*b", b"axb", false));
        assert!(matches(b"MAX*", b"maxmemory", true));
        assert!(!matches(b"a*", b"", false));
        // As in Redis, a lone star needs at least one byte; KEYS and SCAN special-case "*".
        assert!(!matches(b"*", b"", false));
    }
}
