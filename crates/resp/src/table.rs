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
/// A data command over the keys it names, run by the keyspace executor (ferry's own
/// flag: COMMAND does not show it).
pub const KEYSPACE: u8 = 16;
/// A command over a whole database (KEYS, SCAN, FLUSHDB, …), run where the database's
/// objects are (ferry's own flag: COMMAND does not show it).
pub const DATABASE: u8 = 32;
/// A blocking pop: the listener repeats its non-blocking step until it pops or times out.
pub const BLOCKING: u8 = 64;
/// The command may grow memory: refused before it runs while the tenant is past its
/// memory limit with no room to make (Redis's `denyoom`).
pub const DENY_OOM: u8 = 128;

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
    /// Word 1 (a destination), then the keys counted at `at` (ZUNIONSTORE's form).
    StoreCounted {
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
    /// [`WRITE`], [`READ_ONLY`], [`ADMIN`], [`NO_SCRIPT`], [`DENY_OOM`], ….
    pub flags: u8,
    /// Its keys.
    pub keys: KeySpec,
    /// For a command the connection answers itself (neither a data command nor a
    /// blocking one): which, for the parser's arm of it.
    pub session: Option<Session>,
}

/// The commands a connection answers itself, each its own arm of [`crate::Command::parse`]:
/// the parser matches on these, never on names, so a name is written only in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Session {
    Ping,
    Echo,
    Quit,
    Auth,
    Hello,
    Select,
    ReadOnly,
    ReadWrite,
    CommandInfo,
    Info,
    Config,
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
    Save,
    BgSave,
    Client,
    Cluster,
    Function,
    FCall,
    FCallRo,
    Eval,
    EvalRo,
    EvalSha,
    EvalShaRo,
    Script,
}

const fn spec(name: &'static str, arity: i32, flags: u8, keys: KeySpec) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        session: None,
    }
}

/// A command the connection answers itself, as [`Session`] `session`.
const fn session(name: &'static str, arity: i32, flags: u8, keys: KeySpec, session: Session) -> CommandSpec {
    CommandSpec {
        session: Some(session),
        ..spec(name, arity, flags, keys)
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
const TWO_KEYS: KeySpec = KeySpec::Range {
    first: 1,
    last: 2,
    step: 1,
};
/// Every word from the second on (BITOP's destination and sources).
const ALL_FROM_SECOND: KeySpec = KeySpec::Range {
    first: 2,
    last: -1,
    step: 1,
};
const NO_KEYS: KeySpec = KeySpec::None;
/// Every word after the name but the last (BLPOP's keys before its timeout).
const ALL_BUT_LAST: KeySpec = KeySpec::Range {
    first: 1,
    last: -2,
    step: 1,
};
const COUNTED: KeySpec = KeySpec::Counted { at: 1 };
const STORE_COUNTED: KeySpec = KeySpec::StoreCounted { at: 2 };
/// A data command that writes.
const W: u8 = WRITE | KEYSPACE;
/// A data command that only reads.
const R: u8 = READ_ONLY | KEYSPACE;
/// A data command that may grow memory.
const G: u8 = W | DENY_OOM;

/// Every command served.
pub const COMMANDS: &[CommandSpec] = &[
    session("ping", -1, 0, NO_KEYS, Session::Ping),
    session("echo", 2, 0, NO_KEYS, Session::Echo),
    session("quit", -1, ADMIN | NO_SCRIPT, NO_KEYS, Session::Quit),
    session("auth", -2, ADMIN | NO_SCRIPT, NO_KEYS, Session::Auth),
    session("hello", -1, ADMIN | NO_SCRIPT, NO_KEYS, Session::Hello),
    session("select", 2, ADMIN | NO_SCRIPT, NO_KEYS, Session::Select),
    session("readonly", 1, ADMIN | NO_SCRIPT, NO_KEYS, Session::ReadOnly),
    session("readwrite", 1, ADMIN | NO_SCRIPT, NO_KEYS, Session::ReadWrite),
    // Strings.
    spec("get", 2, R, ONE_KEY),
    spec("set", -3, G, ONE_KEY),
    spec("setnx", 3, G, ONE_KEY),
    spec("setex", 4, G, ONE_KEY),
    spec("psetex", 4, G, ONE_KEY),
    spec("getset", 3, G, ONE_KEY),
    spec("getdel", 2, W, ONE_KEY),
    spec("getex", -2, W, ONE_KEY),
    spec("mget", -2, R, ALL_KEYS),
    spec("mset", -3, G, PAIRS),
    spec("msetnx", -3, G, PAIRS),
    spec("append", 3, G, ONE_KEY),
    spec("strlen", 2, R, ONE_KEY),
    spec("getrange", 4, R, ONE_KEY),
    spec("substr", 4, R, ONE_KEY),
    spec("setrange", 4, G, ONE_KEY),
    spec("incr", 2, G, ONE_KEY),
    spec("decr", 2, G, ONE_KEY),
    spec("incrby", 3, G, ONE_KEY),
    spec("decrby", 3, G, ONE_KEY),
    spec("incrbyfloat", 3, G, ONE_KEY),
    spec("lcs", -3, R, TWO_KEYS),
    // Bits of strings.
    spec("setbit", 4, G, ONE_KEY),
    spec("getbit", 3, R, ONE_KEY),
    spec("bitcount", -2, R, ONE_KEY),
    spec("bitpos", -3, R, ONE_KEY),
    spec("bitop", -4, G, ALL_FROM_SECOND),
    // Keys of any type, and expiry.
    spec("del", -2, W, ALL_KEYS),
    spec("unlink", -2, W, ALL_KEYS),
    spec("exists", -2, R, ALL_KEYS),
    spec("touch", -2, R, ALL_KEYS),
    spec("type", 2, R, ONE_KEY),
    spec("time", 1, R, NO_KEYS),
    spec("keys", 2, READ_ONLY | DATABASE, NO_KEYS),
    spec("scan", -2, READ_ONLY | DATABASE, NO_KEYS),
    spec("dbsize", 1, READ_ONLY | DATABASE, NO_KEYS),
    spec("randomkey", 1, READ_ONLY | DATABASE, NO_KEYS),
    spec("flushdb", -1, WRITE | DATABASE, NO_KEYS),
    spec("flushall", -1, WRITE | DATABASE, NO_KEYS),
    spec("rename", 3, W, TWO_KEYS),
    spec("renamenx", 3, W, TWO_KEYS),
    spec("copy", -3, G, TWO_KEYS),
    spec("expire", -3, W, ONE_KEY),
    spec("pexpire", -3, W, ONE_KEY),
    spec("expireat", -3, W, ONE_KEY),
    spec("pexpireat", -3, W, ONE_KEY),
    spec("ttl", 2, R, ONE_KEY),
    spec("pttl", 2, R, ONE_KEY),
    spec("expiretime", 2, R, ONE_KEY),
    spec("pexpiretime", 2, R, ONE_KEY),
    spec("persist", 2, W, ONE_KEY),
    // Hashes.
    spec("hset", -4, G, ONE_KEY),
    spec("hmset", -4, G, ONE_KEY),
    spec("hsetnx", 4, G, ONE_KEY),
    spec("hget", 3, R, ONE_KEY),
    spec("hmget", -3, R, ONE_KEY),
    spec("hdel", -3, W, ONE_KEY),
    spec("hlen", 2, R, ONE_KEY),
    spec("hstrlen", 3, R, ONE_KEY),
    spec("hexists", 3, R, ONE_KEY),
    spec("hgetall", 2, R, ONE_KEY),
    spec("hkeys", 2, R, ONE_KEY),
    spec("hvals", 2, R, ONE_KEY),
    spec("hincrby", 4, G, ONE_KEY),
    spec("hincrbyfloat", 4, G, ONE_KEY),
    spec("hrandfield", -2, R, ONE_KEY),
    spec("hscan", -3, R, ONE_KEY),
    // Lists.
    spec("lpush", -3, G, ONE_KEY),
    spec("rpush", -3, G, ONE_KEY),
    spec("lpushx", -3, G, ONE_KEY),
    spec("rpushx", -3, G, ONE_KEY),
    spec("lpop", -2, W, ONE_KEY),
    spec("rpop", -2, W, ONE_KEY),
    spec("llen", 2, R, ONE_KEY),
    spec("lrange", 4, R, ONE_KEY),
    spec("lindex", 3, R, ONE_KEY),
    spec("lset", 4, G, ONE_KEY),
    spec("linsert", 5, G, ONE_KEY),
    spec("lrem", 4, W, ONE_KEY),
    spec("ltrim", 4, W, ONE_KEY),
    spec("lpos", -3, R, ONE_KEY),
    spec("lmove", 5, G, TWO_KEYS),
    spec("rpoplpush", 3, G, TWO_KEYS),
    spec("lmpop", -4, W, COUNTED),
    spec("blpop", -3, WRITE | BLOCKING, ALL_BUT_LAST),
    spec("brpop", -3, WRITE | BLOCKING, ALL_BUT_LAST),
    spec("brpoplpush", 4, WRITE | BLOCKING | DENY_OOM, TWO_KEYS),
    spec("blmove", 6, WRITE | BLOCKING | DENY_OOM, TWO_KEYS),
    spec("blmpop", -5, WRITE | BLOCKING, KeySpec::Counted { at: 2 }),
    // Sets.
    spec("sadd", -3, G, ONE_KEY),
    spec("srem", -3, W, ONE_KEY),
    spec("scard", 2, R, ONE_KEY),
    spec("sismember", 3, R, ONE_KEY),
    spec("smismember", -3, R, ONE_KEY),
    spec("smembers", 2, R, ONE_KEY),
    spec("sinter", -2, R, ALL_KEYS),
    spec("sunion", -2, R, ALL_KEYS),
    spec("sdiff", -2, R, ALL_KEYS),
    spec("sinterstore", -3, G, ALL_KEYS),
    spec("sunionstore", -3, G, ALL_KEYS),
    spec("sdiffstore", -3, G, ALL_KEYS),
    spec("sintercard", -3, R, COUNTED),
    spec("spop", -2, W, ONE_KEY),
    spec("srandmember", -2, R, ONE_KEY),
    spec("smove", 4, W, TWO_KEYS),
    spec("sscan", -3, R, ONE_KEY),
    // Sorted sets.
    spec("zadd", -4, G, ONE_KEY),
    spec("zincrby", 4, G, ONE_KEY),
    spec("zscore", 3, R, ONE_KEY),
    spec("zmscore", -3, R, ONE_KEY),
    spec("zcard", 2, R, ONE_KEY),
    spec("zrank", -3, R, ONE_KEY),
    spec("zrevrank", -3, R, ONE_KEY),
    spec("zcount", 4, R, ONE_KEY),
    spec("zlexcount", 4, R, ONE_KEY),
    spec("zrange", -4, R, ONE_KEY),
    spec("zrevrange", -4, R, ONE_KEY),
    spec("zrangebyscore", -4, R, ONE_KEY),
    spec("zrevrangebyscore", -4, R, ONE_KEY),
    spec("zrangebylex", -4, R, ONE_KEY),
    spec("zrevrangebylex", -4, R, ONE_KEY),
    spec("zrangestore", -5, G, TWO_KEYS),
    spec("zrem", -3, W, ONE_KEY),
    spec("zremrangebyrank", 4, W, ONE_KEY),
    spec("zremrangebyscore", 4, W, ONE_KEY),
    spec("zremrangebylex", 4, W, ONE_KEY),
    spec("zpopmin", -2, W, ONE_KEY),
    spec("zpopmax", -2, W, ONE_KEY),
    spec("zmpop", -4, W, COUNTED),
    spec("bzpopmin", -3, WRITE | BLOCKING, ALL_BUT_LAST),
    spec("bzpopmax", -3, WRITE | BLOCKING, ALL_BUT_LAST),
    spec("bzmpop", -5, WRITE | BLOCKING, KeySpec::Counted { at: 2 }),
    spec("zrandmember", -2, R, ONE_KEY),
    spec("zunion", -3, R, COUNTED),
    spec("zinter", -3, R, COUNTED),
    spec("zdiff", -3, R, COUNTED),
    spec("zunionstore", -4, G, STORE_COUNTED),
    spec("zinterstore", -4, G, STORE_COUNTED),
    spec("zdiffstore", -4, G, STORE_COUNTED),
    spec("zintercard", -3, R, COUNTED),
    spec("zscan", -3, R, ONE_KEY),
    // OBJECT's key is its third word (OBJECT ENCODING key); it reads the stored object's
    // encoding and access stamp, so it runs on the node like the database-wide commands.
    spec(
        "object",
        -2,
        READ_ONLY | DATABASE | NO_SCRIPT,
        KeySpec::Range {
            first: 2,
            last: 2,
            step: 1,
        },
    ),
    // MEMORY USAGE key: the key is the third word too.
    spec(
        "memory",
        -2,
        READ_ONLY | DATABASE | NO_SCRIPT,
        KeySpec::Range {
            first: 2,
            last: 2,
            step: 1,
        },
    ),
    session("command", -1, ADMIN | NO_SCRIPT, NO_KEYS, Session::CommandInfo),
    session("info", -1, ADMIN, NO_KEYS, Session::Info),
    session("config", -2, ADMIN | NO_SCRIPT, NO_KEYS, Session::Config),
    session("multi", 1, NO_SCRIPT, NO_KEYS, Session::Multi),
    session("exec", 1, NO_SCRIPT, NO_KEYS, Session::Exec),
    session("discard", 1, NO_SCRIPT, NO_KEYS, Session::Discard),
    session("watch", -2, NO_SCRIPT, ALL_KEYS, Session::Watch),
    session("unwatch", 1, NO_SCRIPT, NO_KEYS, Session::Unwatch),
    session("save", 1, ADMIN | NO_SCRIPT, NO_KEYS, Session::Save),
    session("bgsave", 1, ADMIN | NO_SCRIPT, NO_KEYS, Session::BgSave),
    session("client", -2, ADMIN | NO_SCRIPT, NO_KEYS, Session::Client),
    session("cluster", -2, ADMIN | NO_SCRIPT, NO_KEYS, Session::Cluster),
    session("function", -2, ADMIN | NO_SCRIPT, NO_KEYS, Session::Function),
    session(
        "fcall",
        -3,
        WRITE | NO_SCRIPT,
        KeySpec::Counted { at: 2 },
        Session::FCall,
    ),
    session(
        "fcall_ro",
        -3,
        READ_ONLY | NO_SCRIPT,
        KeySpec::Counted { at: 2 },
        Session::FCallRo,
    ),
    session("eval", -3, WRITE | NO_SCRIPT, KeySpec::Counted { at: 2 }, Session::Eval),
    session(
        "eval_ro",
        -3,
        READ_ONLY | NO_SCRIPT,
        KeySpec::Counted { at: 2 },
        Session::EvalRo,
    ),
    session(
        "evalsha",
        -3,
        WRITE | NO_SCRIPT,
        KeySpec::Counted { at: 2 },
        Session::EvalSha,
    ),
    session(
        "evalsha_ro",
        -3,
        READ_ONLY | NO_SCRIPT,
        KeySpec::Counted { at: 2 },
        Session::EvalShaRo,
    ),
    session("script", -2, NO_SCRIPT, NO_KEYS, Session::Script),
];

/// Longest command name served: a longer word is no command, and a name is lowered
/// into a buffer this long on the stack.
const MAX_NAME_BYTES: usize = 32;

/// The table by lower-case name: every command of a pipeline is looked up several times
/// (parse, keys, execution), and a scan of the table was a tenth of a pipelined HSET.
static BY_NAME: std::sync::LazyLock<
    std::collections::HashMap<&'static [u8], &'static CommandSpec, ahash::RandomState>,
> = std::sync::LazyLock::new(|| COMMANDS.iter().map(|spec| (spec.name.as_bytes(), spec)).collect());

/// The command named `name` (any case), if served.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > MAX_NAME_BYTES {
        return None;
    }
    let mut lower = [0u8; MAX_NAME_BYTES];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    BY_NAME.get(&*lower).copied()
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
            KeySpec::Counted { at } => counted(words, at),
            KeySpec::StoreCounted { at } => match words.get(1) {
                Some(destination) => std::iter::once(destination).chain(counted(words, at)).collect(),
                None => Vec::new(),
            },
        }
    }

    /// COMMAND INFO's entry: name, arity, flags, first key, last key, step.
    pub fn info(&self) -> Reply {
        let mut flags = Vec::new();
        for (flag, name) in [
            (WRITE, "write"),
            (DENY_OOM, "denyoom"),
            (READ_ONLY, "readonly"),
            (ADMIN, "admin"),
            (NO_SCRIPT, "noscript"),
            (BLOCKING, "blocking"),
        ] {
            if self.is(flag) {
                flags.push(Reply::Simple(name.into()));
            }
        }
        if matches!(self.keys, KeySpec::Counted { .. } | KeySpec::StoreCounted { .. }) {
            flags.push(Reply::Simple("movablekeys".into()));
        }
        let (first, last, step) = match self.keys {
            KeySpec::None | KeySpec::Counted { .. } => (0, 0, 0),
            KeySpec::StoreCounted { .. } => (1, 1, 1),
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

/// The keys after a count at word `at` (none if the count is not a number or runs past
/// the words).
fn counted(words: &[Bytes], at: usize) -> Vec<&Bytes> {
    let count = words
        .get(at)
        .and_then(|word| std::str::from_utf8(word).ok())
        .and_then(|text| text.parse::<usize>().ok());
    match count {
        Some(count) if at + count < words.len() => words[at + 1..=at + count].iter().collect(),
        _ => Vec::new(),
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
        // Redis's `denyoom`: what may grow memory, not every write.
        assert!(set.is(DENY_OOM) && lookup(b"lpush").unwrap().is(DENY_OOM));
        assert!(!lookup(b"del").unwrap().is(DENY_OOM) && !lookup(b"lpop").unwrap().is(DENY_OOM));
        assert_eq!(lookup(b"bgrewriteaof"), None);
        assert_eq!(lookup(&[b'x'; 100]), None);
        assert!(COMMANDS.iter().all(|spec| spec.name.len() <= MAX_NAME_BYTES
            && spec.name == spec.name.to_ascii_lowercase()
            && lookup(spec.name.to_ascii_uppercase().as_bytes()) == Some(spec)));
        assert_eq!(
            lookup(b"mset").unwrap().info(),
            Reply::Array(vec![
                Reply::text("mset"),
                Reply::Integer(-3),
                Reply::Array(vec![Reply::Simple("write".into()), Reply::Simple("denyoom".into())]),
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
