-- Reserve units of one product for a batch of purchases, in order, each
-- as the one atomic step of its own: check the stock counter and the
-- buyer's units, take the units, record the request and append the
-- reservation to the stream the writers read. A batch is the purchases of
-- the product waiting on one instance at once: one call for them all.
--
-- KEYS[1] the product's counter: a hash of stock and gen (the stock
--         reset's generation the counter belongs to)
-- KEYS[2] the units each buyer holds of the product, a hash
-- KEYS[3] the product's requests: request ID -> its record, a hash
-- KEYS[4] the stream of reservations of the product's bucket
-- KEYS[5] the bucket's index of request IDs: request ID -> product, a
--         hash, so that a request ID alone finds its record
-- ARGV    product ID, per-user limit (0: none), the product's generation
--         as the caller knows it, "1" when a WAIT follows (a batch that
--         reserved nothing then writes its counter's "seen" field, so that
--         the WAIT covers every write its answers read: a replay's
--         reservation, the reservations a sold_out counted), then for each
--         purchase its user ID, quantity and request ID
--
-- Returns {"load"} when the counter is not there (never loaded, retired by
-- a reset, or lost by Redis) or is of another generation than the
-- caller's: load it, then again. Else the returns the counter has taken
-- back ("ret", the product's count of returns when it last took units
-- back: see refund.lua), then three values per purchase, in order:
--   "seen", 0, record      the request ID was used: its record,
--                          "p|quantity|left|user" while pending (see
--                          Record)
--   "sold_out", stock, ""  fewer than the quantity left
--   "limit", units, ""     the buyer would pass the limit
--   "ok", left, gen        reserved: the stock it left, its generation
local stock = redis.call('HGET', KEYS[1], 'stock')
local gen = redis.call('HGET', KEYS[1], 'gen')
if not stock or tonumber(gen) ~= tonumber(ARGV[3]) then
  return {'load'}
end
stock = tonumber(stock)
local limit = tonumber(ARGV[2])
local out = {tonumber(redis.call('HGET', KEYS[1], 'ret') or '0')}
local wrote = false
for i = 5, #ARGV, 3 do
  local user, q, rid = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local seen = redis.call('HGET', KEYS[3], rid)
  local units = 0
  if limit > 0 then
    units = tonumber(redis.call('HGET', KEYS[2], user) or '0')
  end
  if seen then
    out[#out + 1], out[#out + 2], out[#out + 3] = 'seen', 0, seen
  elseif stock < q then
    out[#out + 1], out[#out + 2], out[#out + 3] = 'sold_out', stock, ''
  elseif limit > 0 and units + q > limit then
    out[#out + 1], out[#out + 2], out[#out + 3] = 'limit', units, ''
  else
    stock = redis.call('HINCRBY', KEYS[1], 'stock', -q)
    redis.call('HINCRBY', KEYS[2], user, q)
    redis.call('HSET', KEYS[3], rid, 'p|' .. q .. '|' .. stock .. '|' .. user)
    redis.call('HSET', KEYS[5], rid, ARGV[1])
    wrote = true
    redis.call('XADD', KEYS[4], '*', 'p', ARGV[1], 'u', user, 'q', q, 'r', rid, 'g', gen, 'l', stock)
    out[#out + 1], out[#out + 2], out[#out + 3] = 'ok', stock, gen
  end
end
if not wrote and ARGV[4] == '1' then
  redis.call('HINCRBY', KEYS[1], 'seen', 1)
end
return out
