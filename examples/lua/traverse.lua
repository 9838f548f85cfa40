#!lua name=graph
-- Pointer chasing (Kayak's traverse) as a Redis Functions library: runs unchanged on
-- Redis 7 and on ferry.
--
--   FCALL traverse 1 node:000000000042 DEPTH    -> the id reached after DEPTH hops
--   FCALL load_graph 0 FIRST COUNT NODES        -> writes nodes FIRST..FIRST+COUNT-1
--
-- Node `node:<id, 12 digits>` holds the next node's id (12 digits) padded to 100 bytes,
-- the next id being a fixed pseudo-random function of the id, so both stores hold the
-- same graph. The 12-digit ids match redis-benchmark's __rand_int__.
--
--   FCALL walk 1 START DEPTH                    -> (ferry only: Lua 5.4's string.pack)
-- walks the native `traverse` built-in's data set (8-byte little-endian ids), to price
-- the VM against the Rust function on the same data.

local function key(id)
  return string.format('node:%012d', id)
end

local function next_id(id, nodes)
  return (id * 2654435761 + 12345) % nodes
end

local function traverse(keys, args)
  local depth = tonumber(args[1]) or 1
  local id = keys[1]
  for _ = 1, depth do
    local value = redis.call('GET', id)
    if not value then
      return redis.error_reply('ERR dangling pointer at ' .. id)
    end
    id = 'node:' .. string.sub(value, 1, 12)
  end
  return id
end

local function load_graph(_, args)
  local first, count, nodes = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local padding = string.rep('x', 88)
  for id = first, first + count - 1 do
    redis.call('SET', key(id), string.format('%012d', next_id(id, nodes)) .. padding)
  end
  return count
end

local function walk(keys, args)
  local depth = tonumber(args[1]) or 1
  local node = keys[1]
  local bytes = 0
  for _ = 1, depth do
    local value = redis.call('GET', node)
    if not value then
      return redis.error_reply('ERR dangling pointer')
    end
    bytes = bytes + #value
    node = string.sub(value, 1, 8)
  end
  return { string.unpack('<i8', node), bytes }
end

redis.register_function { function_name = 'traverse', callback = traverse, flags = { 'no-writes' } }
redis.register_function('load_graph', load_graph)
redis.register_function { function_name = 'walk', callback = walk, flags = { 'no-writes' } }
