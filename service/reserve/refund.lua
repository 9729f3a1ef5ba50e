-- Give an order's units back to its product's counter and its buyer's
-- count, once: the counter's field "r:<order>" marks the orders whose
-- units it took back, so that the instance that returned the order and
-- any other that finds its return still waiting (a crash between the
-- database's COMMIT and this script) give them back once between them. A
-- counter of another generation, or without stock (lost, or not loaded),
-- is left alone: the load that makes it derives it from the database,
-- whose stock has the units already, and marks the order (load.lua).
--
-- The counter also keeps the product's count of returns it has taken back
-- ("ret"): a reading of it is of that version of the stock (the stock
-- cache's, stockcache.Version), so that one taken before the units came
-- back cannot hide them.
--
-- KEYS[1] the counter, KEYS[2] the units hash
-- ARGV    the generation, the order ID, the quantity, the buyer, the
--         product's count of returns with this one
--
-- Returns 1 when the units went back, 2 when the order was marked
-- already, 0 when the counter is not of the generation (nothing to do).
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'stock') == 0 then
  return 0
end
if redis.call('HSETNX', KEYS[1], 'r:' .. ARGV[2], 1) == 0 then
  return 2
end
local q = tonumber(ARGV[3])
redis.call('HINCRBY', KEYS[1], 'stock', q)
if tonumber(redis.call('HGET', KEYS[1], 'ret') or '0') < tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'ret', ARGV[5])
end
if redis.call('HINCRBY', KEYS[2], ARGV[4], -q) <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[4])
end
return 1
