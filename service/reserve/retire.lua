-- Retire a product's counter at a stock reset: its generation ends, and
-- with it its buyers' units, its requests' records and their entries in
-- the bucket's index of request IDs. What is left is a counter of the new
-- generation without stock, so that the first purchase of the new one
-- loads it. A counter of the new generation or a newer one was loaded
-- after the reset, under the product's row lock (an instance that heard of
-- the reset first): it is left as it is.
--
-- KEYS[1] the counter, KEYS[2] the units hash, KEYS[3] the requests hash,
-- KEYS[4] the bucket's index of request IDs
-- ARGV[1] the new generation, ARGV[2] the product
--
-- Returns 1, or 0 when the counter is of the new generation already.
if tonumber(redis.call('HGET', KEYS[1], 'gen') or '-1') >= tonumber(ARGV[1]) then
  return 0
end
for _, rid in ipairs(redis.call('HKEYS', KEYS[3])) do
  if redis.call('HGET', KEYS[4], rid) == ARGV[2] then
    redis.call('HDEL', KEYS[4], rid)
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'gen', ARGV[1])
return 1
