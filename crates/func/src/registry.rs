//! Storage functions by name.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use thiserror::Error;

use crate::ctx::{Ctx, CtxError};

/// Future of one invocation: the function's result bytes or why it failed.
pub type FnFuture<'a> = Pin<Box<dyn Future<Output = Result<Bytes, FnError>> + Send + 'a>>;

/// A storage function: `fn f(ctx: &mut dyn Ctx) -> FnFuture<'_> { Box::pin(async move { .. }) }`.
pub type StorageFn = for<'a> fn(&'a mut dyn Ctx) -> FnFuture<'a>;

/// Where an invocation should run in a sharded cluster: the key its arguments say it
/// starts from (the node serving that key runs it), or `None` if they name none. Must be
/// cheap and must not fail on any input: bad arguments are the function's to report.
pub type RouteFn = fn(&Bytes) -> Option<Bytes>;

/// Longest function name; names travel in every invoke request.
pub const MAX_FUNCTION_NAME_BYTES: usize = 128;

/// A function name (or family prefix): non-empty, bounded, `[A-Za-z0-9_.-]`.
fn valid_name(name: &str) -> bool {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-';
    !name.is_empty() && name.len() <= MAX_FUNCTION_NAME_BYTES && name.chars().all(valid_char)
}

/// Why an invocation failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FnError {
    /// A data access failed (a conflict is retried by the runtime, the rest are reported).
    #[error(transparent)]
    Ctx(#[from] CtxError),
    /// The arguments could not be parsed.
    #[error("bad arguments: {0}")]
    BadArgs(String),
    /// The function itself reported a failure.
    #[error("{0}")]
    Failed(String),
}

/// The message of a panic payload, so a runtime can report a panicking function as
/// `function panicked: <message>` identically on both sides.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}

/// Functions by name. Built once at start-up and shared read-only.
#[derive(Clone, Default)]
pub struct Registry {
    functions: HashMap<String, Entry>,
    /// Families of functions named `PREFIX<name>`, served by one entry that reads the
    /// name from its arguments (Lua functions loaded at run time: `fcall.<name>`).
    families: Vec<(String, Entry)>,
}

#[derive(Clone, Copy)]
struct Entry {
    function: StorageFn,
    route: Option<RouteFn>,
    /// Never holds its thread for long: it finishes in microseconds or pauses by itself
    /// (a Lua call, paused by its hook). A storage node runs it on the core that read the
    /// request; any other function runs on a worker thread the watchdog may replace.
    bounded: bool,
}

/// A function name that cannot be registered.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RegisterError {
    /// Empty, too long, or not `[A-Za-z0-9_.-]`.
    #[error("invalid function name {0:?}")]
    BadName(String),
    /// Already registered.
    #[error("function {0:?} is already registered")]
    Duplicate(String),
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry holding the built-in functions (see [`crate::builtins`]).
    pub fn with_builtins() -> Registry {
        let mut registry = Registry::new();
        for (name, function, route) in crate::builtins::ALL {
            // Invariant: built-in names are valid and distinct (checked by a unit test).
            registry
                .register_routed(name, *function, *route)
                .expect("built-in names are valid and unique");
        }
        registry
    }

    /// Adds a function under `name`.
    pub fn register(&mut self, name: &str, function: StorageFn) -> Result<(), RegisterError> {
        self.insert(
            name,
            Entry {
                function,
                route: None,
                bounded: false,
            },
        )
    }

    /// Adds a function under `name` that never holds its thread for long (it finishes in
    /// microseconds or pauses by itself); see [`Registry::bounded`].
    pub fn register_bounded(&mut self, name: &str, function: StorageFn) -> Result<(), RegisterError> {
        self.insert(
            name,
            Entry {
                function,
                route: None,
                bounded: true,
            },
        )
    }

    /// Registers `function` under `name` with the way its arguments name its routing key:
    /// in a sharded cluster it is sent to the node serving that key.
    pub fn register_routed(&mut self, name: &str, function: StorageFn, route: RouteFn) -> Result<(), RegisterError> {
        self.insert(
            name,
            Entry {
                function,
                route: Some(route),
                bounded: false,
            },
        )
    }

    /// Registers one `function` for every name that starts with `prefix` (which must end
    /// in `.`), for functions defined at run time: the invocation name keeps each one's
    /// cost profile apart, and `function` finds out which one it is from its arguments.
    /// A name registered exactly takes precedence.
    pub fn register_family(&mut self, prefix: &str, function: StorageFn, route: RouteFn) -> Result<(), RegisterError> {
        self.insert_family(prefix, function, route, false)
    }

    /// [`Registry::register_family`] for functions that never hold their thread for long
    /// (Lua calls, paused by their hook); see [`Registry::bounded`].
    pub fn register_bounded_family(
        &mut self,
        prefix: &str,
        function: StorageFn,
        route: RouteFn,
    ) -> Result<(), RegisterError> {
        self.insert_family(prefix, function, route, true)
    }

    fn insert_family(
        &mut self,
        prefix: &str,
        function: StorageFn,
        route: RouteFn,
        bounded: bool,
    ) -> Result<(), RegisterError> {
        if !prefix.ends_with('.') || !valid_name(prefix) {
            return Err(RegisterError::BadName(prefix.to_string()));
        }
        if self.families.iter().any(|(existing, _)| existing == prefix) {
            return Err(RegisterError::Duplicate(prefix.to_string()));
        }
        let entry = Entry {
            function,
            route: Some(route),
            bounded,
        };
        self.families.push((prefix.to_string(), entry));
        Ok(())
    }

    fn insert(&mut self, name: &str, entry: Entry) -> Result<(), RegisterError> {
        if !valid_name(name) {
            return Err(RegisterError::BadName(name.to_string()));
        }
        if self.functions.contains_key(name) {
            return Err(RegisterError::Duplicate(name.to_string()));
        }
        self.functions.insert(name.to_string(), entry);
        Ok(())
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.functions.get(name).or_else(|| {
            self.families
                .iter()
                .find(|(prefix, _)| name.len() > prefix.len() && name.starts_with(prefix.as_str()))
                .map(|(_, entry)| entry)
        })
    }

    /// The function registered under `name` (or the family `name` belongs to).
    pub fn get(&self, name: &str) -> Option<StorageFn> {
        self.entry(name).map(|entry| entry.function)
    }

    /// Whether `name` was registered as never holding its thread for long (false for an
    /// unknown name): a storage node runs it on the core that read the request.
    pub fn bounded(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|entry| entry.bounded)
    }

    /// The routing key of an invocation of `name` with `args`: `None` for an unknown
    /// function, one registered without a route, or arguments that name no key.
    pub fn route(&self, name: &str, args: &Bytes) -> Option<Bytes> {
        self.entry(name)?.route?(args)
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.functions.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_register_and_bad_names_are_refused() {
        let registry = Registry::with_builtins();
        for name in ["noop", "traverse", "ycsbt", "aggregate", "auth"] {
            assert!(registry.get(name).is_some(), "{name} missing");
        }
        let mut registry = Registry::with_builtins();
        let noop = registry.get("noop").unwrap();
        assert_eq!(
            registry.register("noop", noop),
            Err(RegisterError::Duplicate("noop".into()))
        );
        assert!(matches!(
            registry.register("has space", noop),
            Err(RegisterError::BadName(_))
        ));
        assert!(matches!(registry.register("", noop), Err(RegisterError::BadName(_))));
    }

    #[test]
    fn routes_name_the_key_a_function_starts_from() {
        use crate::builtins::{auth, traverse, ycsbt};
        let registry = Registry::with_builtins();
        let walk = traverse::TraverseArgs {
            start: 7,
            depth: 3,
            compute_ns: 0,
        };
        assert_eq!(registry.route("traverse", &walk.encode()), Some(traverse::key(7)));
        let transfer = ycsbt::YcsbtArgs::Transfer {
            from: 5,
            to: 9,
            amount: 1,
            compute_ns: 0,
        };
        assert_eq!(registry.route("ycsbt", &transfer.encode()), Some(traverse::key(5)));
        let check = auth::AuthArgs {
            user: auth::username(3),
            password: auth::password(3),
        };
        assert_eq!(registry.route("auth", &check.encode()), Some(auth::username(3)));
        // No key: no data touched, garbage arguments, unknown or unrouted functions.
        assert_eq!(registry.route("noop", &Bytes::new()), None);
        assert_eq!(registry.route("traverse", &Bytes::from_static(b"junk")), None);
        assert_eq!(registry.route("nope", &walk.encode()), None);
        let mut plain = Registry::new();
        plain.register("walk", traverse::run).unwrap();
        assert_eq!(plain.route("walk", &walk.encode()), None);
    }

    #[test]
    fn a_family_serves_every_name_under_its_prefix() {
        use crate::builtins::{noop, traverse};
        let mut registry = Registry::with_builtins();
        let first_eight = |args: &Bytes| Some(args.slice(..args.len().min(8)));
        registry.register_family("walk.", traverse::run, first_eight).unwrap();
        assert!(registry.get("walk.a").is_some());
        assert!(registry.get("walk.").is_none(), "the bare prefix names nothing");
        assert!(registry.get("walker").is_none());
        assert_eq!(
            registry.route("walk.b", &Bytes::from_static(b"0123456789")),
            Some(Bytes::from_static(b"01234567"))
        );
        // An exact name wins over the family.
        registry.register("walk.noop", noop::run).unwrap();
        assert_eq!(registry.route("walk.noop", &Bytes::from_static(b"0123456789")), None);
        assert!(matches!(
            registry.register_family("walk.", traverse::run, first_eight),
            Err(RegisterError::Duplicate(_))
        ));
        assert!(matches!(
            registry.register_family("nodot", traverse::run, first_eight),
            Err(RegisterError::BadName(_))
        ));
    }
}
