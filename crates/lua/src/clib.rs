//! What the Rust-written libraries Redis preloads (`cmsgpack`, `struct`) share, so a script
//! meets them as it meets Redis's C ones: a failure is raised as a plain string, as
//! `luaL_error` raises it (not as mlua's error object carrying a Rust traceback), so a
//! script's `pcall` gets the text Redis gives; arguments are checked and coerced as
//! `luaL_check*` do, in Lua's words; and what one call may return, build or spend is
//! bounded, its work outside Lua charged to the call's instruction budget ([`Meter`]).

use mlua::{Function, IntoLua, Lua, MultiValue, Table, Value};

/// Most values one call may return: Lua 5.1's `LUAI_MAXCSTACK`, the stack a C function of
/// Redis's Lua has, past which its libraries raise `stack overflow`. Ferry's Lua 5.4 could
/// hold more; keeping Redis's bound keeps its error where Redis has it.
pub const MAX_RESULTS: usize = 8000;

/// Largest string one call may build. Nothing bigger fits in the VM that would hold it
/// ([`crate::vm::MAX_VM_MEMORY_BYTES`]); the bound is checked while building, since the
/// buffer is Rust's, outside the VM's memory cap, and a table holding itself many times
/// over would otherwise grow it without end.
pub const MAX_OUTPUT_BYTES: usize = crate::vm::MAX_VM_MEMORY_BYTES;

/// Instructions of the call's budget ([`crate::vm::INSTRUCTION_BUDGET`]) a value packed or
/// unpacked costs: what Lua runs (at ~6 ns an instruction) in the time mlua takes to read
/// or make a number, a boolean or a nil (measured: 80–160 ns). The hook counts only Lua's
/// own instructions; without this a library call could run for as long as its output
/// allows, outside the budget.
pub const VALUE_COST_INSTRUCTIONS: i64 = 30;

/// What a string costs instead (measured: 300–700 ns, the most for a map's keys).
pub const STRING_COST_INSTRUCTIONS: i64 = 120;

/// Work charged to the budget at once: often enough that a call overshoots its budget by
/// well under a millisecond, seldom enough that charging costs nothing.
const CHARGE_BATCH_INSTRUCTIONS: i64 = 10_000;

/// Work a library does outside Lua, charged to the running call's instruction budget in
/// batches.
pub struct Meter<'a> {
    /// The VM whose running call pays (its budget is the VM's app data).
    lua: &'a Lua,
    /// Counted, not yet charged.
    pending: i64,
}

impl<'a> Meter<'a> {
    /// Nothing charged yet.
    pub fn new(lua: &'a Lua) -> Meter<'a> {
        Meter { lua, pending: 0 }
    }

    /// Counts `instructions`; fails with the budget's message once the budget is gone.
    pub fn add(&mut self, instructions: i64) -> Result<(), LibError> {
        self.pending += instructions;
        if self.pending >= CHARGE_BATCH_INSTRUCTIONS {
            return self.flush();
        }
        Ok(())
    }

    /// Charges what is counted.
    pub fn flush(&mut self) -> Result<(), LibError> {
        let pending = std::mem::take(&mut self.pending);
        if crate::vm::charge(self.lua, pending) {
            Ok(())
        } else {
            Err(raised(crate::vm::budget_message()))
        }
    }
}

/// A library function's failure.
#[derive(Debug, thiserror::Error)]
pub enum LibError {
    /// What the script did wrong, in Lua's or Redis's words: raised as a plain string.
    #[error("{0}")]
    Raised(String),
    /// The VM's own failure: out of memory (raised as Lua raises it, `not enough memory`)
    /// or another of mlua's (raised as mlua raises it).
    #[error(transparent)]
    Lua(#[from] mlua::Error),
}

/// The body of a library function: its arguments, its results.
pub type Body = fn(&Lua, MultiValue) -> Result<MultiValue, LibError>;

/// `message`, raised as a plain string.
pub fn raised(message: impl Into<String>) -> LibError {
    LibError::Raised(message.into())
}

/// `luaL_argerror`'s failure: `bad argument #2 to 'unpack' (data string too short)`.
pub fn bad_argument(position: usize, function: &str, message: &str) -> LibError {
    raised(format!("bad argument #{position} to '{function}' ({message})"))
}

/// A value's type as Lua names it in messages.
pub fn type_name(value: Option<&Value>) -> &'static str {
    match value {
        None => "no value",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::LightUserData(_) | Value::UserData(_)) => "userdata",
        Some(value) => value.type_name(),
    }
}

/// `luaL_checklstring`: argument `position` (1-based) as a string; a number becomes one.
pub fn check_string(lua: &Lua, args: &MultiValue, position: usize, function: &str) -> Result<mlua::String, LibError> {
    let value = args.get(position - 1);
    if let Some(value @ (Value::String(_) | Value::Integer(_) | Value::Number(_))) = value {
        if let Some(text) = lua.coerce_string(value.clone())? {
            return Ok(text);
        }
    }
    let message = format!("string expected, got {}", type_name(value));
    Err(bad_argument(position, function, &message))
}

/// `luaL_checknumber`: argument `position` as a number; a numeric string becomes one.
/// Integers stay exact.
pub fn check_number(lua: &Lua, args: &MultiValue, position: usize, function: &str) -> Result<Value, LibError> {
    let value = args.get(position - 1);
    match value {
        Some(Value::Integer(_) | Value::Number(_)) => return Ok(value.cloned().unwrap_or(Value::Nil)),
        Some(text @ Value::String(_)) => {
            if let Some(integer) = lua.coerce_integer(text.clone())? {
                return Ok(Value::Integer(integer));
            }
            if let Some(number) = lua.coerce_number(text.clone())? {
                return Ok(Value::Number(number));
            }
        }
        _ => {}
    }
    let message = format!("number expected, got {}", type_name(value));
    Err(bad_argument(position, function, &message))
}

/// `luaL_optinteger`: argument `position` as an integer, `default` when absent or nil.
pub fn opt_integer(
    lua: &Lua,
    args: &MultiValue,
    position: usize,
    function: &str,
    default: i64,
) -> Result<i64, LibError> {
    match args.get(position - 1) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, position, function),
    }
}

/// `luaL_checkinteger`: argument `position` as an integer.
pub fn check_integer(lua: &Lua, args: &MultiValue, position: usize, function: &str) -> Result<i64, LibError> {
    let value = args.get(position - 1);
    if let Some(value @ (Value::Integer(_) | Value::Number(_) | Value::String(_))) = value {
        if let Some(integer) = lua.coerce_integer(value.clone())? {
            return Ok(integer);
        }
    }
    let message = match value {
        Some(Value::Number(_)) => "number has no integer representation".to_string(),
        other => format!("number expected, got {}", type_name(other)),
    };
    Err(bad_argument(position, function, &message))
}

/// Registry name of the wrapper below, compiled once per VM.
const WRAP_KEY: &str = "ferry.clib.wrap";

/// Turns a body's `true, results…` / `false, message` into results or a raised string;
/// level 0, as `luaL_error` in a C function adds no position.
const WRAP: &str = r#"
local error = error
local function check(ok, ...)
  if ok then return ... end
  error((...), 0)
end
return function(body)
  return function(...) return check(body(...)) end
end
"#;

/// A library table of `functions` (name, body), each raising its failures as plain strings.
pub fn library(lua: &Lua, functions: &[(&str, Body)]) -> mlua::Result<Table> {
    let wrap: Function = match lua.named_registry_value::<Option<Function>>(WRAP_KEY)? {
        Some(wrap) => wrap,
        None => {
            let wrap: Function = lua.load(WRAP).set_name("=clib").call(())?;
            lua.set_named_registry_value(WRAP_KEY, wrap.clone())?;
            wrap
        }
    };
    let table = lua.create_table_with_capacity(0, functions.len())?;
    for &(name, body) in functions {
        let raw = lua.create_function(move |lua, args: MultiValue| match body(lua, args) {
            Ok(mut results) => {
                results.push_front(Value::Boolean(true));
                Ok(results)
            }
            Err(LibError::Raised(message)) => {
                let message = Value::String(lua.create_string(message)?);
                Ok(MultiValue::from_vec(vec![Value::Boolean(false), message]))
            }
            // What Lua itself raises when the VM's memory cap is hit.
            Err(LibError::Lua(mlua::Error::MemoryError(_))) => Ok(MultiValue::from_vec(vec![
                Value::Boolean(false),
                "not enough memory".into_lua(lua)?,
            ])),
            Err(LibError::Lua(err)) => Err(err),
        })?;
        table.raw_set(name, wrap.call::<Function>(raw)?)?;
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fails(_: &Lua, _: MultiValue) -> Result<MultiValue, LibError> {
        Err(raised("plain words"))
    }

    fn echoes(lua: &Lua, args: MultiValue) -> Result<MultiValue, LibError> {
        let text = check_string(lua, &args, 1, "echo")?;
        let count = opt_integer(lua, &args, 2, "echo", 1)?;
        Ok(MultiValue::from_vec(vec![Value::String(text), Value::Integer(count)]))
    }

    #[test]
    fn failures_reach_the_script_as_plain_strings() {
        let lua = Lua::new();
        let lib = library(&lua, &[("fails", fails), ("echoes", echoes)]).unwrap();
        lua.globals().set("lib", lib).unwrap();
        let got: (bool, String) = lua.load("return pcall(lib.fails)").eval().unwrap();
        assert_eq!(got, (false, "plain words".to_string()));
        let got: (String, i64) = lua.load("return lib.echoes(12, '3')").eval().unwrap();
        assert_eq!(got, ("12".to_string(), 3));
        let got: (bool, String) = lua.load("return pcall(lib.echoes)").eval().unwrap();
        assert_eq!(got.1, "bad argument #1 to 'echo' (string expected, got no value)");
        let got: (bool, String) = lua.load("return pcall(lib.echoes, 'x', 1.5)").eval().unwrap();
        assert_eq!(
            got.1,
            "bad argument #2 to 'echo' (number has no integer representation)"
        );
    }
}
