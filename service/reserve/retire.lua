-- Retire a product's counter at a stock reset: its generation ends, and
-- with it its buyers' units and its requests' records. What is left is a
-- counter of the new generation without stock, so that a late load of an
-- older generation (a purchase that read the product before the reset)
-- cannot bring the ended one back: the first purchase of the new one loads
-- it.
--
-- KEYS[1] the counter, KEYS[2] the units hash, KEYS[3] the requests hash
-- ARGV[1] the new generation
--
-- Returns 1, or 0 when the counter is of a newer generation already.
if tonumber(redis.call('HGET', KEYS[1], 'gen') or '-1') > tonumber(ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'gen', ARGV[1])
return 1
