-- Compare-and-delete (article 002): delete KEYS[1] only while it still holds
-- this holder's token ARGV[1], and then announce the release (ARGV[2], the
-- message the Go side names) on the channel named after the key, so that
-- waiters on every instance try at once.
-- Returns 1 when deleted, 0 when the key is gone or holds another holder's
-- token.
if redis.call("GET", KEYS[1]) == ARGV[1] then
	redis.call("DEL", KEYS[1])
	redis.call("PUBLISH", KEYS[1], ARGV[2])
	return 1
end
return 0
