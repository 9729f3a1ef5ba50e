-- A Redlock release on one node: redsync's compare-and-delete (delete
-- KEYS[1] only while it holds this holder's value ARGV[1]) that, when it
-- deletes, announces the release on the channel named after the key, as
-- unlock.lua does, with the value released as the message: an instance
-- handing the key over can tell its own release from another holder's.
-- Returns what redsync's own script does: DEL's count when deleted, -1
-- when the key is gone, 0 when it holds another value.
local val = redis.call("GET", KEYS[1])
if val == ARGV[1] then
	local n = redis.call("DEL", KEYS[1])
	redis.call("PUBLISH", KEYS[1], ARGV[1])
	return n
elseif val == false then
	return -1
end
return 0
