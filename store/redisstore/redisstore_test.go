package redisstore_test

import (
	"context"
	"crypto/rand"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
	"github.com/idemgate/idemgate/store/storetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// tick is the short lease and ttl of the conformance suite on the server's
// clock: long enough for a handful of round trips on a loaded machine.
const tick = 120 * time.Millisecond

func TestConformance(t *testing.T) {
	client := newClient(t)
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store {
			return newStore(t, client, &redisstore.Options{Prefix: uniquePrefix(t), TTL: s.TTL})
		},
		RealClock: true,
		Tick:      tick,
		Delete:    deleteRecord,
	})
}

// deleteRecord is storetest.Config.Delete: the record's key goes, as Redis
// deletes it past its expiry and grace.
func deleteRecord(t testing.TB, st store.Store, key string) {
	if n, err := redisstore.DeleteRecord(context.Background(), st.(*redisstore.Store), key); err != nil || n != 1 {
		t.Fatalf("DEL = %d, %v; want the record deleted", n, err)
	}
}

// newClient returns a client of the test Redis server, closed when t ends.
// The keys that t's stores touch are deleted first.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	trackKeys(t, c)
	return c
}

// testPrefix starts every key the tests write.
const testPrefix = "idemgate-test:"

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix(t testing.TB) string {
	t.Helper()
	return testPrefix + rand.Text() + ":"
}

// newStore returns a store on client.
func newStore(t testing.TB, client redis.UniversalClient, opts *redisstore.Options) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(t.Context(), client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// keyTracker is a go-redis hook that remembers every test key a client
// sends, so that a test deletes exactly what it wrote, however many other
// keys the server holds.
type keyTracker struct {
	mu   sync.Mutex // guards keys
	keys map[string]bool
}

// trackKeys makes client remember its test keys and delete them when t
// ends, before the client is closed.
func trackKeys(t testing.TB, client redis.UniversalClient) {
	kt := &keyTracker{keys: map[string]bool{}}
	client.AddHook(cmdHook(kt.add))
	t.Cleanup(func() {
		kt.mu.Lock()
		keys := slices.Collect(maps.Keys(kt.keys))
		kt.mu.Unlock() // the UNLINKs pass through the hook too
		ctx := testenv.Context(t)
		_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				p.Unlink(ctx, k)
			}
			return nil
		})
		if err != nil {
			t.Logf("deleting %d test keys: %v", len(keys), err)
		}
	})
}

// cmdHook is a go-redis hook that shows every command a client sends,
// pipelined or not, to a function.
type cmdHook func(redis.Cmder)

func (h cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h(cmd)
		return next(ctx, cmd)
	}
}

func (h cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h(cmd)
		}
		return next(ctx, cmds)
	}
}

func (kt *keyTracker) add(cmd redis.Cmder) {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.HasPrefix(s, testPrefix) {
			kt.mu.Lock()
			kt.keys[s] = true
			kt.mu.Unlock()
		}
	}
}
