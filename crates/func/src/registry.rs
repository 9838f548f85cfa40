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

/// Longest function name; names travel in every invoke request.
pub const MAX_FUNCTION_NAME_BYTES: usize = 128;

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
    functions: HashMap<String, StorageFn>,
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
        for (name, function) in crate::builtins::ALL {
            // Invariant: built-in names are valid and distinct (checked by a unit test).
            registry
                .register(name, *function)
                .expect("built-in names are valid and unique");
        }
        registry
    }

    /// Adds a function under `name`.
    pub fn register(&mut self, name: &str, function: StorageFn) -> Result<(), RegisterError> {
        let valid_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-';
        if name.is_empty() || name.len() > MAX_FUNCTION_NAME_BYTES || !name.chars().all(valid_char) {
            return Err(RegisterError::BadName(name.to_string()));
        }
        if self.functions.contains_key(name) {
            return Err(RegisterError::Duplicate(name.to_string()));
        }
        self.functions.insert(name.to_string(), function);
        Ok(())
    }

    /// The function registered under `name`.
    pub fn get(&self, name: &str) -> Option<StorageFn> {
        self.functions.get(name).copied()
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
}
