package redisstore

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// One script per operation. Each reads the record, takes the time from the
// server (TIME) and writes at most once, so every operation is a single
// atomic step on one key. Run sends EVALSHA and falls back to EVAL when the
// server answers NOSCRIPT (after a restart, a failover or SCRIPT FLUSH).
// Each script starts with record.lua, which reads and writes the layout.
var (
	//go:embed record.lua
	recordLua string
	//go:embed claim.lua
	claimLua string
	//go:embed complete.lua
	completeLua string
	//go:embed release.lua
	releaseLua string
	//go:embed extend.lua
	extendLua string

	claimScript    = redis.NewScript(recordLua + claimLua)
	completeScript = redis.NewScript(recordLua + completeLua)
	releaseScript  = redis.NewScript(recordLua + releaseLua)
	extendScript   = redis.NewScript(recordLua + extendLua)
)
