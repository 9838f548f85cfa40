#!lua name=hostile
-- Functions that misbehave, for the tests and the limits' timing (vm_cost): each must end
-- in an error for its own call alone while `fine` keeps working.

-- A bare runaway loop.
redis.register_function('spin', function() while true do end end)

-- A runaway that catches the budget error and carries on.
redis.register_function('sneaky', function()
  while true do pcall(function() while true do end end) end
end)

-- Runaways inside C functions, where Lua cannot yield.
redis.register_function('sorted_spin', function()
  table.sort({3, 2, 1}, function(a, b) while true do end end)
end)
redis.register_function('caught_sort', function()
  while true do pcall(table.sort, {3, 2, 1}, function(a, b) while true do end end) end
end)
redis.register_function('gsub_spin', function()
  return string.gsub('abc', '.', function() while true do end end)
end)

-- Memory without bound.
redis.register_function('hog', function()
  local t = {}
  for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end
end)

-- And one that behaves.
redis.register_function('fine', function(keys) return redis.call('INCR', keys[1]) end)
