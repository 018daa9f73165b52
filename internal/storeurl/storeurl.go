// Package storeurl opens a store from the URL the examples take in
// IDEMGATE_STORE:
//
//	memory://                                      in-process (the default)
//	redis://[user:pass@]host:port/db[?prefix=…&ttl=…&allow_eviction=true]
//	                                               Redis (rediss:// for TLS)
//	redis+cluster://host1:port,host2:port          Redis Cluster (rediss+cluster:// for TLS)
//	postgres://user@host:port/db?…[&table=…]       PostgreSQL
//	mysql://user:pass@tcp(host:port)/db[?table=…]  MySQL / MariaDB
//	sqlite:///path/to/file.db[?table=…]            SQLite
//	datastore://project[?database=…&namespace=…&kind=…]
//	                                               Firestore in Datastore mode
//	firestore://project[?database=…&collection=…]  Firestore native mode
//
// The Google stores honour DATASTORE_EMULATOR_HOST and FIRESTORE_EMULATOR_HOST.
package storeurl

import (
	"context"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// Opened is a store and the function that releases its connections.
type Opened struct {
	Store store.Store
	Name  string // the scheme, for logs
	Close func() error
}

// Open opens the store named by rawURL. An empty URL means memory://. A
// SQL store's table is created when it is missing.
func Open(ctx context.Context, rawURL string) (*Opened, error) {
	return open(ctx, rawURL, true)
}

// OpenExisting opens the store named by rawURL as Open does, but never
// creates anything: a missing SQL table stays missing, for a tool that must
// report it (cmd/idemgate) rather than create it.
func OpenExisting(ctx context.Context, rawURL string) (*Opened, error) {
	return open(ctx, rawURL, false)
}

// open opens rawURL; create says whether a missing SQL table is created.
func open(ctx context.Context, rawURL string, create bool) (*Opened, error) {
	if rawURL == "" {
		rawURL = "memory://"
	}
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("storeurl: %q is not a store URL (want scheme://…, e.g. memory:// or redis://host:6379/0)", rawURL)
	}
	var (
		o   *Opened
		err error
	)
	switch scheme {
	case "memory", "mem":
		var st *memstore.Store
		st, err = memstore.New(nil)
		o = &Opened{Store: st}
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		o, err = openRedis(ctx, rawURL)
	case "postgres", "postgresql", "mysql", "sqlite":
		o, err = openSQL(ctx, scheme, rawURL, create)
	case "datastore":
		o, err = openDatastore(ctx, rawURL)
	case "firestore":
		o, err = openFirestore(ctx, rawURL)
	default:
		return nil, fmt.Errorf("storeurl: unknown store %q (known: memory, redis, rediss, postgres, mysql, sqlite, datastore, firestore)", scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("storeurl: %s store: %w", scheme, err)
	}
	o.Name = scheme
	if o.Close == nil {
		o.Close = func() error { return nil }
	}
	return o, nil
}
