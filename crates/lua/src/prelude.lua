-- Run once in every VM before the library: the `redis` table, and the sandbox's edges.
-- Receives four Rust functions: `stopped`, telling whether the running call must end (its
-- instruction budget is gone, or its data access failed in a way that ends the
-- invocation); `set_resp3`, which makes the call's `redis.call` replies RESP3's
-- (`redis.setresp`); `sha1hex`; and `known_command` (a command ferry serves); then the
-- Redis version ferry reports, as text and as Redis's number. Returns:
--   run         the trampoline every call starts in;
--   drive       the driver that resumes a call's coroutine (see below);
--   finish      ends loading: returns the registered functions, and from then on the
--               library's globals are read-only;
--   env         the environment the library's chunk is loaded in;
--   set_direct  sets the function `redis.call` uses to run a command at once (it answers
--               `nil` when the command must go the long way: a yield to the Rust side).
--
-- The sandbox, as strong as Redis's: the library sees its globals through `env`, an empty
-- table whose reads fall through to them and whose writes fail once loading ends; `redis`,
-- the standard library tables and `_G` are read-only proxies; the string metatable is
-- hidden; `rawset` refuses every one of those. So nothing a call does to globals survives
-- it, and one function cannot change what another sees.
local stopped, set_resp3, sha1hex, known_command, redis_version, redis_version_num = ...
local yield, resume, status = coroutine.yield, coroutine.resume, coroutine.status
local raw_pcall, raw_xpcall, raw_rawset = pcall, xpcall, rawset
local error, select, type, tostring, setmetatable, pairs = error, select, type, tostring, setmetatable, pairs
local tonumber, floor = tonumber, math.floor

-- Tables no script may write, not even through `rawset` (weak keys: never kept alive here).
local frozen = setmetatable({}, { __mode = 'k' })

local function refuse(_, name)
  error('ERR Attempt to modify a readonly table: ' .. tostring(name), 2)
end

-- A read-only view of `target`: reads fall through, writes and `setmetatable` fail.
local function freeze(target)
  local proxy = setmetatable({}, { __index = target, __newindex = refuse, __metatable = false })
  frozen[proxy] = true
  return proxy
end

-- A budget error (or an ended access) caught by the script is raised again: a runaway
-- loop cannot swallow it.
local function rethrow(ok, ...)
  if not ok and stopped() then error((...), 0) end
  return ok, ...
end
pcall = function(f, ...) return rethrow(raw_pcall(f, ...)) end
xpcall = function(f, handler, ...) return rethrow(raw_xpcall(f, handler, ...)) end
rawset = function(t, k, v)
  if frozen[t] then refuse(t, k) end
  return raw_rawset(t, k, v)
end

-- Every command runs through `direct` when the invocation's data can answer at once, and
-- is otherwise a yield to the Rust side, which runs it against the invocation's Ctx and
-- resumes with (ok, reply).
local direct = function()
  error('ERR redis.call is not available while a library loads', 3)
end
local function command(...)
  if select('#', ...) == 0 then
    return false, { err = 'ERR Please specify at least one argument for this redis lib call' }
  end
  local ok, reply = direct(...)
  if ok == nil then return yield(...) end
  return ok, reply
end

local registered = {}
local loading = true

-- An error of the `redis` API as Redis raises it: the table `{err = text}` a script's
-- `pcall` gets and the caller sees as the error reply. While a library loads, a string
-- (with the caller's position): the loader reports only those.
local function raise(text)
  if loading then error(text, 3) end
  error({ err = text }, 0)
end

-- Redis's form of an error text (`luaPushErrorBuff`): `-CODE message` loses its dash,
-- text without one gets the code `ERR`; trailing line ends go.
local function error_text(text)
  local code, message = 'ERR', text
  if text:sub(1, 1) == '-' then
    local space = text:find(' ', 2, true)
    if space then
      code, message = text:sub(2, space - 1), text:sub(space + 1)
    else
      message = text:sub(2)
    end
  end
  return code .. ' ' .. message:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
end

-- Lua 5.1's `lua_tonumber` then a C `int`, as Redis reads a level, a flag or a version:
-- not a number is 0; a fraction is cut toward zero.
local function c_int(value)
  local n = tonumber(value) or 0
  if n ~= n or n == math.huge or n == -math.huge then return 0 end
  return n >= 0 and floor(n) or -floor(-n)
end

-- The arguments of a command as `redis.call` would send them, or the error it would raise.
local function command_name(...)
  local n = select('#', ...)
  if n == 0 then raise('ERR Please specify at least one argument for this redis lib call') end
  for i = 1, n do
    local arg = (select(i, ...))
    if type(arg) ~= 'string' and type(arg) ~= 'number' then
      raise('ERR Lua redis lib command arguments must be strings or integers')
    end
  end
  return tostring((...))
end

local redis = {
  call = function(...)
    local ok, reply = command(...)
    if ok then return reply end
    error(reply, 0)
  end,
  pcall = function(...)
    local _, reply = command(...)
    return reply
  end,
  -- Wrong arguments are answered, not raised, as in Redis.
  error_reply = function(...)
    local message = ...
    if select('#', ...) ~= 1 or type(message) ~= 'string' then
      return { err = 'ERR wrong number or type of arguments' }
    end
    if message:sub(1, 1) ~= '-' then message = '-' .. message end
    return { err = error_text(message) }
  end,
  status_reply = function(...)
    local message = ...
    if select('#', ...) ~= 1 or type(message) ~= 'string' then
      return { err = 'ERR wrong number or type of arguments' }
    end
    return { ok = message }
  end,
  -- Checked as Redis checks it, then dropped: the node keeps no script log.
  log = function(...)
    local n, level = select('#', ...), ...
    if n < 2 then raise('ERR redis.log() requires two arguments or more.') end
    if tonumber(level) == nil then raise('ERR First argument must be a number (log level).') end
    level = c_int(level)
    if level < 0 or level > 3 then raise('ERR Invalid log level.') end
  end,
  setresp = function(...)
    if select('#', ...) ~= 1 then raise('ERR redis.setresp() requires one argument.') end
    local version = c_int((...))
    if version ~= 2 and version ~= 3 then raise('ERR RESP version must be 2 or 3.') end
    set_resp3(version == 3)
  end,
  sha1hex = function(...)
    if select('#', ...) ~= 1 then raise('ERR wrong number of arguments') end
    local text = ...
    if type(text) ~= 'string' and type(text) ~= 'number' then text = '' end
    return sha1hex(tostring(text))
  end,
  -- Accepted and checked; ferry replicates a call's writes as one transaction whatever
  -- the script asks.
  set_repl = function(...)
    if select('#', ...) ~= 1 then raise('ERR redis.set_repl() requires one argument.') end
    local flags = c_int((...))
    if flags < 0 or flags > 3 then
      raise('ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
    end
  end,
  -- Redis 7 always replicates commands: true, as there.
  replicate_commands = function() return true end,
  -- No Lua debugger: not in a debugging session, as Redis answers outside one.
  breakpoint = function() return false end,
  debug = function() end,
  -- A tenant's user may run every command ferry serves: true for a known command.
  acl_check_cmd = function(...)
    if not known_command(command_name(...)) then
      raise('ERR Invalid command passed to redis.acl_check_cmd()')
    end
    return true
  end,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REPL_NONE = 0, REPL_AOF = 1, REPL_SLAVE = 2, REPL_REPLICA = 2, REPL_ALL = 3,
  REDIS_VERSION = redis_version, REDIS_VERSION_NUM = redis_version_num,
  -- Positional (name, callback) or named ({function_name=, callback=, flags=,
  -- description=}) arguments, checked with Redis's words.
  register_function = function(...)
    if not loading then
      error('ERR redis.register_function can only be called on FUNCTION LOAD command', 2)
    end
    local argc = select('#', ...)
    if argc < 1 or argc > 2 then raise('wrong number of arguments to redis.register_function') end
    local name, callback, flags, description
    if argc == 1 then
      local named = ...
      if type(named) ~= 'table' then
        raise('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
      end
      for key, value in pairs(named) do
        if type(key) ~= 'string' then
          raise('named argument key given to redis.register_function is not a string')
        elseif key == 'function_name' then
          if type(value) ~= 'string' then
            raise('function_name argument given to redis.register_function must be a string')
          end
          name = value
        elseif key == 'description' then
          if type(value) ~= 'string' then
            raise('description argument given to redis.register_function must be a string')
          end
          description = value
        elseif key == 'callback' then
          if type(value) ~= 'function' then
            raise('callback argument given to redis.register_function must be a function')
          end
          callback = value
        elseif key == 'flags' then
          if type(value) ~= 'table' then
            raise('flags argument to redis.register_function must be a table representing function flags')
          end
          -- Each flag's name is checked against Redis's once the library has loaded.
          for _, flag in ipairs(value) do
            if type(flag) ~= 'string' then raise('unknown flag given') end
          end
          flags = value
        else
          raise('unknown argument given to redis.register_function')
        end
      end
      if name == nil then raise('redis.register_function must get a function name argument') end
      if callback == nil then raise('redis.register_function must get a callback argument') end
    else
      name, callback = ...
      if type(name) ~= 'string' then raise('first argument to redis.register_function must be a string') end
      if type(callback) ~= 'function' then
        raise('second argument to redis.register_function must be a function')
      end
    end
    if registered[name] then raise('Function already exists in the library') end
    registered[name] = { callback = callback, flags = flags or {}, description = description }
  end,
}

-- Not in a storage function's reach: code loading, files, the OS, printing, coroutines.
coroutine, load, loadstring, loadfile, dofile, require, print = nil, nil, nil, nil, nil, nil, nil

-- The string metatable (what `("x"):upper()` goes through) is shared by every string of
-- the VM: hidden, so no call can change it for the next.
getmetatable('').__metatable = false

-- Lua 5.1's `table.getn`, which Redis's scripts (and its Functions tutorial) call.
table.getn = function(t) return #t end

-- The `bit` library Redis preloads (LuaBitOp: 32-bit operations, signed results), over
-- Lua 5.4's integer operators.
local function tobit(x)
  x = math.floor(x) & 0xFFFFFFFF
  if x >= 0x80000000 then x = x - 0x100000000 end
  return x
end
local function fold(op)
  return function(x, ...)
    local result = tobit(x)
    for i = 1, select('#', ...) do result = op(result, tobit((select(i, ...)))) end
    return tobit(result)
  end
end
local function shift_of(n) return tobit(n) & 31 end
bit = {
  tobit = tobit,
  bnot = function(x) return tobit(~tobit(x)) end,
  band = fold(function(a, b) return a & b end),
  bor = fold(function(a, b) return a | b end),
  bxor = fold(function(a, b) return a ~ b end),
  lshift = function(x, n) return tobit(tobit(x) << shift_of(n)) end,
  rshift = function(x, n) return tobit((tobit(x) & 0xFFFFFFFF) >> shift_of(n)) end,
  -- A negative 32-bit value is negative in 64 bits too: its high bits shift in as ones.
  arshift = function(x, n) return tobit(tobit(x) >> shift_of(n)) end,
  rol = function(x, n)
    local v, s = tobit(x) & 0xFFFFFFFF, shift_of(n)
    return tobit((v << s) | (v >> (32 - s)))
  end,
  ror = function(x, n)
    local v, s = tobit(x) & 0xFFFFFFFF, shift_of(n)
    return tobit((v >> s) | (v << (32 - s)))
  end,
  bswap = function(x)
    local v = tobit(x) & 0xFFFFFFFF
    return tobit(((v & 0xFF) << 24) | ((v & 0xFF00) << 8) | ((v >> 8) & 0xFF00) | (v >> 24))
  end,
  tohex = function(x, n)
    n = n or 8
    local upper = n < 0
    if upper then n = -n end
    local digits = string.format(upper and '%08X' or '%08x', tobit(x) & 0xFFFFFFFF)
    return digits:sub(-math.min(n, 8))
  end,
}

-- Redis's sandbox: reading a global nobody defined is an error (a typo fails loudly
-- instead of reading nil), and the globals' metatable is itself read-only.
local function nonexistent(_, name)
  error('Script attempted to access nonexistent global variable \'' .. tostring(name) .. '\'', 2)
end
local protected_metatable = freeze({})

-- A read-only view of `target` in which reading a missing name is an error too.
local function freeze_strict(target)
  local proxy = setmetatable({}, {
    __index = function(_, name)
      local value = target[name]
      if value == nil then nonexistent(nil, name) end
      return value
    end,
    __newindex = refuse,
    __metatable = false,
  })
  frozen[proxy] = true
  return proxy
end

-- A library's functions see the builtins, with every table among them (and `redis`)
-- read-only; their `redis` has no `register_function` (Redis's: calling it there is
-- calling nil).
local builtins = {}
for name, value in pairs(_G) do
  builtins[name] = type(value) == 'table' and freeze(value) or value
end
local at_call = {}
for name, value in pairs(redis) do
  if name ~= 'register_function' then at_call[name] = value end
end
builtins.redis = freeze(at_call)
-- Redis runs Lua 5.1, whose scripts call the global `unpack` (5.4 moved it to `table`).
builtins.unpack = table.unpack
-- Changing the metatable of a read-only table (the globals among them) is refused in
-- Redis's words, not Lua's ("cannot change a protected metatable").
builtins.setmetatable = function(target, metatable)
  if frozen[target] then
    refuse(nil, 'metatable')
  end
  return setmetatable(target, metatable)
end

-- What a library's own code sees while it loads (Redis's load run): `redis` with
-- registering, logging and the version, nothing that reads or writes data, and no other
-- global. Locals it defines stay with the functions it registers.
local at_load = {
  register_function = redis.register_function,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE, LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
local library_api = { redis = freeze_strict(at_load) }

-- The globals of a library: the load run's while it loads, the builtins after; no name
-- may be set, whether it loads or runs.
local env = setmetatable({}, {
  __index = function(_, name)
    local value
    if loading then value = library_api[name] else value = builtins[name] end
    if value == nil then nonexistent(nil, name) end
    return value
  end,
  __newindex = refuse,
  __metatable = protected_metatable,
})
frozen[env] = true
raw_rawset(builtins, '_G', env)

local function run(callback, keys, args)
  return raw_pcall(callback, keys, args)
end

-- The driver a call's coroutine is resumed from (it runs in a coroutine the Rust side
-- resumes): it passes what the call yields out (a command's words; nothing, when the
-- VM's hook paused the call at the end of its slice) and what comes back in (the reply;
-- nothing). Lua's own resume keeps a coroutine paused by the hook intact, where a resume
-- from the Rust side resets its stack top and the call's locals are lost at the next
-- collection.
local function step(call, resumed, ...)
  if not resumed then return false, ... end
  if status(call) == 'dead' then return ... end
  return step(call, resume(call, yield(...)))
end
local function drive(call, ...)
  return step(call, resume(call, ...))
end

local function finish()
  loading = false
  return registered
end

local function set_direct(f)
  direct = f
end

return run, drive, finish, env, set_direct
