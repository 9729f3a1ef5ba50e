-- Load a product's counter for a generation, from the database: its stock
-- and its buyers' units, as read under the product's row lock, less what
-- the reservations of that generation still waiting in the stream took
-- (they are not in the database yet). A counter of this generation with
-- stock is kept as it is (another instance loaded it first, and
-- reservations may have taken units since). When the caller holds the row
-- lock, the generation it gives is the database's, and the database's
-- word goes: one of any other generation is replaced, and its generation's
-- records go with it (an older one: a reset whose retirement did not reach
-- Redis; a newer one: a database restored or recreated under a Redis that
-- kept its keys). A first load made after its COMMIT, without the lock,
-- replaces only an older one: a newer one comes from a reset since. A
-- counter that is not there at all (Redis lost it, or never had it) keeps
-- the records it finds.
--
-- The orders whose units the database took back and whose return has not
-- reached a counter yet (a crash between the two) are marked on the
-- counter as returned ("r:<order>", refund.lua): the database's stock has
-- their units already, and its buyers' units leave them out.
--
-- The database's orders of the generation come with their request IDs:
-- each gets a record unless it has one (a counter lost alone keeps its
-- records), so that a replay of a request written before the load (under
-- another strategy, or before Redis lost its data) is answered as seen,
-- and finds its order, rather than reserving again.
--
-- KEYS[1] the counter (hash: stock, gen), KEYS[2] the units hash,
-- KEYS[3] the requests hash, KEYS[4] the bucket's stream, KEYS[5] the
-- bucket's index of request IDs
-- ARGV    the stock, the generation and the product's count of returns
--         (the counter's "ret": see refund.lua) as "generation:returns",
--         the product, the writers' group (""
--         when no reservation of the generation can be waiting: its first
--         load, whose scan of the stream would find none), "1" when the
--         caller holds the row lock (else a counter of a newer generation,
--         loaded after a reset, is kept), the
--         number n of buyers, the number m of returned orders, then n
--         pairs of a buyer and the units the database's orders give them,
--         then the m returned orders' IDs, then pairs of a request ID and
--         its record
--
-- Returns {loaded (1 or 0), the counter's stock, its generation, the
-- reservations found waiting, the units they took, the generation the
-- counter had before (-1: none), the counter's count of returns (its
-- version: a counter kept may not have taken back a return on its way)}.
local gen = tonumber(redis.call('HGET', KEYS[1], 'gen') or '-1')
local stock = redis.call('HGET', KEYS[1], 'stock')
local sep = string.find(ARGV[2], ':', 1, true)
local want, returns = tonumber(string.sub(ARGV[2], 1, sep - 1)), string.sub(ARGV[2], sep + 1)
if (gen == want and stock) or (gen > want and ARGV[5] ~= '1') then
  return {0, tonumber(stock or '0'), gen, 0, 0, gen, tonumber(redis.call('HGET', KEYS[1], 'ret') or '0')}
end

-- The reservations of this product and generation that no writer has
-- acknowledged: those a writer read and holds (pending), and those after
-- the group's last delivered entry (none read yet; all of them when the
-- group is not there).
local product, units, taken, found = ARGV[3], {}, 0, 0
local n, m = tonumber(ARGV[6]), tonumber(ARGV[7])
local first = 8 + 2 * n + m -- the first written request ID
-- The request IDs the database has orders of: an entry of one was written
-- (and not yet acknowledged), and took nothing the database's stock does
-- not say.
local written = {}
for i = first, #ARGV, 2 do
  written[ARGV[i]] = true
end
local function count(fields)
  local f = {}
  for i = 1, #fields, 2 do f[fields[i]] = fields[i + 1] end
  local rec = f.r and redis.call('HGET', KEYS[3], f.r)
  -- A refused one (record failed) gave its units back.
  if f.p == product and tonumber(f.g) == want and not written[f.r] and not (rec and string.sub(rec, 1, 2) == 'f|') then
    local q = tonumber(f.q)
    taken, found = taken + q, found + 1
    units[f.u] = (units[f.u] or 0) + q
  end
end
if ARGV[4] ~= '' then
  waiting(KEYS[4], ARGV[4], count)
end

redis.call('DEL', KEYS[2])
if gen >= 0 then
  -- An older generation's records go, with their entries in the index.
  for _, rid in ipairs(redis.call('HKEYS', KEYS[3])) do
    if redis.call('HGET', KEYS[5], rid) == product then
      redis.call('HDEL', KEYS[5], rid)
    end
  end
  redis.call('DEL', KEYS[3])
end
for i = 8, 7 + 2 * n, 2 do
  units[ARGV[i]] = (units[ARGV[i]] or 0) + tonumber(ARGV[i + 1])
end
for u, q in pairs(units) do
  redis.call('HSET', KEYS[2], u, q)
end
for i = 8 + 2 * n, first - 1 do
  redis.call('HSET', KEYS[1], 'r:' .. ARGV[i], 1)
end
for i = first, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('HSET', KEYS[5], ARGV[i], product)
  end
end
-- Never below 0: reservations beyond the database's stock are refused
-- sold_out when written.
local left = math.max(0, tonumber(ARGV[1]) - taken)
redis.call('HSET', KEYS[1], 'stock', left, 'gen', want, 'ret', returns)
return {1, left, want, found, taken, gen, tonumber(returns)}
