-- A snapshot of a product's counter and of the reservations of its
-- generation that the stream holds and no writer has acknowledged (read
-- and pending, or not read yet), taken in one atomic step, so that the
-- caller can hold the counter against the database: the counter must be
-- the database's stock less what those reservations took that the
-- database has not written. Reservations already refused (their record
-- failed) gave their units back, and are left out. (The scan of the stream
-- is waiting.lua's.)
--
-- It also says which of the orders given the counter took back the units
-- of (refund.lua's marks): their returns reached Redis.
--
-- KEYS[1] the counter, KEYS[2] the requests hash, KEYS[3] the bucket's
-- stream
-- ARGV    the product, the generation, the writers' group, the number m
--         of orders, then their IDs
--
-- Returns {1 when the counter has stock (0: none), its stock, its
-- generation (-1: none), the number k of the orders marked, their IDs,
-- then for each reservation waiting its request ID and its quantity}.
local gen = tonumber(redis.call('HGET', KEYS[1], 'gen') or '-1')
local stock = redis.call('HGET', KEYS[1], 'stock')
local marked = {}
for i = 5, 4 + tonumber(ARGV[4]) do
  if redis.call('HEXISTS', KEYS[1], 'r:' .. ARGV[i]) == 1 then
    marked[#marked + 1] = tonumber(ARGV[i])
  end
end
local out = {stock and 1 or 0, tonumber(stock or '0'), gen, #marked}
for _, id in ipairs(marked) do out[#out + 1] = id end
local product, want = ARGV[1], tonumber(ARGV[2])
local function add(fields)
  local f = {}
  for i = 1, #fields, 2 do f[fields[i]] = fields[i + 1] end
  if f.p == product and tonumber(f.g) == want then
    local rec = redis.call('HGET', KEYS[2], f.r)
    if not (rec and string.sub(rec, 1, 2) == 'f|') then
      out[#out + 1] = f.r
      out[#out + 1] = tonumber(f.q)
    end
  end
end
waiting(KEYS[3], ARGV[3], add)
return out
