-- Run once in every VM before the library: the `redis` table, and the sandbox's edges.
-- Receives `spent`, a Rust function telling whether the running call's instruction
-- budget is gone; returns `run` (the trampoline every call starts in) and `finish`
-- (ends loading: returns the registered functions and freezes the globals).
local spent = ...
local yield = coroutine.yield
local raw_pcall, raw_xpcall = pcall, xpcall
local error, select, type, tostring, setmetatable = error, select, type, tostring, setmetatable

-- A budget error caught by the script is raised again: a runaway loop cannot swallow it.
local function rethrow(ok, ...)
  if not ok and spent() then error((...), 0) end
  return ok, ...
end
pcall = function(f, ...) return rethrow(raw_pcall(f, ...)) end
xpcall = function(f, handler, ...) return rethrow(raw_xpcall(f, handler, ...)) end

-- Every command is a yield to the Rust side, which runs it against the invocation's Ctx
-- and resumes with (ok, reply).
local function command(...)
  if select('#', ...) == 0 then
    return false, { err = 'ERR Please specify at least one argument for this redis lib call' }
  end
  return yield(...)
end

local registered = {}
local loading = true

redis = {
  call = function(...)
    local ok, reply = command(...)
    if ok then return reply end
    error(reply, 0)
  end,
  pcall = function(...)
    local _, reply = command(...)
    return reply
  end,
  error_reply = function(message) return { err = message } end,
  status_reply = function(message) return { ok = message } end,
  log = function() end,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  register_function = function(a, b)
    if not loading then
      error('ERR redis.register_function can only be called on FUNCTION LOAD command', 2)
    end
    local name, callback, flags
    if type(a) == 'table' then
      name, callback, flags = a.function_name, a.callback, a.flags
    else
      name, callback = a, b
    end
    if type(name) ~= 'string' then
      error('ERR function name argument given to redis.register_function must be a string', 2)
    end
    if type(callback) ~= 'function' then
      error('ERR callback argument given to redis.register_function must be a function', 2)
    end
    if flags ~= nil and type(flags) ~= 'table' then
      error('ERR flags argument to redis.register_function must be a table representing function flags', 2)
    end
    if registered[name] then error('ERR Function already exists in the library', 2) end
    registered[name] = { callback = callback, flags = flags or {} }
  end,
}

-- Not in a storage function's reach: code loading, files, the OS, printing, coroutines.
coroutine, load, loadstring, loadfile, dofile, require, print = nil, nil, nil, nil, nil, nil, nil

local function run(callback, keys, args)
  return raw_pcall(callback, keys, args)
end

local function finish()
  loading = false
  setmetatable(_G, {
    __newindex = function(_, name)
      error('ERR Attempt to create global variable \'' .. tostring(name) .. '\'', 2)
    end,
    __metatable = false,
  })
  return registered
end

return run, finish
