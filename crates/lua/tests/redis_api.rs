//! The `redis` table and the preloaded libraries as a library's functions see them, through
//! the registry over an in-memory `Ctx`: Redis 7's helpers, its error texts, and
//! `cmsgpack` and `struct` frozen like every global.

use bytes::Bytes;
use ferry_func::memory::{block_on, MemoryCtx};
use ferry_lua::catalog::{self, LoadArgs};
use ferry_lua::fcall::reply_of;
use ferry_lua::FcallArgs;
use ferry_resp::Reply;

fn invoke(ctx: &mut MemoryCtx, name: &str, args: Bytes) -> Result<Bytes, String> {
    ctx.args = args;
    let registry = ferry_lua::registry();
    let function = registry.get(name).unwrap_or_else(|| panic!("{name} is registered"));
    block_on(function(ctx)).map_err(|err| err.to_string())
}

fn load(ctx: &mut MemoryCtx, code: &str) {
    let code = Bytes::copy_from_slice(code.as_bytes());
    invoke(ctx, catalog::LOAD, LoadArgs { replace: false, code }.encode()).unwrap();
}

fn fcall(ctx: &mut MemoryCtx, function: &str, args: &[&[u8]]) -> Result<Reply, String> {
    let call = FcallArgs {
        function: function.to_string(),
        table: "db0".to_string(),
        keys: Vec::new(),
        args: args.iter().map(|a| Bytes::copy_from_slice(a)).collect(),
        read_only: false,
    };
    invoke(ctx, &call.invocation_name(), call.encode().unwrap()).map(|result| reply_of(&result))
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(text.as_bytes()))
}

const API: &str = r#"#!lua name=api
redis.log(redis.LOG_NOTICE, 'loading', 'api')
redis.register_function('facts', function()
  redis.set_repl(redis.REPL_ALL)
  redis.set_repl(redis.REPL_NONE)
  redis.log(redis.LOG_WARNING, 'a', 'warning')
  return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM, tostring(redis.replicate_commands()),
    tostring(redis.breakpoint()), select('#', redis.debug('x')), redis.REPL_NONE, redis.REPL_AOF,
    redis.REPL_REPLICA, redis.REPL_SLAVE, redis.REPL_ALL, tostring(redis.acl_check_cmd('set', 'k', 1))}
end)
local misuses = {
  set_repl = function() redis.set_repl(12345) end,
  set_repl_arity = function() redis.set_repl() end,
  setresp = function() redis.setresp(4) end,
  setresp_arity = function() redis.setresp(2, 3) end,
  log_arity = function() redis.log(redis.LOG_DEBUG) end,
  log_level_type = function() redis.log('loud', 'x') end,
  log_level = function() redis.log(9, 'x') end,
  sha1hex = function() redis.sha1hex() end,
  acl = function() redis.acl_check_cmd('nosuchcommand', 'x') end,
  acl_arity = function() redis.acl_check_cmd() end,
  acl_args = function() redis.acl_check_cmd('get', {}) end,
}
-- What a script's pcall gets: Redis raises its API's errors as tables.
redis.register_function('misuse', function(_, args)
  local ok, err = pcall(misuses[args[1]])
  if type(err) ~= 'table' then return 'not a table: ' .. tostring(err) end
  return err.err
end)
redis.register_function('uncaught', function(_, args) misuses[args[1]]() end)
redis.register_function('replies', function()
  return {redis.error_reply('oops').err, redis.error_reply('MY custom').err,
    redis.error_reply('-CODE x\r\n').err, redis.error_reply(1).err, redis.status_reply(2).err,
    redis.status_reply('FINE').ok}
end)
redis.register_function('libraries', function()
  local offset, value = cmsgpack.unpack_one(cmsgpack.pack({1, 'two', {k = 'v'}}))
  return {offset, value[2], value[3].k, struct.unpack('>I2', struct.pack('>I2', 258)), struct.size('>iii')}
end)
redis.register_function('patch', function(_, args) _G[args[1]].pack = nil end)
redis.register_function('unpack', function(_, args) return cmsgpack.unpack(args[1]) end)
redis.register_function('struct_unpack', function(_, args) return struct.unpack(args[1], args[2]) end)
redis.register_function('caught', function(_, args)
  local ok, err = pcall(struct.unpack, args[1], args[2])
  return {tostring(ok), type(err), err}
end)
"#;

#[test]
fn the_redis_table_has_redis_7s_helpers_with_its_answers() {
    let mut ctx = MemoryCtx::default();
    load(&mut ctx, API);
    let int = Reply::Integer;
    assert_eq!(
        fcall(&mut ctx, "facts", &[]),
        Ok(Reply::Array(vec![
            bulk("7.2.0"),
            int(0x0007_0200),
            bulk("true"),
            bulk("false"),
            int(0),
            int(0),
            int(1),
            int(2),
            int(2),
            int(3),
            bulk("true"),
        ]))
    );
    let misuses = [
        (
            "set_repl",
            "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        ),
        ("set_repl_arity", "ERR redis.set_repl() requires one argument."),
        ("setresp", "ERR RESP version must be 2 or 3."),
        ("setresp_arity", "ERR redis.setresp() requires one argument."),
        ("log_arity", "ERR redis.log() requires two arguments or more."),
        ("log_level_type", "ERR First argument must be a number (log level)."),
        ("log_level", "ERR Invalid log level."),
        ("sha1hex", "ERR wrong number of arguments"),
        ("acl", "ERR Invalid command passed to redis.acl_check_cmd()"),
        (
            "acl_arity",
            "ERR Please specify at least one argument for this redis lib call",
        ),
        (
            "acl_args",
            "ERR Lua redis lib command arguments must be strings or integers",
        ),
    ];
    for (misuse, text) in misuses {
        assert_eq!(
            fcall(&mut ctx, "misuse", &[misuse.as_bytes()]),
            Ok(bulk(text)),
            "{misuse}"
        );
        let err = fcall(&mut ctx, "uncaught", &[misuse.as_bytes()]).unwrap_err();
        assert!(err.ends_with(text), "{misuse}: {err}");
    }
    assert_eq!(
        fcall(&mut ctx, "replies", &[]),
        Ok(Reply::Array(vec![
            bulk("ERR oops"),
            bulk("MY custom"),
            bulk("CODE x"),
            bulk("ERR wrong number or type of arguments"),
            bulk("ERR wrong number or type of arguments"),
            bulk("FINE"),
        ]))
    );
}

#[test]
fn cmsgpack_and_struct_are_preloaded_frozen_and_raise_plain_errors() {
    let mut ctx = MemoryCtx::default();
    load(&mut ctx, API);
    assert_eq!(
        fcall(&mut ctx, "libraries", &[]),
        Ok(Reply::Array(vec![
            Reply::Integer(-1),
            bulk("two"),
            bulk("v"),
            Reply::Integer(258),
            Reply::Integer(12),
        ]))
    );
    for library in ["cmsgpack", "struct"] {
        let err = fcall(&mut ctx, "patch", &[library.as_bytes()]).unwrap_err();
        assert!(err.contains("Attempt to modify a readonly table"), "{library}: {err}");
    }
    assert_eq!(fcall(&mut ctx, "unpack", &[b"\x93\x01\x02\x03"]).map(|_| ()), Ok(()));
    let err = fcall(&mut ctx, "unpack", &[b"\xc1"]).unwrap_err();
    assert!(err.ends_with("ERR Bad data format in input."), "{err}");
    let err = fcall(&mut ctx, "struct_unpack", &[b">i", b"ab"]).unwrap_err();
    assert!(
        err.ends_with("ERR bad argument #2 to 'unpack' (data string too short)"),
        "{err}"
    );
    // A script's pcall gets the message as a string, as from Redis's C libraries.
    assert_eq!(
        fcall(&mut ctx, "caught", &[b"s", b"no terminator"]),
        Ok(Reply::Array(vec![
            bulk("false"),
            bulk("string"),
            bulk("unfinished string in data")
        ]))
    );
}

#[test]
fn a_misuse_while_loading_fails_the_load_with_redis_words() {
    let mut ctx = MemoryCtx::default();
    let code = "#!lua name=bad\nredis.log(redis.LOG_DEBUG)\nredis.register_function('f', function() end)";
    let code = Bytes::copy_from_slice(code.as_bytes());
    let err = invoke(&mut ctx, catalog::LOAD, LoadArgs { replace: false, code }.encode()).unwrap_err();
    assert!(
        err.contains("bad:2: ERR redis.log() requires two arguments or more."),
        "{err}"
    );
}
