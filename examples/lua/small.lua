#!lua name=small
-- Small functions as a new user writes them, for scripts/bench_redis.sh: runs unchanged on
-- Redis 7 and on ferry.
--
--   FCALL get3 3 K1 K2 K3      -> the three values (read-only: flagged no-writes)
--   FCALL bump 1 K             -> K's number plus one, written back (read-modify-write)

local function get3(keys)
  return { redis.call('GET', keys[1]), redis.call('GET', keys[2]), redis.call('GET', keys[3]) }
end

local function bump(keys)
  local n = (tonumber(redis.call('GET', keys[1])) or 0) + 1
  redis.call('SET', keys[1], n)
  return n
end

redis.register_function { function_name = 'get3', callback = get3, flags = { 'no-writes' } }
redis.register_function('bump', bump)
