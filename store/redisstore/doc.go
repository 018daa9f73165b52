// Package redisstore is a [store.Store], [store.Extender] and [store.Failer]
// on Redis, Memorystore and Redis Cluster, through a go-redis
// [redis.UniversalClient]: one server, a Sentinel failover client or a
// cluster client (not a [redis.Ring]).
//
//	client := redis.NewClient(&redis.Options{Addr: "10.0.0.3:6379"})
//	st, err := redisstore.New(ctx, client, &redisstore.Options{TTL: 24 * time.Hour})
//
// Each idempotency key is one Redis string at Prefix+key (or
// Prefix+"{"+key+"}" with [Options.HashTag]), for example
//
//	C1796000340000000:1796000400000:1796004000000:2PEXRHDEZ7H2NQQKBXYRNB3GLM
//
// its state, fence, lease end, expiry and the winning claim's token; other
// layouts add a fingerprint, an origin or failures. The layout is stable: a
// change will use another leading letter, and the scripts refuse a value
// they do not recognise. Redis deletes a record at its expiry plus
// [Options.Grace]; nothing sweeps.
//
// Every instant comes from the server's TIME; the client sends only
// durations, so processes whose clocks disagree still agree on every lease.
// Each operation is one EVALSHA of its own Lua script, atomic on its one key:
// a fresh message costs two commands, a duplicate one. Every script is safe
// to run twice, so a command that go-redis retries after a lost reply
// answers as the first did.
//
// It needs Redis 6.2 or later (SET … PXAT) or Valkey, with maxmemory-policy
// noeviction: an evicted record is forgotten, so a duplicate runs again or a
// second holder gets in. [New] checks the policy of every master and refuses
// any other unless [Options.AllowEviction] accepts the risk.
//
// docs/stores/redis.md in the repository gives the record layouts, the
// scripts, memory sizing, Memorystore and Cluster.
package redisstore
