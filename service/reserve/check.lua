-- A snapshot of a product's counter and of the reservations of its
-- generation that the stream holds and no writer has acknowledged (read
-- and pending, or not read yet), taken in one atomic step, so that the
-- caller can hold the counter against the database: the counter must be
-- the database's stock less what those reservations took that the
-- database has not written. Reservations already refused (their record
-- failed) gave their units back, and are left out. (The scan of the stream
-- is load.lua's.)
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
if redis.call('EXISTS', KEYS[3]) == 1 then
  local last = '0-0'
  local groups = redis.pcall('XINFO', 'GROUPS', KEYS[3])
  if type(groups) == 'table' and not groups.err then
    for _, g in ipairs(groups) do
      local f = {}
      for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
      if f.name == ARGV[3] then
        last = f['last-delivered-id']
        for _, p in ipairs(redis.call('XPENDING', KEYS[3], ARGV[3], '-', '+', 1000000)) do
          local e = redis.call('XRANGE', KEYS[3], p[1], p[1])
          if e[1] then add(e[1][2]) end
        end
      end
    end
  end
  for _, e in ipairs(redis.call('XRANGE', KEYS[3], last, '+')) do
    if e[1] ~= last then add(e[2]) end
  end
end
return out
