//! CONFIG GET / SET / RESETSTAT / REWRITE over the parameters a Redis client or Redis's
//! own test suite reads and sets, answered from one table.
//!
//! Each parameter is one of three kinds (docs/ARCHITECTURE.md, "Speaking Redis", lists them):
//!
//! - **per tenant**: `maxmemory` and `maxmemory-policy` (the connected tenant's memory
//!   limit and eviction policy) and Redis's encoding thresholds (`hash-max-listpack-entries`
//!   and the others: when the tenant's collections leave their compact encodings), read
//!   from and set through the process that holds its data ([`TenantParams`]); a process
//!   that holds none (a gateway) does not list them.
//! - **fixed**: ferry's real value (`databases`, `proto-max-bulk-len`, …). CONFIG SET to
//!   the value it has is accepted; any other value is refused with Redis's "can't set
//!   immutable config" error, because ferry does not change it at run time.
//! - **no effect**: `list-compress-depth`. ferry does not compress list nodes; the value
//!   is checked, kept and reported, and changes nothing (no command's answer depends on
//!   it, and clients and Redis's tests set it before their commands).
//!
//! The other settings are the listener's (one per process), as Redis's are the server's.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::command::wrong_arity;
use crate::glob::matches;
use crate::parser::MAX_BULK_BYTES;
use crate::Reply;

/// What a CONFIG SET of a parameter does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// ferry's real value; only a SET to that value is accepted.
    Fixed,
    /// Kept and reported, with no effect; the value must be a whole number ≥ `min`.
    NoEffectNumber { min: i64 },
    /// The connected tenant's, through [`TenantParams`].
    PerTenant,
}

/// The parameters a process keeps per tenant, for CONFIG: read from and set through it.
pub trait TenantParams {
    /// The tenant's value of `name` (a [`PER_TENANT`] parameter); `None` if the process
    /// keeps none.
    fn value(&self, name: &str) -> Option<String>;
    /// Checks every pair, then sets them all, or refuses with why (nothing set then).
    fn set(&self, pairs: &[(&'static str, String)]) -> Result<(), String>;
}

/// For a connection that keeps no per-tenant parameters.
pub struct NoTenantParams;

impl TenantParams for NoTenantParams {
    fn value(&self, _name: &str) -> Option<String> {
        None
    }
    fn set(&self, _pairs: &[(&'static str, String)]) -> Result<(), String> {
        Err("not kept by this process".into())
    }
}

/// The per-tenant parameters' names.
pub const PER_TENANT: [&str; 10] = [
    "maxmemory",
    "maxmemory-policy",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "list-max-listpack-size",
    "set-max-intset-entries",
    "set-max-listpack-entries",
    "set-max-listpack-value",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
];

/// A memory size as Redis's CONFIG takes it: bytes, or a whole number with `k`, `kb`, `m`,
/// `mb`, `g` or `gb` (any case; `k` is 1000, `kb` 1024, as in Redis).
pub fn memory_bytes(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let split = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let multiplier: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(multiplier)
}

/// One parameter: its name, value at start and kind.
struct Param {
    name: &'static str,
    initial: fn() -> String,
    kind: Kind,
}

const fn fixed(name: &'static str, initial: fn() -> String) -> Param {
    Param {
        name,
        initial,
        kind: Kind::Fixed,
    }
}

const fn per_tenant(name: &'static str) -> Param {
    Param {
        name,
        initial: String::new,
        kind: Kind::PerTenant,
    }
}

/// Most databases, as `SELECT` takes them (the listener's bound).
pub const DATABASES: u32 = 1024;

/// The table that holds database `index` (SELECT's argument).
pub fn database_table(index: u32) -> String {
    format!("db{index}")
}

/// Every parameter CONFIG knows. Redis's old names (`*-ziplist-*`) are aliases of the
/// listpack ones, as in Redis 7.
const PARAMS: &[Param] = &[
    fixed("databases", || DATABASES.to_string()),
    fixed("proto-max-bulk-len", || MAX_BULK_BYTES.to_string()),
    per_tenant("maxmemory"),
    per_tenant("maxmemory-policy"),
    // Durability is ferry's own log and snapshots (`--wal-dir`), not RDB or AOF.
    fixed("save", String::new),
    fixed("appendonly", || "no".into()),
    fixed("lazyfree-lazy-user-flush", || "no".into()),
    per_tenant("hash-max-listpack-entries"),
    per_tenant("hash-max-listpack-value"),
    per_tenant("list-max-listpack-size"),
    Param {
        name: "list-compress-depth",
        initial: || "0".into(),
        kind: Kind::NoEffectNumber { min: 0 },
    },
    per_tenant("set-max-intset-entries"),
    per_tenant("set-max-listpack-entries"),
    per_tenant("set-max-listpack-value"),
    per_tenant("zset-max-listpack-entries"),
    per_tenant("zset-max-listpack-value"),
];

/// Redis 7's old names of the listpack parameters.
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
];

/// Most patterns or parameter-value pairs one CONFIG call takes: bounds its work.
pub const MAX_CONFIG_ARGS: usize = 256;

/// The listener's parameter values.
#[derive(Debug)]
pub struct Settings {
    values: BTreeMap<&'static str, String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            values: PARAMS.iter().map(|param| (param.name, (param.initial)())).collect(),
        }
    }
}

fn param(name: &str) -> Option<&'static Param> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or(name, |(_, canonical)| canonical);
    PARAMS.iter().find(|param| param.name.eq_ignore_ascii_case(name))
}

impl Settings {
    /// Runs `CONFIG words…` (the words after CONFIG, the subcommand first), with the
    /// connected tenant's parameters from `tenant`.
    pub fn run(&mut self, words: &[Bytes], tenant: &dyn TenantParams) -> Reply {
        let Some((sub, rest)) = words.split_first() else {
            return wrong_arity("config");
        };
        let sub = String::from_utf8_lossy(sub).to_ascii_uppercase();
        if rest.len() > MAX_CONFIG_ARGS * 2 {
            return Reply::err(format!("CONFIG takes at most {MAX_CONFIG_ARGS} parameters"));
        }
        match sub.as_str() {
            "GET" if !rest.is_empty() => self.get(rest, tenant),
            "SET" if !rest.is_empty() && rest.len() % 2 == 0 => self.set(rest, tenant),
            "RESETSTAT" if rest.is_empty() => Reply::ok(),
            "REWRITE" if rest.is_empty() => Reply::err("The server is running without a config file"),
            "GET" | "SET" | "RESETSTAT" | "REWRITE" => wrong_arity(&format!("config|{}", sub.to_ascii_lowercase())),
            _ => Reply::err(format!(
                "unknown subcommand '{}'. Try CONFIG GET, SET, RESETSTAT or REWRITE.",
                sub.chars().take(64).collect::<String>()
            )),
        }
    }

    /// The value of parameter `name` (any case, aliases too).
    pub fn value(&self, name: &str) -> Option<&str> {
        param(name).map(|param| self.values[param.name].as_str())
    }

    /// Every parameter matching any of `patterns` (Redis globs), each once, as a map.
    fn get(&self, patterns: &[Bytes], tenant: &dyn TenantParams) -> Reply {
        let tenant_values: Vec<(&str, String)> = PER_TENANT
            .iter()
            .filter_map(|name| Some((*name, tenant.value(name)?)))
            .collect();
        let mut matched: BTreeMap<&str, &str> = BTreeMap::new();
        for pattern in patterns {
            let lower = pattern.to_ascii_lowercase();
            for (name, value) in &self.values {
                if matches(&lower, name.as_bytes()) && !PER_TENANT.contains(name) {
                    matched.insert(name, value);
                }
            }
            for (name, value) in &tenant_values {
                if matches(&lower, name.as_bytes()) {
                    matched.insert(name, value);
                }
            }
            for (alias, canonical) in ALIASES {
                if !matches(&lower, alias.as_bytes()) {
                    continue;
                }
                let tenant_value = tenant_values.iter().find(|(name, _)| name == canonical);
                match tenant_value {
                    Some((_, value)) => matched.insert(alias, value),
                    None if PER_TENANT.contains(canonical) => None,
                    None => matched.insert(alias, &self.values[canonical]),
                };
            }
        }
        Reply::Map(
            matched
                .into_iter()
                .map(|(name, value)| (Reply::text(name), Reply::text(value)))
                .collect(),
        )
    }

    /// Sets every pair or none: each is checked before any is applied, as Redis does.
    fn set(&mut self, pairs: &[Bytes], tenant: &dyn TenantParams) -> Reply {
        let mut changes = Vec::with_capacity(pairs.len() / 2);
        let mut tenant_changes = Vec::new();
        for pair in pairs.chunks(2) {
            let name = String::from_utf8_lossy(&pair[0]);
            let value = String::from_utf8_lossy(&pair[1]).into_owned();
            let Some(param) = param(&name) else {
                return Reply::err(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{}'",
                    name.chars().take(128).collect::<String>()
                ));
            };
            if changes
                .iter()
                .chain(&tenant_changes)
                .any(|(known, _)| *known == param.name)
            {
                return Reply::err(format!(
                    "CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
                ));
            }
            let refusal = |why: &str| {
                Reply::err(format!(
                    "CONFIG SET failed (possibly related to argument '{}') - {why}",
                    param.name
                ))
            };
            match param.kind {
                Kind::Fixed if !self.values[param.name].eq_ignore_ascii_case(&value) => {
                    return refusal("can't set immutable config")
                }
                Kind::Fixed => {}
                Kind::NoEffectNumber { min } => match value.parse::<i64>() {
                    Ok(n) if n >= min => {}
                    _ => return refusal("argument must be a whole number in range"),
                },
                Kind::PerTenant => {
                    tenant_changes.push((param.name, value));
                    continue;
                }
            }
            changes.push((param.name, value));
        }
        if !tenant_changes.is_empty() {
            if let Err(why) = tenant.set(&tenant_changes) {
                return Reply::err(format!("CONFIG SET failed - {why}"));
            }
        }
        for (name, value) in changes {
            self.values.insert(name, value);
        }
        Reply::ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::cell::RefCell;

    /// A tenant's parameters as a process would keep them; refuses a policy named `bad`.
    #[derive(Default)]
    struct Tenant(RefCell<BTreeMap<&'static str, String>>);

    impl TenantParams for Tenant {
        fn value(&self, name: &str) -> Option<String> {
            let default = match name {
                "maxmemory" => "1000",
                "maxmemory-policy" => "noeviction",
                _ => "128",
            };
            Some(self.0.borrow().get(name).cloned().unwrap_or_else(|| default.into()))
        }
        fn set(&self, pairs: &[(&'static str, String)]) -> Result<(), String> {
            if pairs.iter().any(|(_, value)| value == "bad") {
                return Err("bad value".into());
            }
            self.0.borrow_mut().extend(pairs.iter().cloned());
            Ok(())
        }
    }

    fn words(text: &str) -> Vec<Bytes> {
        text.split(' ').map(|w| Bytes::from(w.to_owned())).collect()
    }

    fn pairs(reply: Reply) -> Vec<(String, String)> {
        let Reply::Map(pairs) = reply else {
            panic!("a map: {reply:?}")
        };
        pairs
            .into_iter()
            .map(|(k, v)| match (k, v) {
                (Reply::Bulk(k), Reply::Bulk(v)) => (
                    String::from_utf8(k.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                ),
                other => panic!("bulk pairs: {other:?}"),
            })
            .collect()
    }

    impl Settings {
        fn run_for(&mut self, words: &[Bytes]) -> Reply {
            self.run(words, &Tenant::default())
        }
    }

    #[test]
    fn per_tenant_parameters_are_read_and_set_through_the_tenant_all_or_nothing() {
        let mut settings = Settings::default();
        let tenant = Tenant::default();
        let set = "SET maxmemory 2mb maxmemory-policy allkeys-lru hash-max-ziplist-entries 9";
        assert_eq!(settings.run(&words(set), &tenant), Reply::ok());
        assert_eq!(tenant.value("maxmemory").as_deref(), Some("2mb"));
        assert_eq!(tenant.value("hash-max-listpack-entries").as_deref(), Some("9"));
        let got = pairs(settings.run(&words("GET hash-max-*-entries"), &tenant));
        assert_eq!(
            got,
            vec![
                ("hash-max-listpack-entries".into(), "9".into()),
                ("hash-max-ziplist-entries".into(), "9".into())
            ]
        );
        // The tenant refuses: nothing of the call is set.
        let reply = settings.run(&words("SET maxmemory-policy bad zset-max-listpack-entries 3"), &tenant);
        assert!(
            matches!(&reply, Reply::Error(text) if text.contains("bad value")),
            "{reply:?}"
        );
        assert_eq!(tenant.value("zset-max-listpack-entries").as_deref(), Some("128"));
        // A process that keeps none neither lists nor sets them.
        assert!(pairs(settings.run(&words("GET maxmemory*"), &NoTenantParams)).is_empty());
        assert!(matches!(
            settings.run(&words("SET maxmemory 1"), &NoTenantParams),
            Reply::Error(_)
        ));
    }

    #[test]
    fn memory_sizes_parse_in_redis_units() {
        assert_eq!(memory_bytes("0"), Some(0));
        assert_eq!(memory_bytes("100"), Some(100));
        assert_eq!(memory_bytes("1k"), Some(1000));
        assert_eq!(memory_bytes("1KB"), Some(1024));
        assert_eq!(memory_bytes("3mb"), Some(3 << 20));
        assert_eq!(memory_bytes("2g"), Some(2_000_000_000));
        for bad in ["", "mb", "-1", "1tb", "1.5mb", "99999999999999999999gb"] {
            assert_eq!(memory_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn get_matches_globs_and_aliases_once_each() {
        let mut settings = Settings::default();
        let got = pairs(settings.run_for(&words("GET maxmemory* maxmemory")));
        assert_eq!(
            got,
            vec![
                ("maxmemory".into(), "1000".into()),
                ("maxmemory-policy".into(), "noeviction".into())
            ]
        );
        let got = pairs(settings.run_for(&words("get list-max-ziplist-size")));
        assert_eq!(got, vec![("list-max-ziplist-size".into(), "128".into())]);
        assert!(pairs(settings.run_for(&words("GET nothing-like-this"))).is_empty());
        let all = pairs(settings.run_for(&words("GET *")));
        assert_eq!(all.len(), PARAMS.len() + ALIASES.len());
    }

    #[test]
    fn set_refuses_changing_fixed_ones() {
        let mut settings = Settings::default();
        // Setting a fixed parameter to the value it has is accepted.
        assert_eq!(settings.run_for(&words("SET appendonly no")), Reply::ok());
        let Reply::Error(text) = settings.run_for(&words("SET databases 3")) else {
            panic!("refused")
        };
        assert!(text.contains("immutable"), "{text}");
        assert_eq!(settings.run_for(&words("SET list-compress-depth 2")), Reply::ok());
        assert_eq!(settings.value("list-compress-depth"), Some("2"));
        assert!(matches!(
            settings.run_for(&words("SET list-compress-depth -1")),
            Reply::Error(_)
        ));
        let Reply::Error(text) = settings.run_for(&words("SET no-such-thing 1")) else {
            panic!("refused")
        };
        assert!(text.starts_with("ERR Unknown option"), "{text}");
    }

    #[test]
    fn bad_arity_and_subcommands_are_errors() {
        let mut settings = Settings::default();
        for bad in ["GET", "SET maxmemory", "RESETSTAT x", "BOGUS"] {
            assert!(matches!(settings.run_for(&words(bad)), Reply::Error(_)), "{bad}");
        }
        assert!(matches!(settings.run(&[], &NoTenantParams), Reply::Error(_)));
        assert_eq!(settings.run_for(&words("RESETSTAT")), Reply::ok());
    }
}
