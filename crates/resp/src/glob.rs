//! Redis's glob-style patterns (KEYS, SCAN MATCH, HSCAN, FUNCTION LIST): `*`, `?`,
//! `[abc]`, `[^a-z]`, `\x`, matched over bytes.

/// Most `*` a pattern may hold and match anything: Redis bounds the nesting of its
/// matcher to bound a pattern's work, and a pattern past the bound matches nothing.
pub const MAX_PATTERN_STARS: usize = 1000;

/// Whether `text` matches `pattern`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    if pattern.iter().filter(|&&b| b == b'*').count() > MAX_PATTERN_STARS {
        return false;
    }
    // Iterative, with one backtrack point for the last `*`: linear in practice and never
    // recursive, so a hostile pattern cannot exhaust the stack.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(pattern, p + 1, text[t]) {
                        if matched {
                            p = next;
                            t += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == text[t] {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                literal => {
                    if literal == text[t] {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((star_p, star_t)) => {
                p = star_p;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting after `[` at `at`: whether it matched and where
/// the pattern goes on (after `]`, or the end if unclosed, as Redis treats it).
fn class(pattern: &[u8], mut at: usize, c: u8) -> Option<(bool, usize)> {
    let negate = pattern.get(at) == Some(&b'^');
    if negate {
        at += 1;
    }
    let mut matched = false;
    while at < pattern.len() && pattern[at] != b']' {
        if pattern[at] == b'\\' && at + 1 < pattern.len() {
            matched |= pattern[at + 1] == c;
            at += 2;
        } else if at + 2 < pattern.len() && pattern[at + 1] == b'-' && pattern[at + 2] != b']' {
            let (lo, hi) = (pattern[at].min(pattern[at + 2]), pattern[at].max(pattern[at + 2]));
            matched |= (lo..=hi).contains(&c);
            at += 3;
        } else {
            matched |= pattern[at] == c;
            at += 1;
        }
    }
    let next = (at + 1).min(pattern.len());
    Some((matched != negate, next))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_redis_does() {
        for (pattern, text, expected) in [
            ("*", "anything", true),
            ("*", "", true),
            ("foo*", "foobar", true),
            ("foo*", "fo", false),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("key:\\*", "key:*", true),
            ("key:\\*", "key:a", false),
            ("*a*b*c*", "xaybzc", true),
            ("*a*b*c*", "xaybz", false),
            ("a", "ab", false),
        ] {
            assert_eq!(
                matches(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern} {text}"
            );
        }
    }
}
