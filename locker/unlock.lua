-- Compare-and-delete (article 002): delete KEYS[1] only while it still holds
-- this holder's token ARGV[1]. Returns 1 when deleted, 0 when the key is gone
-- or holds another holder's token.
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0
