package reserve

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts, each in its .lua file, run through EVALSHA (EVAL when
// Redis does not hold it yet). The two that scan a stream for the
// reservations no writer has acknowledged share waiting.lua's function.
var (
	//go:embed waiting.lua
	waitingLua string
	//go:embed reserve.lua
	reserveLua    string
	reserveScript = redis.NewScript(reserveLua)
	//go:embed load.lua
	loadLua    string
	loadScript = redis.NewScript(waitingLua + loadLua)
	//go:embed retire.lua
	retireLua    string
	retireScript = redis.NewScript(retireLua)
	//go:embed fail.lua
	failLua    string
	failScript = redis.NewScript(failLua)
	//go:embed tidy.lua
	tidyLua    string
	tidyScript = redis.NewScript(tidyLua)
	//go:embed check.lua
	checkLua    string
	checkScript = redis.NewScript(waitingLua + checkLua)
	//go:embed adjust.lua
	adjustLua    string
	adjustScript = redis.NewScript(adjustLua)
	//go:embed refund.lua
	refundLua    string
	refundScript = redis.NewScript(refundLua)
)
