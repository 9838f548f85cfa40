//! One sandboxed Lua VM holding one library, and a call of one of its functions driven as
//! a coroutine. A `redis.call` runs straight against the invocation's `Ctx` while that can
//! answer at once (`Ctx::immediate`: the storage node inside a poll's slice, an in-memory
//! store), with no yield; otherwise it yields the command here, it runs against the `Ctx`
//! (a yield point of the invocation, as for a Rust function: a node's slice ended, a
//! client's network read), and the coroutine resumes with the reply.
//!
//! Sharing the thread: a call whose `Ctx` gives it a [`Slice`] (a storage node's core,
//! which other tenants wait for) is paused when the slice's bell rings (`crate::pause`):
//! its coroutine yields, its future is pending once, and the coroutine resumes where it
//! stopped when polled again. Such a call runs with no hook and has no instruction budget:
//! as in Redis, a long function is allowed; it is bounded by its runtime's CPU time limit
//! (checked at every pause) and stopped from outside by FUNCTION KILL or SCRIPT KILL (its
//! [`Interrupt`], checked at every pause and resume), while it slows only its own tenant.
//!
//! Limits of a call with no slice (the app side, a test's in-memory `Ctx`): an instruction
//! budget per call, counted by a hook every [`HOOK_EVERY_INSTRUCTIONS`]; when it is gone the
//! hook yields the coroutine (or, where Lua cannot yield, raises an error the script's
//! `pcall` cannot keep), and the call ends with an error while the thread that ran it
//! carries on. A memory cap per VM. A VM that hit a limit is not reused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{
    ChunkMode, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Thread, ThreadStatus, Value, VmState,
};

use ferry_func::ctx::poll_now;
use ferry_func::{Ctx, CtxError, FnError, Interrupt, Slice};
use ferry_resp::table::lookup;
use ferry_resp::Reply;

use crate::convert::{command_arg, lua_to_reply, reply_to_lua};
use crate::library::{parse_header, valid_name, FunctionInfo, Header, KNOWN_FLAGS, MAX_FUNCTIONS_PER_LIBRARY};
use crate::pause::Pausable;
use crate::LuaError;

/// Lua VM instructions one call (or a library's loading) may run: about 25–30 ms of pure
/// Lua on these machines (with the counting hook on), far above what a storage function
/// needs, and well inside the storage node's default 100 ms invocation budget, so a
/// runaway script ends here, on its own, before the node's watchdog would replace the
/// worker thread running it.
pub const INSTRUCTION_BUDGET: i64 = 5_000_000;

/// Instructions between two budget checks (the hook's cost is spread over these).
pub const HOOK_EVERY_INSTRUCTIONS: u32 = 10_000;

/// Memory one VM (its library, and the call running in it) may hold. Filling it takes
/// about 10 ms per MiB of Lua allocations on these machines, so a memory-hungry call too
/// ends well inside the node's invocation budget.
pub const MAX_VM_MEMORY_BYTES: usize = 4 * 1024 * 1024;

const PRELUDE: &str = include_str!("prelude.lua");

/// A preloaded library's maker.
type Preload = fn(&Lua) -> mlua::Result<Table>;

/// The libraries Redis preloads, by global name (the prelude freezes them with the other
/// globals, so no script can change them for another).
const PRELOADED: [(&str, Preload); 3] = [
    ("cjson", crate::cjson::library),
    ("cmsgpack", crate::cmsgpack::library),
    ("struct", crate::lua_struct::library),
];

/// Registry name of the function lent to `redis.call` for one resume of a call.
const LENT_DIRECT: &str = "ferry.lent_direct";

const NOT_STRINGS: &str = "Lua redis lib command arguments must be strings or integers";

/// `redis.call`'s way in while the Ctx can answer at once: the command run to its end here,
/// answered `(ok, reply)`; `(nil, nil)` sends it the long way (a yield). An access that
/// ends the invocation (a conflict, a refusal) is kept in `ended` and raised past every
/// `pcall` of the script.
fn direct_command(
    lua: &Lua,
    ctx: &mut dyn Ctx,
    table: &str,
    writes_allowed: bool,
    command: &MultiValue,
    ended: &mut Option<CtxError>,
    budget: &Budget,
) -> mlua::Result<(Value, Value)> {
    if !ctx.immediate() {
        return Ok((Value::Nil, Value::Nil));
    }
    let reply = match command.iter().map(command_arg).collect::<Option<Vec<Bytes>>>() {
        Some(args) => match poll_now(crate::call::execute(ctx, table, args, writes_allowed)) {
            Some(Ok(reply)) => reply,
            Some(Err(err)) => return Err(end_access(err, ended, budget)),
            None => {
                let err = CtxError::Stopped("an access that was to complete at once did not".into());
                return Err(end_access(err, ended, budget));
            }
        },
        None => Reply::err(NOT_STRINGS),
    };
    let ok = !matches!(reply, Reply::Error(_));
    let resp3 = budget.resp3.load(Ordering::Relaxed);
    Ok((Value::Boolean(ok), reply_to_lua(lua, &reply, resp3)?))
}

fn end_access(err: CtxError, ended: &mut Option<CtxError>, budget: &Budget) -> mlua::Error {
    budget.access_ended.store(true, Ordering::Relaxed);
    let error = mlua::Error::runtime(format!("ERR {err}"));
    *ended = Some(err);
    error
}

/// The message of a call stopped by its budget.
pub fn budget_message() -> String {
    format!("ERR Script killed: it ran past its budget of {INSTRUCTION_BUDGET} Lua instructions")
}

/// The running call's instruction budget, shared by the hook and the prelude's `stopped`,
/// whether one of its accesses ended the invocation, and its invocation's [`Interrupt`].
#[derive(Default)]
struct Budget {
    /// Raised from outside to stop the call (FUNCTION KILL, SCRIPT KILL): the hook checks
    /// it with the count.
    interrupt: std::sync::Mutex<Option<Interrupt>>,
    /// The running call's slice of a shared thread, if it has one: its time limit ends
    /// the call at a pause.
    slice: std::sync::Mutex<Option<Slice>>,
    /// The running call asked for RESP3 replies (`redis.setresp(3)`).
    resp3: AtomicBool,
    remaining: AtomicI64,
    yield_asked: AtomicBool,
    spent: AtomicBool,
    access_ended: AtomicBool,
}

impl Budget {
    fn reset(&self, interrupt: Option<Interrupt>, slice: Option<Slice>) {
        *self.interrupt.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = interrupt;
        // A preempted call has no instruction budget: its runtime's time limit bounds it.
        let remaining = if slice.is_some() { i64::MAX } else { INSTRUCTION_BUDGET };
        *self.slice.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = slice;
        self.resp3.store(false, Ordering::Relaxed);
        self.remaining.store(remaining, Ordering::Relaxed);
        self.yield_asked.store(false, Ordering::Relaxed);
        self.spent.store(false, Ordering::Relaxed);
        self.access_ended.store(false, Ordering::Relaxed);
    }

    fn spent(&self) -> bool {
        self.spent.load(Ordering::Relaxed)
    }

    /// The error the call was stopped with from outside (a kill, or its runtime's CPU
    /// time limit), if it was.
    fn interrupted(&self) -> Option<&'static str> {
        let killed = self
            .interrupt
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_ref()
            .and_then(Interrupt::raised);
        killed.or_else(|| {
            self.slice
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .as_ref()
                .and_then(Slice::time_limit)
        })
    }

    /// Why a call that spent its budget ended: stopped from outside, or the count ran out.
    fn end_message(&self) -> String {
        self.interrupted().map_or_else(budget_message, str::to_string)
    }

    /// The call must end: no `pcall` of the script may keep it going.
    fn stopped(&self) -> bool {
        self.spent() || self.access_ended.load(Ordering::Relaxed)
    }

    /// The hook of a call with no slice: counts, and once the budget is gone asks to
    /// yield; if Lua could not yield there (inside a C call), every later check raises an
    /// error instead.
    fn hook(self: &Arc<Budget>) -> impl Fn(&Lua, &mlua::Debug) -> mlua::Result<VmState> + Send + 'static {
        let budget = Arc::clone(self);
        move |_, _| {
            let step = i64::from(HOOK_EVERY_INSTRUCTIONS);
            let interrupted = budget.interrupted().is_some();
            if !interrupted && budget.remaining.fetch_sub(step, Ordering::Relaxed) > step {
                return Ok(VmState::Continue);
            }
            // Stopped from outside or out of instructions: the call ends, past every pcall.
            budget.spent.store(true, Ordering::Relaxed);
            if budget.yield_asked.swap(true, Ordering::Relaxed) {
                Err(mlua::Error::runtime(budget.end_message()))
            } else {
                Ok(VmState::Yield)
            }
        }
    }
}

/// Charges `instructions` of work a library did outside Lua (packing, unpacking) to the
/// running call's budget, which the hook cannot see: false once the budget is gone, and
/// the call then ends as a runaway loop does, past every `pcall`. A Lua state that is no
/// VM's (a unit test's) has no budget to charge.
pub(crate) fn charge(lua: &Lua, instructions: i64) -> bool {
    let Some(budget) = lua.app_data_ref::<Arc<Budget>>() else {
        return true;
    };
    if budget.remaining.fetch_sub(instructions, Ordering::Relaxed) > instructions {
        return true;
    }
    budget.spent.store(true, Ordering::Relaxed);
    false
}

/// The Redis version scripts see as `redis.REDIS_VERSION`: the `redis_version` ferry's
/// INFO reports, so a script and a client that check the version agree.
pub const REDIS_VERSION: &str = "7.2.0";

/// `redis.REDIS_VERSION_NUM`: [`REDIS_VERSION`] as Redis encodes it, `0x00MMmmpp`.
pub const REDIS_VERSION_NUM: i64 = 0x0007_0200;

/// What the prelude gets from Rust: `stopped` (the running call must end), `set_resp3`
/// (`redis.setresp`), `sha1hex` (`redis.sha1hex`), `known_command`
/// (`redis.acl_check_cmd`) and the version.
fn prelude_functions(
    lua: &Lua,
    budget: &Arc<Budget>,
) -> mlua::Result<(Function, Function, Function, Function, &'static str, i64)> {
    let stopped = {
        let budget = Arc::clone(budget);
        lua.create_function(move |_, ()| Ok(budget.stopped()))?
    };
    let set_resp3 = {
        let budget = Arc::clone(budget);
        lua.create_function(move |_, resp3: bool| {
            budget.resp3.store(resp3, Ordering::Relaxed);
            Ok(())
        })?
    };
    let sha1hex = lua.create_function(|_, text: mlua::String| Ok(crate::script::sha1_hex(&text.as_bytes())))?;
    let known_command = lua.create_function(|_, name: mlua::String| Ok(lookup(&name.as_bytes()).is_some()))?;
    Ok((
        stopped,
        set_resp3,
        sha1hex,
        known_command,
        REDIS_VERSION,
        REDIS_VERSION_NUM,
    ))
}

struct Registered {
    callback: Function,
    no_writes: bool,
    /// Flagged `allow-oom`: its writes may pass the tenant's `maxmemory`.
    allow_oom: bool,
}

/// A VM with one library loaded.
pub struct Vm {
    lua: Lua,
    run: Function,
    /// The prelude's driver, which resumes the call's coroutine from Lua.
    drive: Function,
    /// The coroutine the driver runs in, resumed from here.
    thread: Thread,
    /// The coroutine every call runs in (the trampoline `run`), reset between calls
    /// (cheaper than a new one); the budget's hook is installed per call, where it has one.
    call_thread: Thread,
    functions: HashMap<String, Registered>,
    budget: Arc<Budget>,
    /// Hit a limit: dropped instead of reused.
    poisoned: bool,
}

fn triggers() -> HookTriggers {
    HookTriggers::new().every_nth_instruction(HOOK_EVERY_INSTRUCTIONS)
}

fn lua_failure(err: &mlua::Error) -> String {
    match err {
        mlua::Error::MemoryError(_) => "ERR Lua VM out of memory".to_string(),
        mlua::Error::SyntaxError { message, .. } => format!("ERR Error compiling function: {message}"),
        other => format!("ERR {other}"),
    }
}

impl Vm {
    /// A fresh VM running `code`: the library's header, its functions and flags checked.
    pub fn load(code: &str) -> Result<(Vm, Header, Vec<FunctionInfo>), LuaError> {
        let (header, body) = parse_header(code)?;
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::UTF8 | StdLib::COROUTINE;
        let lua = Lua::new_with(libs, LuaOptions::new()).map_err(|e| LuaError::library(lua_failure(&e)))?;
        lua.set_memory_limit(MAX_VM_MEMORY_BYTES)
            .map_err(|e| LuaError::library(lua_failure(&e)))?;
        for (name, library) in PRELOADED {
            library(&lua)
                .and_then(|table| lua.globals().set(name, table))
                .map_err(|e| LuaError::library(lua_failure(&e)))?;
        }
        let budget = Arc::new(Budget::default());
        // Where the libraries written in Rust charge their work (`charge`).
        lua.set_app_data(Arc::clone(&budget));
        let prelude = prelude_functions(&lua, &budget).and_then(|functions| {
            lua.load(PRELUDE)
                .set_name("=ferry")
                .call::<(Function, Function, Function, Table, Function)>(functions)
        });
        let (run, drive, finish, env, set_direct) = prelude.map_err(|e| LuaError::library(lua_failure(&e)))?;
        budget.reset(None, None);
        lua.set_hook(triggers(), budget.hook())
            .map_err(|e| LuaError::library(lua_failure(&e)))?;
        let loaded = lua
            .load(body)
            .set_name(format!("@{}", header.name))
            .set_environment(env)
            .set_mode(ChunkMode::Text)
            .exec();
        lua.remove_hook();
        if budget.spent() {
            return Err(LuaError::library(budget_message()));
        }
        loaded.map_err(|e| LuaError::library(lua_failure(&e)))?;
        let registered: Table = finish.call(()).map_err(|e| LuaError::library(lua_failure(&e)))?;
        let mut functions = HashMap::new();
        let mut infos = Vec::new();
        for pair in registered.pairs::<String, Table>() {
            let (name, entry) = pair.map_err(|e| LuaError::library(lua_failure(&e)))?;
            if !valid_name(&name) {
                // Redis's words for a bad function name too.
                return Err(LuaError::library(
                    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
                ));
            }
            let (callback, flag_list, description) = entry
                .get::<Function>("callback")
                .and_then(|callback| {
                    Ok((
                        callback,
                        entry.get::<Table>("flags")?,
                        entry.get::<Option<String>>("description")?,
                    ))
                })
                .map_err(|e| LuaError::library(lua_failure(&e)))?;
            let mut flags = Vec::new();
            for flag in flag_list.sequence_values::<Value>() {
                let flag = match flag {
                    Ok(Value::String(flag)) => flag.to_string_lossy().to_ascii_lowercase(),
                    _ => return Err(LuaError::library("unknown flag given")),
                };
                if !KNOWN_FLAGS.contains(&flag.as_str()) {
                    return Err(LuaError::library("unknown flag given"));
                }
                if !flags.contains(&flag) {
                    flags.push(flag);
                }
            }
            let no_writes = flags.iter().any(|flag| flag == "no-writes");
            let allow_oom = flags.iter().any(|flag| flag == "allow-oom");
            infos.push(FunctionInfo {
                name: name.clone(),
                flags,
                description,
            });
            functions.insert(
                name,
                Registered {
                    callback,
                    no_writes,
                    allow_oom,
                },
            );
        }
        if infos.is_empty() {
            return Err(LuaError::library("No functions registered"));
        }
        if infos.len() > MAX_FUNCTIONS_PER_LIBRARY {
            return Err(LuaError::library(format!(
                "a library may register at most {MAX_FUNCTIONS_PER_LIBRARY} functions"
            )));
        }
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        let thread = lua
            .create_thread(drive.clone())
            .map_err(|e| LuaError::library(lua_failure(&e)))?;
        let call_thread = lua
            .create_thread(run.clone())
            .map_err(|e| LuaError::library(lua_failure(&e)))?;
        // `redis.call`'s way in, for good: a Rust function that calls the one lent for the
        // current resume (kept in the registry). A hook cannot pause a call inside it, so
        // a call paused in `command` and resumed under a new lending never holds the old,
        // destroyed one in a register.
        lua.create_function(|lua, command: MultiValue| {
            lua.named_registry_value::<Function>(LENT_DIRECT)?
                .call::<MultiValue>(command)
        })
        .and_then(|direct| set_direct.call::<()>(direct))
        .map_err(|e| LuaError::library(lua_failure(&e)))?;
        let vm = Vm {
            lua,
            run,
            drive,
            thread,
            call_thread,
            functions,
            budget,
            poisoned: false,
        };
        Ok((vm, header, infos))
    }

    /// Whether the VM hit a limit and must not be reused.
    pub fn poisoned(&self) -> bool {
        self.poisoned
    }

    /// Runs `function` over `table` with `keys` and `args`; `read_only` (FCALL_RO) refuses
    /// a function not flagged `no-writes`. The reply is what the function returned (an
    /// error reply it returned included); an error it raised fails the invocation, so
    /// nothing it wrote is committed.
    pub async fn call(
        &mut self,
        ctx: &mut dyn Ctx,
        function: &str,
        table: &str,
        keys: &[Bytes],
        args: &[Bytes],
        read_only: bool,
    ) -> Result<Reply, FnError> {
        let Some(registered) = self.functions.get(function) else {
            return Err(FnError::Failed("ERR Function not found".into()));
        };
        let no_writes = registered.no_writes;
        if registered.allow_oom {
            ctx.allow_oom();
        }
        if read_only && !no_writes {
            return Err(FnError::Failed(
                "ERR Can not execute a script with write flag using *_ro command.".into(),
            ));
        }
        let failed = |err: mlua::Error| FnError::Failed(lua_failure(&err));
        let lua = &self.lua;
        let sequence = |items: &[Bytes]| -> mlua::Result<Table> {
            let strings = items
                .iter()
                .map(|item| lua.create_string(item))
                .collect::<mlua::Result<Vec<_>>>()?;
            lua.create_sequence_from(strings)
        };
        let thread = &self.thread;
        let reset = thread
            .reset(self.drive.clone())
            .and_then(|()| self.call_thread.reset(self.run.clone()));
        if let Err(err) = reset {
            self.poisoned = true;
            return Err(failed(err));
        }
        let slice = ctx.slice();
        let pausable = Pausable::of(&self.call_thread);
        // Paused from another thread while it has a slice (no hook until then); counted by
        // the budget's hook otherwise. The pause is taken off the bell when the call ends
        // or its future is dropped.
        let _hung = match &slice {
            Some(slice) => {
                pausable.clear();
                Some(slice.bell().hang(Box::new(move || pausable.pause())))
            }
            None => {
                let hooked = self.call_thread.set_hook(triggers(), self.budget.hook());
                if let Err(err) = hooked {
                    self.poisoned = true;
                    return Err(failed(err));
                }
                None
            }
        };
        let paused_calls = slice.is_some();
        self.budget.reset(ctx.interrupt(), slice);
        let mut input = Some(MultiValue::from_vec(vec![
            Value::Thread(self.call_thread.clone()),
            Value::Function(registered.callback.clone()),
            Value::Table(sequence(keys).map_err(failed)?),
            Value::Table(sequence(args).map_err(failed)?),
        ]));
        let writes_allowed = !no_writes;
        loop {
            if paused_calls {
                // Killed or out of time while paused: it ends here instead of resuming.
                if let Some(error) = self.budget.interrupted() {
                    return Err(FnError::Failed(error.to_string()));
                }
            }
            // Resumed inside a scope that lends `redis.call` the invocation's Ctx, to run
            // commands at once while it can answer at once; the scope ends before any
            // command is awaited the long way.
            let mut ended: Option<CtxError> = None;
            let output = {
                let ctx: &mut dyn Ctx = &mut *ctx;
                let ended = &mut ended;
                let budget = &self.budget;
                let resumed_with = input.take().unwrap_or_default();
                self.lua.scope(|scope| {
                    let direct = scope.create_function_mut(move |lua, command: MultiValue| {
                        direct_command(lua, &mut *ctx, table, writes_allowed, &command, ended, budget)
                    })?;
                    self.lua.set_named_registry_value(LENT_DIRECT, direct)?;
                    thread.resume::<MultiValue>(resumed_with)
                })
            };
            if let Some(err) = ended {
                // The script's pcalls re-raised it to the trampoline: the VM is intact.
                return Err(FnError::Ctx(err));
            }
            if self.budget.spent() {
                self.poisoned = true;
                return Err(FnError::Failed(self.budget.end_message()));
            }
            let output = output.map_err(|err| {
                self.poisoned = true;
                failed(err)
            })?;
            match thread.status() {
                ThreadStatus::Finished => return self.finished(output),
                // Nothing yielded: a pause (every command yields its words). Pending once,
                // then resumed where it stopped.
                ThreadStatus::Resumable if output.is_empty() => ferry_func::ctx::yield_once().await,
                ThreadStatus::Resumable => {
                    let args: Option<Vec<Bytes>> = output.iter().map(command_arg).collect();
                    let reply = match args {
                        Some(args) => crate::call::execute(ctx, table, args, writes_allowed).await?,
                        None => Reply::err(NOT_STRINGS),
                    };
                    let ok = !matches!(reply, Reply::Error(_));
                    let resp3 = self.budget.resp3.load(Ordering::Relaxed);
                    let reply = reply_to_lua(&self.lua, &reply, resp3).map_err(failed)?;
                    input = Some(MultiValue::from_vec(vec![Value::Boolean(ok), reply]));
                }
                _ => return Err(FnError::Failed("ERR the function's coroutine stopped".into())),
            }
        }
    }

    /// The trampoline's `pcall` results: `true, value` or `false, error`.
    fn finished(&mut self, output: MultiValue) -> Result<Reply, FnError> {
        let mut values = output.into_iter();
        let ok = matches!(values.next(), Some(Value::Boolean(true)));
        let value = values.next().unwrap_or(Value::Nil);
        if ok {
            return Ok(lua_to_reply(&value));
        }
        let text = match &value {
            Value::Table(table) => match table.raw_get::<Value>("err") {
                Ok(Value::String(err)) => err.to_string_lossy(),
                _ => "ERR the function raised a table without `err`".to_string(),
            },
            Value::String(message) => format!("ERR {}", message.to_string_lossy()),
            Value::Error(err) => lua_failure(err),
            other => format!("ERR the function raised a {}", other.type_name()),
        };
        if text.contains("not enough memory") || text.contains("out of memory") {
            self.poisoned = true;
        }
        Err(FnError::Failed(text))
    }
}
