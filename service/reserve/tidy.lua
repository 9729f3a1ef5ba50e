-- Count what the writers have not written of a bucket's stream, and drop
-- what they have: every entry before the oldest one a writer still needs
-- (the first pending, else the first after the last delivered) is
-- acknowledged, and goes.
--
-- KEYS[1] the stream; ARGV[1] the writers' group
--
-- Returns {pending (read, not acknowledged), not read yet, entries dropped}.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0, 0}
end
local last, lag
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])
if type(groups) == 'table' and not groups.err then
  for _, g in ipairs(groups) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f.name == ARGV[1] then
      last = f['last-delivered-id']
      -- Redis counts what is not read yet when it can (entries-read
      -- known); else it is counted here, up to a bound.
      if type(f['entries-read']) == 'number' and type(f.lag) == 'number' then
        lag = f.lag
      end
    end
  end
end
if not last then
  return {0, redis.call('XLEN', KEYS[1]), 0}
end
local summary = redis.call('XPENDING', KEYS[1], ARGV[1])
local pending = tonumber(summary[1])
local unread = lag
if not unread then
  local after = redis.call('XRANGE', KEYS[1], last, '+', 'COUNT', 10001)
  unread = #after
  if after[1] and after[1][1] == last then
    unread = unread - 1
  end
end
local keep = last
if pending > 0 then
  keep = summary[2]
end
local dropped = redis.call('XTRIM', KEYS[1], 'MINID', keep)
return {pending, unread, dropped}
