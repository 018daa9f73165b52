package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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
// maxmemory-policy, before the store is returned.
func openRedis(ctx context.Context, rawURL string) (*Opened, error) {
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
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	opts, err := redisStoreOptions(q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	for _, s := range seeds {
		q.Add("addr", s)
	}
	u.RawQuery = q.Encode()

	var client redis.UniversalClient
	if cluster {
		if u.Path != "" && u.Path != "/" {
			return nil, fmt.Errorf("%s: a cluster URL takes no database number (a cluster has only database 0)", shown)
		}
		u.Path = ""
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shown, err)
		}
		client = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shown, err)
		}
		client = redis.NewClient(o)
	}

	checkCtx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
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
	return &Opened{Store: st, Close: client.Close}, nil
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
