// Package storeurl opens any idemgate store from one URL, so that a
// service can take its store from configuration (the examples read
// IDEMGATE_STORE) and an operator's tool can point at the same records:
//
//	o, err := storeurl.Open(ctx, os.Getenv("IDEMGATE_STORE"))
//	if err != nil { … }
//	defer o.Close()
//	g, err := gateway.New(o.Store, nil)
//
// The URL forms, by scheme:
//
//	memory://                                        memstore, this process only (Open's default for "")
//	redis://[user:pass@]host:port[/db][?…]           one Redis server or Memorystore (rediss:// for TLS)
//	redis+cluster://[user:pass@]host:port,host:port[?…]
//	                                                 Redis Cluster (rediss+cluster:// for TLS)
//	postgres://user:pass@host:port/db[?…]            PostgreSQL through pgx (postgresql:// too)
//	mysql://user:pass@host:port/db[?…]               MySQL or MariaDB (port 3306 by default)
//	mysql://user:pass@tcp(host:port)/db[?…]          the same, in go-sql-driver/mysql's DSN form
//	sqlite:///absolute/path/file.db[?…]              SQLite through modernc.org/sqlite
//	datastore://[project][?…]                        Firestore in Datastore mode
//	firestore://[project][?…]                        Firestore native mode
//
// The query parameters:
//
//   - Redis: prefix (the key namespace, redisstore.Options.Prefix), ttl (a
//     Go duration such as 24h, redisstore.Options.TTL) and allow_eviction
//     (a boolean, redisstore.Options.AllowEviction). Every other parameter
//     is a go-redis client option as redis.ParseURL and
//     redis.ParseClusterURL read it: dial_timeout, read_timeout,
//     write_timeout, pool_size, protocol, …
//   - SQL (postgres, mysql, sqlite): table ("name" or "schema.name",
//     sqlstore.Options.Table, default idemgate_records). Every other
//     parameter goes to the driver: pgx's connection parameters
//     (sslmode, …), go-sql-driver/mysql's DSN parameters (tls, …; a MySQL
//     URL interpolates parameters unless it sets interpolateParams, which
//     saves a round trip per statement) and modernc.org/sqlite's _pragma
//     (without one, SQLite gets busy_timeout(5000), journal_mode(WAL) and
//     synchronous(NORMAL)). A mysql URL gets sqlstore.MariaDB on MariaDB
//     10.5 or later and sqlstore.MySQL otherwise; SQLite gets one
//     connection.
//   - datastore: database (a named database; the default one when
//     omitted), namespace and kind (datastorestore.Options). An empty
//     project is detected from the credentials or DATASTORE_PROJECT_ID.
//   - firestore: database and collection (firestorestore.Options). An
//     empty project is detected from the credentials.
//
// The Google stores honour DATASTORE_EMULATOR_HOST and
// FIRESTORE_EMULATOR_HOST. A Google URL refuses a parameter it does not
// know; a store's own parameter given twice is refused everywhere.
//
// Open pings a Redis or SQL server (and checks Redis's maxmemory-policy,
// as redisstore.New does) before it returns, and creates a missing SQL
// table; the Google clients connect on their first call.
// OpenExisting, for tools, creates nothing. A URL that cannot be opened as
// written is a *URLError; passwords never appear in errors.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// Opened is a store and what it is. Close releases its connections.
type Opened struct {
	// Store is the store's own type, *memstore.Store, *redisstore.Store,
	// *sqlstore.Store, *datastorestore.Store or *firestorestore.Store, for
	// a caller that needs its methods (CompleteTx): assert it.
	Store store.Store
	Name  string // the scheme, for logs
	// Addr is the store's address as a URL without credentials or
	// parameters: "postgres://127.0.0.1:5432/test", "redis://127.0.0.1:6379/0".
	Addr string
	// Records says where in the store the records are: the SQL table, the
	// Redis key prefix, the Datastore kind and namespace or the Firestore
	// collection, each marked "(default)" when the URL did not name it.
	Records string
	// FindSuffix, when not nil, lists up to n keys of records whose key
	// ends with suffix, in the order the store finds them, and whether the
	// search covered every record (a bounded search may stop early). It is
	// nil for a store that cannot search keys by suffix (Datastore,
	// Firestore, memory).
	FindSuffix func(ctx context.Context, suffix string, n int) (keys []string, complete bool, err error)

	close func() error // releases what Open opened; nil when nothing needs it
}

// Close releases the connections Open made for the store (its Redis or SQL
// pool, its Google client). It returns nil for a store that holds none
// (memory://). Close the Opened after the last use of its Store.
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

// URLError reports a store URL that cannot be opened as written: unknown
// scheme, malformed, or a bad parameter. It is the caller's to fix, unlike
// a store that cannot be reached.
type URLError struct{ Err error }

func (e *URLError) Error() string { return e.Err.Error() }
func (e *URLError) Unwrap() error { return e.Err }

// badURL wraps err as a URLError.
func badURL(err error) error { return &URLError{Err: err} }

// Open opens the store named by rawURL. An empty URL means memory://. A
// SQL store's table is created when it is missing.
func Open(ctx context.Context, rawURL string) (*Opened, error) {
	return open(ctx, rawURL, true)
}

// OpenExisting opens the store named by rawURL as Open does, but never
// creates anything: a missing SQL table stays missing and a missing SQLite
// file is an error, for a tool that must report them (cmd/idemgate) rather
// than create them. It does not open memory://, the store of one process,
// which no other process can read. When ctx has a deadline, a Redis
// store's client is bounded by it alone: dialing, each command (whatever
// go-redis's own timeouts) and the checks at open.
func OpenExisting(ctx context.Context, rawURL string) (*Opened, error) {
	return open(ctx, rawURL, false)
}

// open opens rawURL; create says whether a missing SQL table is created.
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
