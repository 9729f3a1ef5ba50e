-- Compare-and-pexpire: give KEYS[1] a new lease of ARGV[2] milliseconds only
-- while it still holds this holder's token ARGV[1]. Returns 1 when renewed,
-- 0 when the key is gone or holds another holder's token.
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
