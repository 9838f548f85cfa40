//! Lua storage functions in the Redis Functions library format, for both sides.
//!
//! A library (`#!lua name=LIB` then Lua calling `redis.register_function`) is stored in
//! the tenant's table [`catalog::TABLE`] by the storage function `lua.load`; `FCALL f`
//! is the invocation `fcall.f`, served by one storage function ([`fcall::run`]) that
//! reads the catalog through its `Ctx` (so the library is fetched by name and hash by
//! whichever side runs it, and a library replaced meanwhile is an OCC conflict), takes a
//! VM for that tenant and text from this process's cache, and runs the function in it with every
//! `redis.call` going through the same `Ctx`. So a Lua function runs on the storage node
//! over local tables, or on a client over remote reads with OCC, exactly like a Rust one,
//! and is placed by the same policies.
//!
//! - [`library`]: the header, names, flags, the text's hash;
//! - [`vm`]: the sandboxed VM, its instruction budget and memory cap, one call driven as a
//!   coroutine;
//! - `pause`: pausing a running call from another thread when its slice's bell rings;
//! - [`call`]: `redis.call`'s commands against a `Ctx`;
//! - [`listing`]: KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHDB and FLUSHALL in a script, over the
//!   `Ctx`'s listings;
//! - [`convert`]: Lua values and replies, by Redis's rules;
//! - [`cjson`], [`cmsgpack`], [`lua_struct`]: the `cjson`, `cmsgpack` and `struct`
//!   libraries Redis preloads (`bit` is Lua, in the prelude), the last two over [`clib`]:
//!   plain-string errors and Lua's argument checks, as Redis's C libraries have;
//! - [`kill`]: FUNCTION KILL and SCRIPT KILL: a tenant's running calls and the flags that
//!   stop them;
//! - [`cache`]: loaded libraries by tenant and hash, with idle VMs;
//! - [`catalog`]: `lua.load`, `lua.delete`, `lua.list` over the catalog table;
//! - [`fcall`]: the FCALL invocation's arguments, route and storage function;
//! - [`script`]: EVAL/EVALSHA and SCRIPT, scripts named by SHA-1 run as one-function
//!   libraries;
//! - [`resp`]: FUNCTION, FCALL and data commands of a RESP front end as invocations.
//!
//! No I/O, no clock: the sandbox has no `os`, `io`, `require`, `load` or `print`.

pub mod cache;
pub mod call;
pub mod catalog;
pub mod cjson;
pub mod clib;
pub mod cmsgpack;
pub mod convert;
pub mod fcall;
pub mod kill;
pub mod library;
pub mod listing;
pub mod lua_struct;
mod pause;
pub mod resp;
pub mod script;
pub mod vm;

use ferry_func::registry::RegisterError;
use ferry_func::Registry;

pub use fcall::FcallArgs;

/// A library that cannot be loaded, with Redis's wording (`ERR …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LuaError(pub String);

impl LuaError {
    /// `ERR message`.
    pub fn library(message: impl std::fmt::Display) -> LuaError {
        let message = message.to_string();
        if message.starts_with("ERR ") {
            LuaError(message)
        } else {
            LuaError(format!("ERR {message}"))
        }
    }
}

/// Adds the Lua storage functions (`lua.load`, `lua.delete`, `lua.flush`, `lua.list`, `resp.command`
/// and the `fcall.` family) to `registry`.
pub fn install(registry: &mut Registry) -> Result<(), RegisterError> {
    // All of them are bounded: management calls finish in microseconds (a library's load
    // code runs under the instruction budget), and Lua calls pause by their hook.
    registry.register_bounded(catalog::LOAD, catalog::load)?;
    registry.register_bounded(catalog::DELETE, catalog::delete)?;
    registry.register_bounded(catalog::FLUSH, catalog::flush)?;
    registry.register_bounded(catalog::LIST, catalog::list)?;
    registry.register_bounded(catalog::DUMP, catalog::dump)?;
    registry.register_bounded(catalog::RESTORE, catalog::restore)?;
    registry.register_bounded(resp::COMMAND, resp::command)?;
    registry.register_bounded(script::LOAD, script::load)?;
    registry.register_bounded(script::EXISTS, script::exists)?;
    registry.register_bounded(script::FLUSH, script::flush)?;
    registry.register_bounded_family(script::FAMILY, script::run, script::route)?;
    registry.register_bounded_family(fcall::FAMILY, fcall::run, fcall::route)
}

/// The built-in functions and the Lua ones: what every ferry process runs.
pub fn registry() -> Registry {
    let mut registry = Registry::with_builtins();
    // Invariant: these names are valid and distinct from the built-ins (a unit test runs it).
    install(&mut registry).expect("Lua function names are valid and unique");
    registry
}
