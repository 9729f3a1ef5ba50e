-- waiting(stream, group, visit) calls visit with the fields of every
-- reservation of the stream that the writers' group has not acknowledged:
-- those a writer read and holds (pending), then those after the group's
-- last delivered entry (none read yet; all of them when the group is not
-- there). Prepended to the scripts that scan a stream (check.lua,
-- load.lua).
local function waiting(stream, group, visit)
  if redis.call('EXISTS', stream) == 0 then
    return
  end
  local last = '0-0'
  local groups = redis.pcall('XINFO', 'GROUPS', stream)
  if type(groups) == 'table' and not groups.err then
    for _, g in ipairs(groups) do
      local f = {}
      for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
      if f.name == group then
        last = f['last-delivered-id']
        for _, p in ipairs(redis.call('XPENDING', stream, group, '-', '+', 1000000)) do
          local e = redis.call('XRANGE', stream, p[1], p[1])
          if e[1] then visit(e[1][2]) end
        end
      end
    end
  end
  for _, e in ipairs(redis.call('XRANGE', stream, last, '+')) do
    if e[1] ~= last then visit(e[2]) end
  end
end
