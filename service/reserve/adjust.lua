-- Move a product's counter by delta, if it is still of the generation
-- given and has stock: a correction worked out from a snapshot (check.lua)
-- while the product's row was locked, applied as a difference so that the
-- reservations taken since the snapshot keep theirs.
--
-- KEYS[1] the counter; ARGV the generation, delta
--
-- Returns {1, the counter's stock after}, or {0, 0} when it was not
-- changed.
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'stock') == 0 then
  return {0, 0}
end
return {1, redis.call('HINCRBY', KEYS[1], 'stock', ARGV[2])}
