// Package storeurl opens any idemgate store from one URL, so that a
// service takes its store from configuration and an operator's tool can
// point at the same records:
//
//	o, err := storeurl.Open(ctx, os.Getenv("IDEMGATE_STORE"))
//	if err != nil { … }
//	defer o.Close()
//	g, err := gateway.New(o.Store, nil)
//
// The schemes are memory, redis, rediss, redis+cluster, rediss+cluster,
// postgres, mysql, sqlite, datastore and firestore. The store's own
// parameters are read and any other goes to the driver (a Google URL
// refuses one); "Store URLs" in docs/stores/README.md lists them all.
// Open pings a Redis or SQL server and creates a missing SQL table; the
// Google clients connect on first use. A URL that cannot be opened as
// written is a *URLError; passwords never appear in errors.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// Opened is a store and what it is.
type Opened struct {
	// Store is the store's own type (*sqlstore.Store, …): assert it for
	// its own methods, such as CompleteTx.
	Store store.Store
	Name  string // the scheme, for logs
	// Addr is the store's address as a URL without credentials or
	// parameters: "postgres://127.0.0.1:5432/test", "redis://127.0.0.1:6379/0".
	Addr string
	// Records says where in the store the records are (the SQL table, the
	// Redis prefix, …), "(default)" when the URL did not name it.
	Records string
	// FindSuffix lists up to n keys of records ending with suffix, and
	// whether the search covered every record (a bounded one may stop
	// early). Nil for a store that cannot (Datastore, Firestore, memory).
	FindSuffix func(ctx context.Context, suffix string, n int) (keys []string, complete bool, err error)

	close func() error // releases what Open opened; nil when nothing needs it
}

// Close releases the connections Open made for the store (its Redis or SQL
// pool, its Google client), after the last use of its Store.
func (o *Opened) Close() error {
	if o.close == nil {
		return nil
	}
	return o.close()
}

// Where names the records Opened reads for an operator: Records of Addr.
func (o *Opened) Where() string {
	if o.Records == "" {
		return o.Addr
	}
	return o.Records + " of " + o.Addr
}

// URLError reports a store URL that cannot be opened as written (unknown
// scheme, malformed, a bad parameter), unlike a store that cannot be reached.
type URLError struct{ Err error }

func (e *URLError) Error() string { return e.Err.Error() }
func (e *URLError) Unwrap() error { return e.Err }

func badURL(err error) error { return &URLError{Err: err} }

// Open opens the store named by rawURL. An empty URL means memory://. A
// SQL store's table is created when it is missing.
func Open(ctx context.Context, rawURL string) (*Opened, error) {
	return open(ctx, rawURL, true)
}

// OpenExisting opens rawURL as Open does but creates nothing, for a tool
// that reports what is missing: a missing SQL table stays missing, a missing
// SQLite file is an error, and memory:// is refused (no other process can
// read it). When ctx has a deadline, it alone bounds a Redis client:
// dialing, each command and the checks at open.
func OpenExisting(ctx context.Context, rawURL string) (*Opened, error) {
	return open(ctx, rawURL, false)
}

func open(ctx context.Context, rawURL string, create bool) (*Opened, error) {
	if rawURL == "" && create {
		rawURL = "memory://"
	}
	known := "redis, rediss, redis+cluster, rediss+cluster, postgres, mysql, sqlite, datastore, firestore"
	if create {
		known = "memory, " + known
	}
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, badURL(fmt.Errorf("%q is not a store URL (want scheme://…, one of %s; e.g. redis://host:6379/0)", redactURL(rawURL), known))
	}
	var (
		o   *Opened
		err error
	)
	switch scheme {
	case "memory", "mem":
		if !create {
			return nil, badURL(fmt.Errorf("%s is the store of one process, which no other process can see", rawURL))
		}
		var st *memstore.Store
		st, err = memstore.New(nil)
		o = &Opened{Store: st, Addr: "memory://", Records: "this process's memory"}
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		o, err = openRedis(ctx, rawURL, !create)
	case "postgres", "postgresql", "mysql", "sqlite":
		o, err = openSQL(ctx, scheme, rawURL, create)
	case "datastore":
		o, err = openDatastore(ctx, rawURL)
	case "firestore":
		o, err = openFirestore(ctx, rawURL)
	default:
		return nil, badURL(fmt.Errorf("unknown store %q (known: %s)", scheme, known))
	}
	if err != nil {
		if ue := (*URLError)(nil); errors.As(err, &ue) {
			return nil, badURL(fmt.Errorf("%s store: %w", scheme, err))
		}
		return nil, fmt.Errorf("%s store: %w", scheme, err)
	}
	o.Name = scheme
	return o, nil
}

// orDefault is what, followed by "(default)" when the URL did not give it.
func orDefault(what string, given bool) string {
	if given {
		return what
	}
	return what + " (default)"
}

// misspelled returns an error naming the first of names that is within two
// edits of one of ours (tabel for table), which the driver would otherwise
// take as its own.
func misspelled(names []string, ours ...string) error {
	for _, n := range names {
		for _, o := range ours {
			if n != o && !slices.Contains(ours, n) && edits(n, o) <= 2 {
				return fmt.Errorf("unknown parameter %q: did you mean %q?", n, o)
			}
		}
	}
	return nil
}

// edits is the Levenshtein distance between a and b.
func edits(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
