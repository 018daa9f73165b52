package storeurl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/store/redisstore"
)

// redisCheckTimeout bounds the checks at open (the ping, the eviction
// policy) when ctx does not.
const redisCheckTimeout = 10 * time.Second

// openRedis opens redis://[user:pass@]host:port[/db][?…] or
// redis+cluster://[user:pass@]host:port,host:port…[?…] (rediss for TLS).
// With bounded, ctx's deadline alone bounds the client (boundBy).
func openRedis(ctx context.Context, rawURL string, bounded bool) (*Opened, error) {
	shown := redactURL(rawURL)
	fail := func(err error) (*Opened, error) { return nil, badURL(fmt.Errorf("%s: %w", shown, err)) }
	scheme, rest, _ := strings.Cut(rawURL, "://")
	base, cluster := strings.CutSuffix(scheme, "+cluster")
	var seeds []string // the cluster's further seed nodes, as go-redis "addr" parameters
	if cluster {
		// net/url cannot parse a list of hosts: the URL keeps the first.
		authority, tail := splitAuthority(rest)
		at := strings.LastIndex(authority, "@") + 1
		hosts := strings.Split(authority[at:], ",")
		rest, seeds = authority[:at]+hosts[0]+tail, hosts[1:]
	}
	u, err := url.Parse(base + "://" + rest)
	if err != nil {
		return fail(withoutURL(err))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail(err)
	}
	opts, err := redisStoreOptions(q)
	if err != nil {
		return fail(err)
	}
	hosts := strings.Join(append([]string{u.Host}, seeds...), ",")
	addr := base + "://" + hosts + "/" + cmp.Or(strings.TrimPrefix(u.Path, "/"), "0")
	for _, s := range seeds {
		q.Add("addr", s)
	}
	u.RawQuery = q.Encode()

	// ContextTimeoutEnabled: every command honours its context's deadline,
	// not only go-redis's read and write timeouts.
	var client redis.UniversalClient
	if cluster {
		if u.Path != "" && u.Path != "/" {
			return fail(errors.New("a cluster URL takes no database number (a cluster has only database 0)"))
		}
		addr, u.Path = base+"+cluster://"+hosts, ""
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return fail(err)
		}
		o.ContextTimeoutEnabled = true
		if bounded {
			boundBy(ctx, q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout)
		}
		client = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return fail(err)
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
	prefix := cmp.Or(opts.Prefix, defaultRedisPrefix)
	o := &Opened{Store: st, close: client.Close, Addr: addr, Records: orDefault(fmt.Sprintf("key prefix %q", prefix), opts.Prefix != "")}
	o.FindSuffix = func(ctx context.Context, suffix string, n int) ([]string, bool, error) {
		return scanSuffix(ctx, client, prefix, suffix, n)
	}
	return o, nil
}

// defaultRedisPrefix is redisstore's default key prefix.
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
// and on reading and writing (rw), where the URL's query q sets none.
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
	names := []string{"prefix", "ttl", "allow_eviction"}
	if err := misspelled(slices.Sorted(maps.Keys(q)), names...); err != nil {
		return nil, err
	}
	for _, name := range names {
		if vs, ok := q[name]; ok && len(vs) != 1 {
			return nil, fmt.Errorf("parameter %q given %d times", name, len(vs))
		}
	}
	o := &redisstore.Options{}
	for _, name := range names {
		if !q.Has(name) {
			continue
		}
		v := q.Get(name)
		q.Del(name)
		switch name {
		case "prefix":
			o.Prefix = v
		case "ttl":
			ttl, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("parameter ttl: %w", err)
			}
			if ttl <= 0 {
				return nil, errors.New("parameter ttl: must be positive")
			}
			o.TTL = ttl
		case "allow_eviction":
			allow, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("parameter allow_eviction: %q is not a boolean", v)
			}
			o.AllowEviction = allow
		}
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
	authority, _ := splitAuthority(rest)
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return rawURL
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return rawURL
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// splitAuthority splits what follows "scheme://" into the authority and
// the path, query and fragment after it.
func splitAuthority(rest string) (authority, tail string) {
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	return rest[:end], rest[end:]
}

// withoutURL returns a *url.Error's cause without the URL, which may hold a
// password.
func withoutURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
