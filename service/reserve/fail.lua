-- Record that the database refused a reservation, and why, once: its
-- request's record says so from then on, and unless the refusal was
-- sold_out (the database has fewer units than the counter said, so the
-- counter is high already) its units go back to the counter and its
-- buyer's count, if the counter is still of its generation.
--
-- KEYS[1] the counter, KEYS[2] the units hash, KEYS[3] the requests hash
-- ARGV    the request ID, the failed record, the quantity, the buyer, the
--         generation, 1 to give the units back (0 not)
--
-- Returns 1, or 0 when the record said so already (nothing changed).
local rec = redis.call('HGET', KEYS[3], ARGV[1])
if rec and string.sub(rec, 1, 2) == 'f|' then
  return 0
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
if ARGV[6] == '1' and redis.call('HGET', KEYS[1], 'gen') == ARGV[5] and redis.call('HEXISTS', KEYS[1], 'stock') == 1 then
  local q = tonumber(ARGV[3])
  redis.call('HINCRBY', KEYS[1], 'stock', q)
  if redis.call('HINCRBY', KEYS[2], ARGV[4], -q) <= 0 then
    redis.call('HDEL', KEYS[2], ARGV[4])
  end
end
return 1
