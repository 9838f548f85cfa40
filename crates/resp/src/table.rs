//! The one table of the commands ferry serves: name, arity, flags and key positions, in
//! Redis's terms. It drives parsing (unknown names and arity), COMMAND's reply, cluster key
//! extraction (`-MOVED`, `-CROSSSLOT`), and what a script may call (`redis.call`'s write
//! check, commands no script may run); FCALL_RO's check of the function's flags is the
//! function's own.

use bytes::Bytes;

use crate::reply::Reply;

/// The command changes data.
pub const WRITE: u8 = 1;
/// The command only reads data.
pub const READ_ONLY: u8 = 2;
/// The command manages the server or the session rather than data.
pub const ADMIN: u8 = 4;
/// No script may run it (`redis.call` refuses it).
pub const NO_SCRIPT: u8 = 8;

/// Where a command's keys are among its words (the name is word 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpec {
    /// It names no key.
    None,
    /// Words `first`, `first + step`, … up to `last` (negative: counted from the end, -1
    /// the last word), as Redis's first-key, last-key and step.
    Range {
        /// First key's word.
        first: usize,
        /// Last key's word; negative counts from the end.
        last: i32,
        /// Words from one key to the next.
        step: usize,
    },
    /// The word at `at` says how many keys follow it (FCALL's numkeys).
    Counted {
        /// The count's word.
        at: usize,
    },
}

/// One command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// Lower case.
    pub name: &'static str,
    /// Redis's arity: the number of words, name included; negative means at least that many.
    pub arity: i32,
    /// [`WRITE`], [`READ_ONLY`], [`ADMIN`], [`NO_SCRIPT`].
    pub flags: u8,
    /// Its keys.
    pub keys: KeySpec,
}

const fn spec(name: &'static str, arity: i32, flags: u8, keys: KeySpec) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
    }
}

const ONE_KEY: KeySpec = KeySpec::Range {
    first: 1,
    last: 1,
    step: 1,
};
const ALL_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 1,
};
const PAIRS: KeySpec = KeySpec::Range {
    first: 1,
    last: -1,
    step: 2,
};
const NO_KEYS: KeySpec = KeySpec::None;

/// Every command served.
pub const COMMANDS: &[CommandSpec] = &[
    spec("ping", -1, 0, NO_KEYS),
    spec("echo", 2, 0, NO_KEYS),
    spec("quit", -1, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("auth", -2, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("hello", -1, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("select", 2, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("readonly", 1, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("readwrite", 1, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("get", 2, READ_ONLY, ONE_KEY),
    spec("set", -3, WRITE, ONE_KEY),
    spec("del", -2, WRITE, ALL_KEYS),
    spec("unlink", -2, WRITE, ALL_KEYS),
    spec("exists", -2, READ_ONLY, ALL_KEYS),
    spec("mget", -2, READ_ONLY, ALL_KEYS),
    spec("mset", -3, WRITE, PAIRS),
    spec("incr", 2, WRITE, ONE_KEY),
    spec("decr", 2, WRITE, ONE_KEY),
    spec("incrby", 3, WRITE, ONE_KEY),
    spec("decrby", 3, WRITE, ONE_KEY),
    spec("command", -1, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("info", -1, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("save", 1, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("bgsave", 1, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("client", -2, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("cluster", -2, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("function", -2, ADMIN | NO_SCRIPT, NO_KEYS),
    spec("fcall", -3, WRITE | NO_SCRIPT, KeySpec::Counted { at: 2 }),
    spec("fcall_ro", -3, READ_ONLY | NO_SCRIPT, KeySpec::Counted { at: 2 }),
];

/// The command named `name` (any case), if served.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    COMMANDS
        .iter()
        .find(|spec| spec.name.as_bytes().eq_ignore_ascii_case(name))
}

impl CommandSpec {
    /// Whether `words` (the name included) has an arity this command takes.
    pub fn arity_fits(&self, words: usize) -> bool {
        let arity = self.arity.unsigned_abs() as usize;
        if self.arity < 0 {
            words >= arity
        } else {
            words == arity
        }
    }

    /// Whether the command has flag `flag`.
    pub fn is(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The keys among `words` (the name is word 0), in order; none if the words do not
    /// fit the command (its parser refuses them).
    pub fn keys<'w>(&self, words: &'w [Bytes]) -> Vec<&'w Bytes> {
        match self.keys {
            KeySpec::None => Vec::new(),
            KeySpec::Range { first, last, step } => {
                let last = if last < 0 {
                    words.len().checked_sub(last.unsigned_abs() as usize)
                } else {
                    Some(last as usize)
                };
                match last {
                    Some(last) if first <= last && last < words.len() => {
                        words[first..=last].iter().step_by(step).collect()
                    }
                    _ => Vec::new(),
                }
            }
            KeySpec::Counted { at } => {
                let count = words
                    .get(at)
                    .and_then(|word| std::str::from_utf8(word).ok())
                    .and_then(|text| text.parse::<usize>().ok());
                match count {
                    Some(count) if at + count < words.len() => words[at + 1..=at + count].iter().collect(),
                    _ => Vec::new(),
                }
            }
        }
    }

    /// COMMAND INFO's entry: name, arity, flags, first key, last key, step.
    pub fn info(&self) -> Reply {
        let mut flags = Vec::new();
        for (flag, name) in [
            (WRITE, "write"),
            (READ_ONLY, "readonly"),
            (ADMIN, "admin"),
            (NO_SCRIPT, "noscript"),
        ] {
            if self.is(flag) {
                flags.push(Reply::Simple(name.into()));
            }
        }
        if matches!(self.keys, KeySpec::Counted { .. }) {
            flags.push(Reply::Simple("movablekeys".into()));
        }
        let (first, last, step) = match self.keys {
            KeySpec::None | KeySpec::Counted { .. } => (0, 0, 0),
            KeySpec::Range { first, last, step } => (first as i64, i64::from(last), step as i64),
        };
        Reply::Array(vec![
            Reply::text(self.name),
            Reply::Integer(i64::from(self.arity)),
            Reply::Array(flags),
            Reply::Integer(first),
            Reply::Integer(last),
            Reply::Integer(step),
        ])
    }
}

/// The keys a command's words name, by the table (none for an unknown command).
pub fn keys_of(words: &[Bytes]) -> Vec<Bytes> {
    let Some(spec) = words.first().and_then(|name| lookup(name)) else {
        return Vec::new();
    };
    spec.keys(words).into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Bytes> {
        text.split(' ').map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    fn keys(text: &str) -> Vec<String> {
        keys_of(&words(text))
            .iter()
            .map(|key| String::from_utf8_lossy(key).into_owned())
            .collect()
    }

    #[test]
    fn keys_come_from_the_key_specs() {
        assert_eq!(keys("GET a"), ["a"]);
        assert_eq!(keys("set a v NX"), ["a"]);
        assert_eq!(keys("MSET a 1 b 2"), ["a", "b"]);
        assert_eq!(keys("DEL a b c"), ["a", "b", "c"]);
        assert_eq!(keys("FCALL f 2 a b arg"), ["a", "b"]);
        assert_eq!(keys("FCALL_RO f 0 arg"), Vec::<String>::new());
        assert_eq!(keys("FCALL f 3 a"), Vec::<String>::new(), "more keys than words");
        assert_eq!(keys("PING"), Vec::<String>::new());
        assert_eq!(keys("NOSUCH a"), Vec::<String>::new());
    }

    #[test]
    fn arity_and_flags_read_as_redis_defines_them() {
        let get = lookup(b"gEt").unwrap();
        assert!(get.arity_fits(2) && !get.arity_fits(3) && !get.arity_fits(1));
        let set = lookup(b"SET").unwrap();
        assert!(set.arity_fits(3) && set.arity_fits(6) && !set.arity_fits(2));
        assert!(set.is(WRITE) && !set.is(READ_ONLY));
        assert!(lookup(b"mget").unwrap().is(READ_ONLY));
        assert!(lookup(b"fcall").unwrap().is(NO_SCRIPT));
        assert_eq!(lookup(b"flushall"), None);
        assert_eq!(
            lookup(b"mset").unwrap().info(),
            Reply::Array(vec![
                Reply::text("mset"),
                Reply::Integer(-3),
                Reply::Array(vec![Reply::Simple("write".into())]),
                Reply::Integer(1),
                Reply::Integer(-1),
                Reply::Integer(2),
            ])
        );
    }

    #[test]
    fn names_are_unique_and_lower_case() {
        for (i, spec) in COMMANDS.iter().enumerate() {
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            assert!(
                COMMANDS[i + 1..].iter().all(|other| other.name != spec.name),
                "{}",
                spec.name
            );
        }
    }
}
