-- Load a product's counter for a generation: the stock moved from the
-- database, once. A counter of this generation or a newer one is kept as
-- it is (another instance loaded it first, and reservations may have
-- taken units since); one of an older generation is replaced, and the
-- older generation's buyers and requests are forgotten with it.
--
-- KEYS[1] the counter (hash: stock, gen), KEYS[2] the units hash,
-- KEYS[3] the requests hash
-- ARGV    the stock, the generation
--
-- Returns {loaded (1 or 0), the counter's stock, its generation}.
local gen = tonumber(redis.call('HGET', KEYS[1], 'gen') or '-1')
local want = tonumber(ARGV[2])
if gen >= want then
  return {0, tonumber(redis.call('HGET', KEYS[1], 'stock')), gen}
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'gen', ARGV[2])
return {1, tonumber(ARGV[1]), want}
