//! Lua libraries loaded and called through the registry, over an in-memory `Ctx`: the
//! catalog, `redis.call`, flags, the sandbox and the limits.

use bytes::Bytes;
use ferry_func::memory::{block_on, MemoryCtx};
use ferry_func::{CtxError, FnError};
use ferry_lua::catalog::{self, ListArgs, LoadArgs};
use ferry_lua::fcall::reply_of;
use ferry_lua::FcallArgs;
use ferry_proto::TenantId;
use ferry_resp::Reply;

fn invoke(ctx: &mut MemoryCtx, name: &str, args: Bytes) -> Result<Bytes, FnError> {
    ctx.args = args;
    let registry = ferry_lua::registry();
    let function = registry.get(name).unwrap_or_else(|| panic!("{name} is registered"));
    block_on(function(ctx))
}

fn load(ctx: &mut MemoryCtx, code: &str, replace: bool) -> Result<String, String> {
    let args = LoadArgs {
        replace,
        code: Bytes::copy_from_slice(code.as_bytes()),
    };
    match invoke(ctx, catalog::LOAD, args.encode()) {
        Ok(name) => Ok(String::from_utf8(name.to_vec()).unwrap()),
        Err(err) => Err(err.to_string()),
    }
}

fn fcall_as(
    ctx: &mut MemoryCtx,
    function: &str,
    keys: &[&str],
    args: &[&str],
    read_only: bool,
) -> Result<Reply, String> {
    let call = FcallArgs {
        function: function.to_string(),
        table: "db0".to_string(),
        keys: keys.iter().map(|k| Bytes::copy_from_slice(k.as_bytes())).collect(),
        args: args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect(),
        read_only,
    };
    match invoke(ctx, &call.invocation_name(), call.encode().unwrap()) {
        Ok(result) => Ok(reply_of(&result)),
        Err(err) => Err(err.to_string()),
    }
}

fn fcall(ctx: &mut MemoryCtx, function: &str, keys: &[&str], args: &[&str]) -> Result<Reply, String> {
    fcall_as(ctx, function, keys, args, false)
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(text.as_bytes()))
}

const COUNTER: &str = r#"#!lua name=counter
local function bump(keys, args)
  local n = redis.call('INCRBY', keys[1], args[1])
  redis.call('SET', keys[2], 'last=' .. n)
  return n
end
local function peek(keys)
  return redis.call('MGET', keys[1], keys[2], 'missing')
end
local function try_write(keys)
  return redis.pcall('SET', keys[1], 'x')
end
redis.register_function('bump', bump)
redis.register_function{function_name = 'peek', callback = peek, flags = {'no-writes'}}
redis.register_function{function_name = 'try_write', callback = try_write, flags = {'no-writes'}}
"#;

#[test]
fn a_loaded_library_runs_its_functions_over_the_ctx() {
    let mut ctx = MemoryCtx::default();
    assert_eq!(load(&mut ctx, COUNTER, false), Ok("counter".to_string()));
    assert_eq!(fcall(&mut ctx, "bump", &["n", "last"], &["5"]), Ok(Reply::Integer(5)));
    assert_eq!(fcall(&mut ctx, "bump", &["n", "last"], &["-2"]), Ok(Reply::Integer(3)));
    assert_eq!(ctx.object("db0", b"n"), Some(&Bytes::from_static(b"3")));
    assert_eq!(ctx.object("db0", b"last"), Some(&Bytes::from_static(b"last=3")));
    assert_eq!(
        fcall_as(&mut ctx, "peek", &["n", "last"], &[], true),
        Ok(Reply::Array(vec![bulk("3"), bulk("last=3"), Reply::Null]))
    );
    // FCALL_RO of a function that may write, and a write from a no-writes function.
    assert_eq!(
        fcall_as(&mut ctx, "bump", &["n", "last"], &["1"], true),
        Err("ERR Can not execute a script with write flag using *_ro command.".to_string())
    );
    assert_eq!(
        fcall(&mut ctx, "try_write", &["n"], &[]),
        Ok(Reply::Error(
            "ERR Write commands are not allowed from read-only scripts.".into()
        ))
    );
    assert_eq!(ctx.object("db0", b"n"), Some(&Bytes::from_static(b"3")));
    assert_eq!(
        fcall(&mut ctx, "nope", &[], &[]),
        Err("ERR Function not found".to_string())
    );
    // INCRBY of something that is not a number: redis.call raises, the invocation fails.
    let err = fcall(&mut ctx, "bump", &["last", "n"], &["1"]).unwrap_err();
    assert!(err.contains("not an integer"), "{err}");
}

#[test]
fn the_command_table_says_what_a_script_may_call() {
    let mut ctx = MemoryCtx::default();
    let code = r#"#!lua name=calls
redis.register_function('run', function(_, args) return redis.pcall(table.unpack(args)) end)
redis.register_function{function_name = 'run_ro', callback = function(_, args) return redis.pcall(table.unpack(args)) end, flags = {'no-writes'}}
"#;
    load(&mut ctx, code, false).unwrap();
    let refused = |reply: Result<Reply, String>, wording: &str| match reply {
        Ok(Reply::Error(text)) => assert!(text.contains(wording), "{text}"),
        other => panic!("{other:?}"),
    };
    // noscript commands, whatever else they are.
    refused(
        fcall(&mut ctx, "run", &[], &["FCALL", "run", "0"]),
        "not allowed from script",
    );
    refused(fcall(&mut ctx, "run", &[], &["AUTH", "x"]), "not allowed from script");
    refused(fcall(&mut ctx, "run", &[], &["select", "1"]), "not allowed from script");
    // write commands in a no-writes function; reads are fine there.
    refused(
        fcall(&mut ctx, "run_ro", &[], &["INCR", "n"]),
        "Write commands are not allowed",
    );
    refused(
        fcall(&mut ctx, "run_ro", &[], &["mset", "a", "1"]),
        "Write commands are not allowed",
    );
    assert_eq!(fcall(&mut ctx, "run_ro", &[], &["GET", "n"]), Ok(Reply::Null));
    assert_eq!(fcall(&mut ctx, "run", &[], &["INCR", "n"]), Ok(Reply::Integer(1)));
    // Unknown commands and wrong arity as Redis words them.
    refused(fcall(&mut ctx, "run", &[], &["BGREWRITEAOF"]), "unknown command");
    // Commands over a whole database list the script's database; OBJECT, which reads how
    // the node holds a key, is not for scripts.
    assert_eq!(
        fcall(&mut ctx, "run", &[], &["KEYS", "*"]),
        Ok(Reply::Array(vec![Reply::Bulk(Bytes::from_static(b"n"))]))
    );
    refused(
        fcall(&mut ctx, "run_ro", &[], &["FLUSHALL"]),
        "Write commands are not allowed",
    );
    assert_eq!(fcall(&mut ctx, "run", &[], &["FLUSHALL"]), Ok(Reply::ok()));
    assert_eq!(fcall(&mut ctx, "run", &[], &["DBSIZE"]), Ok(Reply::Integer(0)));
    refused(
        fcall(&mut ctx, "run", &[], &["OBJECT", "ENCODING", "n"]),
        "not allowed from script",
    );
    // TIME is the call's own time, the same for every access of one call.
    let Ok(Reply::Array(time)) = fcall(&mut ctx, "run", &[], &["TIME"]) else {
        panic!("TIME answers an array")
    };
    assert_eq!(time.len(), 2);
    refused(
        fcall(&mut ctx, "run", &[], &["GET"]),
        "Wrong number of args calling Redis command from script",
    );
}

#[test]
fn the_catalog_refuses_clashes_and_replaces_and_deletes_libraries() {
    let mut ctx = MemoryCtx::default();
    load(&mut ctx, COUNTER, false).unwrap();
    assert_eq!(
        load(&mut ctx, COUNTER, false),
        Err("ERR Library 'counter' already exists".to_string())
    );
    let thief = "#!lua name=thief\nredis.register_function('bump', function() return 0 end)";
    assert_eq!(
        load(&mut ctx, thief, false),
        Err("ERR Function bump already exists".to_string())
    );
    // REPLACE drops the functions the new text no longer has.
    let smaller = "#!lua name=counter\nredis.register_function('bump', function() return 42 end)";
    load(&mut ctx, smaller, true).unwrap();
    assert_eq!(fcall(&mut ctx, "bump", &["n", "last"], &["1"]), Ok(Reply::Integer(42)));
    assert_eq!(
        fcall(&mut ctx, "peek", &["n", "last"], &[]),
        Err("ERR Function not found".to_string())
    );
    load(
        &mut ctx,
        "#!lua name=other\nredis.register_function('other_f', function() return 1 end)\n\
         redis.register_function{function_name='described', callback=function() return 2 end,\n\
           description='adds\\nup', flags={'No-Writes', 'allow-oom'}}",
        false,
    )
    .unwrap();
    let list = |ctx: &mut MemoryCtx, pattern: &str, with_code: bool| {
        let args = ListArgs {
            pattern: pattern.to_string(),
            with_code,
        };
        reply_of(&invoke(ctx, catalog::LIST, args.encode()).unwrap())
    };
    let Reply::Array(all) = list(&mut ctx, "", false) else {
        panic!("an array")
    };
    assert_eq!(all.len(), 2);
    // A function's description and flags, as it gave them (flags lower case).
    let Reply::Array(other) = list(&mut ctx, "other", false) else {
        panic!("an array")
    };
    let text = format!("{other:?}");
    assert!(
        text.contains(r#"Bulk(b"adds\nup")"#) && text.contains(r#"Bulk(b"no-writes"), Bulk(b"allow-oom")"#),
        "{text}"
    );
    let Reply::Array(one) = list(&mut ctx, "coun*", true) else {
        panic!("an array")
    };
    assert_eq!(one.len(), 1);
    let text = format!("{:?}", one[0]);
    assert!(text.contains("library_code") && text.contains("return 42"), "{text}");
    invoke(&mut ctx, catalog::DELETE, catalog::delete_args("counter")).unwrap();
    assert_eq!(
        fcall(&mut ctx, "bump", &["n", "last"], &["1"]),
        Err("ERR Function not found".to_string())
    );
    let err = invoke(&mut ctx, catalog::DELETE, catalog::delete_args("counter")).unwrap_err();
    assert_eq!(err.to_string(), "ERR Library not found");
    assert_eq!(fcall(&mut ctx, "other_f", &[], &[]), Ok(Reply::Integer(1)));
    invoke(&mut ctx, catalog::FLUSH, Bytes::new()).unwrap();
    assert_eq!(
        fcall(&mut ctx, "other_f", &[], &[]),
        Err("ERR Function not found".to_string())
    );
    let Reply::Array(none) = list(&mut ctx, "", false) else {
        panic!("an array")
    };
    assert!(none.is_empty());
}

#[test]
fn bad_libraries_get_redis_errors() {
    let mut ctx = MemoryCtx::default();
    for (code, expected) in [
        ("#!lua name=x\nthis is not lua", "Error compiling function"),
        ("#!lua name=x\nlocal a = 1", "No functions registered"),
        (
            "#!lua name=x\nredis.register_function{function_name='f', callback=function() end, flags={'fast'}}",
            "unknown flag given",
        ),
        (
            "#!lua name=x\nredis.register_function('bad-name', function() end)",
            // Redis's words for a function name too.
            "Library names can only contain",
        ),
        (
            "#!lua name=x\nredis.register_function('f', 'not a function')",
            "second argument to redis.register_function must be a function",
        ),
        (
            "#!lua name=x\nredis.register_function('f', function() end, 'extra')",
            "wrong number of arguments to redis.register_function",
        ),
        (
            "#!lua name=x\nredis.register_function{function_name='f', callback=function() end, other=1}",
            "unknown argument given to redis.register_function",
        ),
        (
            "#!lua name=x\nredis.register_function{callback=function() end}",
            "redis.register_function must get a function name argument",
        ),
        (
            "#!lua name=x\nredis.register_function('f')",
            "calling redis.register_function with a single argument is only applicable to Lua table",
        ),
        ("return 1", "Missing library metadata"),
        ("#!lua name=x\nwhile true do end", "Script killed"),
    ] {
        let err = load(&mut ctx, code, false).unwrap_err();
        assert!(err.contains(expected), "{code:?}: {err}");
    }
    assert!(ctx.data.is_empty(), "nothing stored for a refused library");
}

#[test]
fn the_sandbox_has_no_way_out_and_no_globals_to_leak_through() {
    let mut ctx = MemoryCtx::default();
    let probe = r#"#!lua name=probe
redis.register_function('reach', function(keys, args)
  return type(_G[args[1]])
end)
redis.register_function('leak', function() counter_global = 1 return 1 end)
redis.register_function('register', function() redis.register_function('late', function() end) end)
"#;
    load(&mut ctx, probe, false).unwrap();
    for absent in [
        "os",
        "io",
        "require",
        "load",
        "loadfile",
        "dofile",
        "print",
        "coroutine",
        "debug",
        "package",
    ] {
        let err = fcall(&mut ctx, "reach", &[], &[absent]).unwrap_err();
        let expected = format!("Script attempted to access nonexistent global variable '{absent}'");
        assert!(err.contains(&expected), "{absent}: {err}");
    }
    let err = fcall(&mut ctx, "leak", &[], &[]).unwrap_err();
    assert!(
        err.contains("Attempt to modify a readonly table: counter_global"),
        "{err}"
    );
    // A function's `redis` has no register_function, as in Redis.
    let err = fcall(&mut ctx, "register", &[], &[]).unwrap_err();
    assert!(
        err.contains("attempt to call a nil value (field 'register_function')"),
        "{err}"
    );
    // And a library's own code sees nothing but `redis` while it loads.
    for (code, missing) in [
        (
            "#!lua name=m
local r = math.random()",
            "math",
        ),
        (
            "#!lua name=c
redis.call('PING')",
            "call",
        ),
        (
            "#!lua name=g
local mt = getmetatable(_G)",
            "getmetatable",
        ),
    ] {
        let err = load(&mut ctx, code, false).unwrap_err();
        let expected = format!("Script attempted to access nonexistent global variable '{missing}'");
        assert!(err.contains(&expected), "{code}: {err}");
    }
    let err = load(
        &mut ctx,
        "#!lua name=w
shared = 1",
        false,
    )
    .unwrap_err();
    assert!(err.contains("Attempt to modify a readonly table"), "{err}");
}

const ESCAPES: &str = r#"#!lua name=escapes
local function helper() return 'helper' end
redis.register_function('break_strings', function()
  getmetatable('').__index = { upper = function() return 'broken' end }
end)
redis.register_function('count', function()
  local n = (rawget(_G, 'counter') or 0) + 1
  rawset(_G, 'counter', n)
  return n
end)
redis.register_function('hijack', function() redis.call = function() return 'hijacked' end end)
redis.register_function('raw_hijack', function() rawset(redis, 'call', function() return 'hijacked' end) end)
redis.register_function('patch_string', function() string.upper = function() return 'patched' end end)
redis.register_function('raw_patch', function() rawset(string, 'upper', function() return 'patched' end) end)
redis.register_function('unlock_globals', function() setmetatable(_G, nil) end)
redis.register_function('drop_string', function() string = nil end)
redis.register_function('upper', function() return ('abc'):upper() .. string.upper('d') end)
redis.register_function('get', function(keys) return redis.call('GET', keys[1]) end)
redis.register_function('use_helper', function() return helper() end)
"#;

#[test]
fn no_call_can_change_what_a_later_call_sees() {
    // The three escapes of the issue (the string metatable, rawset on _G, redis.call
    // replaced) and their cousins: each is refused, and every later call of every function
    // sees the library as it was loaded.
    let mut ctx = MemoryCtx::default();
    load(&mut ctx, ESCAPES, false).unwrap();
    fcall(&mut ctx, "get", &["seed"], &[]).unwrap();
    ctx.data
        .insert(("db0".into(), Bytes::from_static(b"k")), Bytes::from_static(b"v"));
    let attacks = [
        ("break_strings", "attempt to index a boolean value"),
        ("count", "readonly table"),
        ("hijack", "readonly table"),
        ("raw_hijack", "readonly table"),
        ("patch_string", "readonly table"),
        ("raw_patch", "readonly table"),
        ("unlock_globals", "Attempt to modify a readonly table"),
        ("drop_string", "Attempt to modify a readonly table: string"),
    ];
    for (attack, refusal) in attacks {
        for _ in 0..2 {
            let err = fcall(&mut ctx, attack, &[], &[]).unwrap_err();
            assert!(err.contains(refusal), "{attack}: {err}");
        }
        assert_eq!(fcall(&mut ctx, "upper", &[], &[]), Ok(bulk("ABCD")), "after {attack}");
        assert_eq!(fcall(&mut ctx, "get", &["k"], &[]), Ok(bulk("v")), "after {attack}");
        assert_eq!(
            fcall(&mut ctx, "use_helper", &[], &[]),
            Ok(bulk("helper")),
            "after {attack}"
        );
    }
}

#[test]
fn runaway_and_memory_hungry_calls_end_alone_and_the_library_keeps_serving() {
    let mut ctx = MemoryCtx::default();
    let hostile = include_str!("../../../examples/lua/hostile.lua");
    load(&mut ctx, hostile, false).unwrap();
    for function in ["spin", "sneaky", "sorted_spin", "caught_sort", "gsub_spin"] {
        let err = fcall(&mut ctx, function, &[], &[]).unwrap_err();
        assert!(err.contains("Script killed"), "{function}: {err}");
        assert_eq!(
            fcall(&mut ctx, "fine", &["k"], &[]).map(|_| ()),
            Ok(()),
            "after {function}"
        );
    }
    let err = fcall(&mut ctx, "hog", &[], &[]).unwrap_err();
    assert!(err.contains("memory"), "{err}");
    assert_eq!(fcall(&mut ctx, "fine", &["k"], &[]), Ok(Reply::Integer(6)));
}

#[test]
fn a_raised_interrupt_ends_a_call_past_its_pcalls_and_the_library_keeps_serving() {
    let mut ctx = MemoryCtx::default();
    load(&mut ctx, include_str!("../../../examples/lua/hostile.lua"), false).unwrap();
    let interrupt = ferry_func::Interrupt::new();
    interrupt.raise(ferry_lua::kill::KILLED);
    ctx.interrupt = Some(interrupt);
    for function in ["spin", "sneaky", "sorted_spin"] {
        assert_eq!(
            fcall(&mut ctx, function, &[], &[]),
            Err(ferry_lua::kill::KILLED.to_string()),
            "{function}"
        );
    }
    ctx.interrupt = None;
    assert_eq!(fcall(&mut ctx, "fine", &["k"], &[]).map(|_| ()), Ok(()));
}

/// A time limit the test sets.
struct Limit(Option<&'static str>);

impl ferry_func::TimeLimit for Limit {
    fn reached(&self) -> Option<&'static str> {
        self.0
    }
}

/// Rings `bell` every 100 µs from another thread, as a node's watchdog does, until the flag
/// returned is raised; the thread answers how many rings found a call to pause.
fn ringer(
    bell: ferry_func::Bell,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<u64>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = std::sync::Arc::clone(&stop);
    let rings = std::thread::spawn(move || {
        let mut paused = 0;
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            paused += u64::from(bell.ring());
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        paused
    });
    (stop, rings)
}

#[test]
fn a_call_paused_again_and_again_keeps_its_locals_and_runs_past_the_instruction_budget() {
    let mut ctx = MemoryCtx::default();
    // Locals, a loop's counter and collectable garbage that lives across the pauses (a
    // collection while the call is paused must not lose them), and 100,000 commands, so
    // some pauses fall inside `redis.call`; about 16 million instructions, past the 5
    // million a call with no slice may run.
    let code = "#!lua name=long
redis.register_function('f', function(keys, args)
      local kept, total = {}, 0
      for i = 1, 1000000 do
        kept[i % 64 + 1] = tostring(i)
        total = total + #kept[i % 64 + 1]
        if i % 10 == 0 then redis.call('INCR', keys[2]) end
      end
      redis.call('SET', keys[1], total)
      return total
    end)";
    load(&mut ctx, code, false).unwrap();
    let expected: i64 = (1..=1_000_000i64).map(|i| i.to_string().len() as i64).sum();
    assert!(
        fcall(&mut ctx, "f", &["k", "n"], &[]).unwrap_err().contains("budget"),
        "with no slice the budget ends it"
    );
    // This context applies writes at once: the count starts again.
    ctx.data.remove(&("db0".to_string(), Bytes::from_static(b"n")));
    let bell = ferry_func::Bell::new();
    ctx.slice = Some(ferry_func::Slice::new(bell.clone(), std::sync::Arc::new(Limit(None))));
    let (stop, rings) = ringer(bell);
    let answer = fcall(&mut ctx, "f", &["k", "n"], &[]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let paused = rings.join().unwrap();
    assert_eq!(answer, Ok(Reply::Integer(expected)));
    assert_eq!(
        ctx.data.get(&("db0".to_string(), Bytes::from_static(b"n"))),
        Some(&Bytes::from_static(b"100000"))
    );
    assert!(paused > 10, "paused {paused} times");
    assert_eq!(
        ctx.data.get(&("db0".to_string(), Bytes::from_static(b"k"))),
        Some(&Bytes::from(expected.to_string()))
    );
}

#[test]
fn a_paused_call_past_its_runtimes_time_limit_ends_past_its_pcalls() {
    let mut ctx = MemoryCtx::default();
    load(&mut ctx, include_str!("../../../examples/lua/hostile.lua"), false).unwrap();
    let bell = ferry_func::Bell::new();
    ctx.slice = Some(ferry_func::Slice::new(
        bell.clone(),
        std::sync::Arc::new(Limit(Some("ERR out of time"))),
    ));
    let (stop, rings) = ringer(bell);
    // (A loop inside a C function cannot be paused: on a node the watchdog ends it.)
    for function in ["spin", "sneaky"] {
        assert_eq!(
            fcall(&mut ctx, function, &[], &[]),
            Err("ERR out of time".to_string()),
            "{function}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    rings.join().unwrap();
    ctx.slice = None;
    assert_eq!(fcall(&mut ctx, "fine", &["k"], &[]).map(|_| ()), Ok(()));
}

#[test]
fn conflicts_end_the_invocation_and_are_not_visible_to_the_script() {
    // A Ctx whose reads of db0 conflict: redis.pcall must not catch it, whether the
    // command runs at once (the storage node inside its slice) or the long way.
    struct Conflicting(MemoryCtx, bool);
    impl ferry_func::Ctx for Conflicting {
        fn immediate(&self) -> bool {
            self.1
        }
        fn args(&self) -> &Bytes {
            self.0.args()
        }
        fn tenant(&self) -> TenantId {
            self.0.tenant()
        }
        fn now_us(&self) -> u64 {
            self.0.now_us()
        }
        fn get<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> ferry_func::CtxFuture<'a, Option<Bytes>> {
            if table == "db0" {
                return Box::pin(async { Err(CtxError::Conflict("changed".into())) });
            }
            self.0.get(table, key)
        }
        fn multiget<'a>(
            &'a mut self,
            table: &'a str,
            keys: &'a [Bytes],
        ) -> ferry_func::CtxFuture<'a, Vec<Option<Bytes>>> {
            if table == "db0" {
                return Box::pin(async { Err(CtxError::Conflict("changed".into())) });
            }
            self.0.multiget(table, keys)
        }
        fn put<'a>(&'a mut self, table: &'a str, key: &'a [u8], value: Bytes) -> ferry_func::CtxFuture<'a, ()> {
            self.0.put(table, key, value)
        }
        fn delete<'a>(&'a mut self, table: &'a str, key: &'a [u8]) -> ferry_func::CtxFuture<'a, ()> {
            self.0.delete(table, key)
        }
    }
    let mut inner = MemoryCtx::default();
    let code = "#!lua name=c\nredis.register_function('f', function(keys) return redis.pcall('GET', keys[1]) end)";
    load(&mut inner, code, false).unwrap();
    let call = FcallArgs {
        function: "f".into(),
        table: "db0".into(),
        keys: vec![Bytes::from_static(b"k")],
        args: vec![],
        read_only: false,
    };
    inner.args = call.encode().unwrap();
    let function = ferry_lua::registry().get(&call.invocation_name()).unwrap();
    for immediate in [true, false] {
        let mut ctx = Conflicting(inner.clone(), immediate);
        let result = block_on(function(&mut ctx));
        assert!(
            matches!(result, Err(FnError::Ctx(CtxError::Conflict(_)))),
            "immediate {immediate}: {result:?}"
        );
    }
}

#[test]
fn the_traverse_example_walks_the_graph_it_loads() {
    let mut ctx = MemoryCtx::default();
    load(&mut ctx, include_str!("../../../examples/lua/traverse.lua"), false).unwrap();
    assert_eq!(
        fcall(&mut ctx, "load_graph", &[], &["0", "100", "100"]),
        Ok(Reply::Integer(100))
    );
    // Follow the same pointers by hand.
    let mut id = 7u64;
    for _ in 0..5 {
        id = (id * 2654435761 + 12345) % 100;
    }
    assert_eq!(
        fcall(&mut ctx, "traverse", &["node:000000000007"], &["5"]),
        Ok(bulk(&format!("node:{id:012}")))
    );
    let err = fcall(&mut ctx, "traverse", &["node:000000000700"], &["5"]);
    assert_eq!(
        err,
        Ok(Reply::Error("ERR dangling pointer at node:000000000700".into()))
    );
}

#[test]
fn the_small_examples_read_and_bump() {
    // examples/lua/small.lua, which scripts/bench_redis.sh runs on Redis and on ferry.
    let mut ctx = MemoryCtx::default();
    load(&mut ctx, include_str!("../../../examples/lua/small.lua"), false).unwrap();
    assert_eq!(fcall(&mut ctx, "bump", &["n"], &[]), Ok(Reply::Integer(1)));
    assert_eq!(fcall(&mut ctx, "bump", &["n"], &[]), Ok(Reply::Integer(2)));
    assert_eq!(
        fcall_as(&mut ctx, "get3", &["n", "missing", "n"], &[], true),
        Ok(Reply::Array(vec![bulk("2"), Reply::Null, bulk("2")]))
    );
    let err = fcall_as(&mut ctx, "bump", &["n"], &[], true).unwrap_err();
    assert!(err.contains("write flag"), "{err}");
}

#[test]
fn tenants_loading_the_same_text_do_not_share_what_its_vm_keeps() {
    // A library that (against Redis's advice) keeps state in a local between calls.
    let stateful =
        "#!lua name=stateful\nlocal n = 0\nredis.register_function('count', function() n = n + 1 return n end)";
    let mut first = MemoryCtx {
        tenant: TenantId(1),
        ..MemoryCtx::default()
    };
    let mut second = MemoryCtx {
        tenant: TenantId(2),
        ..MemoryCtx::default()
    };
    load(&mut first, stateful, false).unwrap();
    load(&mut second, stateful, false).unwrap();
    assert_eq!(fcall(&mut first, "count", &[], &[]), Ok(Reply::Integer(1)));
    assert_eq!(fcall(&mut first, "count", &[], &[]), Ok(Reply::Integer(2)));
    assert_eq!(
        fcall(&mut second, "count", &[], &[]),
        Ok(Reply::Integer(1)),
        "tenant 2 has its own VM"
    );
}
