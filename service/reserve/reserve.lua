-- Reserve units of one product, as one atomic step: check the stock
-- counter and the buyer's units, take the units, record the request and
-- append the reservation to the stream the writers read.
--
-- KEYS[1] the product's counter: a hash of stock and gen (the stock
--         reset's generation the counter belongs to)
-- KEYS[2] the units each buyer holds of the product, a hash
-- KEYS[3] the product's requests: request ID -> its record, a hash
-- KEYS[4] the stream of reservations of the product's bucket
-- KEYS[5] the bucket's index of request IDs: request ID -> product, a
--         hash, so that a request ID alone finds its record
-- ARGV    product ID, user ID, quantity, request ID, per-user limit (0:
--         none), the product's generation as the caller knows it
--
-- Returns {verdict, n, record}:
--   {"load"}               the counter is not there (never loaded, retired
--                          by a reset, or lost by Redis), or is of another
--                          generation than the caller's: load it, then
--                          again
--   {"seen", 0, record}    the request ID was used: its record,
--                          "p|quantity|left|user" while pending (see
--                          Record)
--   {"sold_out", stock}    fewer than the quantity left
--   {"limit", units}       the buyer would pass the limit
--   {"ok", left, gen}      reserved: the stock it left, its generation
local stock = redis.call('HGET', KEYS[1], 'stock')
if not stock or tonumber(redis.call('HGET', KEYS[1], 'gen')) ~= tonumber(ARGV[6]) then
  return {'load'}
end
local seen = redis.call('HGET', KEYS[3], ARGV[4])
if seen then
  return {'seen', 0, seen}
end
local q = tonumber(ARGV[3])
stock = tonumber(stock)
if stock < q then
  return {'sold_out', stock}
end
local limit = tonumber(ARGV[5])
if limit > 0 then
  local units = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
  if units + q > limit then
    return {'limit', units}
  end
end
local left = redis.call('HINCRBY', KEYS[1], 'stock', -q)
local gen = redis.call('HGET', KEYS[1], 'gen')
redis.call('HINCRBY', KEYS[2], ARGV[2], q)
redis.call('HSET', KEYS[3], ARGV[4], 'p|' .. ARGV[3] .. '|' .. left .. '|' .. ARGV[2])
redis.call('HSET', KEYS[5], ARGV[4], ARGV[1])
redis.call('XADD', KEYS[4], '*', 'p', ARGV[1], 'u', ARGV[2], 'q', ARGV[3], 'r', ARGV[4], 'g', gen, 'l', left)
return {'ok', left, gen}
