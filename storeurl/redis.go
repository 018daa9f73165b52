package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store/redisstore"
)

// redisCheckTimeout bounds the checks at open: the ping, then the
// maxmemory-policy of every master.
const redisCheckTimeout = 10 * time.Second

// openRedis opens
//
//	redis://[user:pass@]host:port[/db][?param=…]              one server (rediss:// for TLS)
//	redis+cluster://[user:pass@]host:port,host:port…[?param=…] Redis Cluster (rediss+cluster://)
//
// The parameters prefix (key namespace), ttl (a Go duration) and
// allow_eviction (a boolean, redisstore.Options.AllowEviction) configure the
// store; every other parameter is a go-redis client option, such as
// dial_timeout or pool_size, as redis.ParseURL and redis.ParseClusterURL
// accept them. The server is pinged, and then redisstore.New checks its
// maxmemory-policy, before the store is returned. Every command honours
// its context's deadline; if bounded is set and ctx has a deadline, that
// deadline replaces go-redis's default dial, read and write timeouts, and
// the checks at open, for a tool whose -timeout bounds it all.
func openRedis(ctx context.Context, rawURL string, bounded bool) (*Opened, error) {
	shown := redactURL(rawURL)
	scheme, rest, _ := strings.Cut(rawURL, "://")
	base, cluster := strings.CutSuffix(scheme, "+cluster")
	var seeds []string // the cluster's further seed nodes
	if cluster {
		// net/url cannot parse a list of hosts: keep the first as the URL's
		// host and pass the others as go-redis "addr" parameters.
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		authority := rest[:end]
		at := strings.LastIndex(authority, "@") + 1
		hosts := strings.Split(authority[at:], ",")
		rest = authority[:at] + hosts[0] + rest[end:]
		seeds = hosts[1:]
	}
	u, err := url.Parse(base + "://" + rest)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, badURL(fmt.Errorf("%s: %w", shown, err))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, badURL(fmt.Errorf("%s: %w", shown, err))
	}
	opts, err := redisStoreOptions(q)
	if err != nil {
		return nil, badURL(fmt.Errorf("%s: %w", shown, err))
	}
	addr := base + "://" + strings.Join(append([]string{u.Host}, seeds...), ",")
	if cluster {
		addr = base + "+cluster://" + strings.Join(append([]string{u.Host}, seeds...), ",")
	} else if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		addr += "/" + db
	} else {
		addr += "/0"
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = defaultRedisPrefix
	}
	for _, s := range seeds {
		q.Add("addr", s)
	}
	u.RawQuery = q.Encode()

	var client redis.UniversalClient
	if cluster {
		if u.Path != "" && u.Path != "/" {
			return nil, badURL(fmt.Errorf("%s: a cluster URL takes no database number (a cluster has only database 0)", shown))
		}
		u.Path = ""
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, badURL(fmt.Errorf("%s: %w", shown, err))
		}
		// Every command is bounded by its context's deadline, not only by
		// the read and write timeouts: a caller's timeout is honoured.
		o.ContextTimeoutEnabled = true
		if bounded {
			boundBy(ctx, q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
		}
		client = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, badURL(fmt.Errorf("%s: %w", shown, err))
		}
		o.ContextTimeoutEnabled = true
		if bounded {
			boundBy(ctx, q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
		}
		client = redis.NewClient(o)
	}

	checkCtx, cancel := ctx, context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !bounded || !ok {
		checkCtx, cancel = context.WithTimeout(ctx, redisCheckTimeout)
	}
	defer cancel()
	if err := client.Ping(checkCtx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("cannot reach %s: %w", shown, err)
	}
	st, err := redisstore.New(checkCtx, client, opts)
	if err != nil {
		client.Close()
		// Past the ping, New can fail only in its eviction check.
		return nil, fmt.Errorf("%w (allow_eviction=true in the store URL skips this check)", err)
	}
	o := &Opened{Store: st, close: client.Close, Addr: addr, Records: orDefault(fmt.Sprintf("key prefix %q", prefix), opts.Prefix != "")}
	o.FindSuffix = func(ctx context.Context, suffix string, n int) ([]string, bool, error) {
		return scanSuffix(ctx, client, prefix, suffix, n)
	}
	return o, nil
}

// defaultRedisPrefix is redisstore's default key prefix, which a URL
// without a prefix parameter reads.
const defaultRedisPrefix = "idemgate:"

// scanBudget bounds a suffix search: SCAN calls per server, each looking
// at about scanCount keys.
const (
	scanBudget = 100
	scanCount  = 1000
)

// scanSuffix lists up to n keys, after prefix, of records whose key ends
// with suffix, with SCAN MATCH on every master, and whether the search
// covered the whole keyspace before its budget ran out.
func scanSuffix(ctx context.Context, client redis.UniversalClient, prefix, suffix string, n int) ([]string, bool, error) {
	glob := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)
	match := glob.Replace(prefix) + "*" + glob.Replace(suffix)
	var (
		mu       sync.Mutex // guards keys and complete
		keys     []string
		complete = true
	)
	scan := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for range scanBudget {
			page, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for _, k := range page {
				if len(keys) < n {
					keys = append(keys, strings.TrimPrefix(k, prefix))
				}
			}
			full := len(keys) >= n
			mu.Unlock()
			if cursor = next; cursor == 0 || full {
				return nil
			}
		}
		mu.Lock()
		complete = false
		mu.Unlock()
		return nil
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		return nil, false, fmt.Errorf("cannot scan a %T", client)
	}
	slices.Sort(keys)
	return keys, complete, err
}

// boundBy makes ctx's deadline, if it has one, the only bound on dialing
// (dial), reading and writing (rw), where the URL's query q sets none: a
// caller that gives a deadline (an operator's -timeout) gets it, neither
// cut short by go-redis's defaults (5 s to dial, 3 s to read) nor stretched.
func boundBy(ctx context.Context, q url.Values, dial *time.Duration, rw ...*time.Duration) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return
	}
	if !q.Has("dial_timeout") {
		*dial = max(time.Until(deadline), time.Millisecond)
	}
	for i, name := range []string{"read_timeout", "write_timeout"} {
		if !q.Has(name) {
			*rw[i] = -1 // no timeout of its own: the command's context bounds it
		}
	}
}

// redisStoreOptions takes the store's own parameters out of q.
func redisStoreOptions(q url.Values) (*redisstore.Options, error) {
	o := &redisstore.Options{}
	for name, vs := range q {
		if (name == "prefix" || name == "ttl" || name == "allow_eviction") && len(vs) != 1 {
			return nil, fmt.Errorf("parameter %q given %d times", name, len(vs))
		}
	}
	if q.Has("prefix") {
		o.Prefix = q.Get("prefix")
		q.Del("prefix")
	}
	if q.Has("ttl") {
		ttl, err := time.ParseDuration(q.Get("ttl"))
		if err != nil {
			return nil, fmt.Errorf("parameter ttl: %w", err)
		}
		if ttl <= 0 {
			return nil, errors.New("parameter ttl: must be positive")
		}
		o.TTL = ttl
		q.Del("ttl")
	}
	if q.Has("allow_eviction") {
		allow, err := strconv.ParseBool(q.Get("allow_eviction"))
		if err != nil {
			return nil, fmt.Errorf("parameter allow_eviction: %q is not a boolean", q.Get("allow_eviction"))
		}
		o.AllowEviction = allow
		q.Del("allow_eviction")
	}
	return o, nil
}

// redactURL hides the password in rawURL, which net/url may not be able to
// parse (a cluster URL lists several hosts).
func redactURL(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return rawURL
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return rawURL
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
