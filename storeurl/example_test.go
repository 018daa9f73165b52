package storeurl_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store/sqlstore"
	"github.com/idemgate/idemgate/storeurl"
)

// A service takes its store from one setting: here a SQLite file, whose
// table Open creates; a redis://, postgres:// or firestore:// URL opens
// those stores the same way.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "storeurl-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url := "sqlite://" + filepath.Join(dir, "idemgate.db") + "?table=payments_once"

	ctx := context.Background()
	o, err := storeurl.Open(ctx, url) // e.g. storeurl.Open(ctx, os.Getenv("IDEMGATE_STORE"))
	if err != nil {
		log.Fatal(err)
	}
	defer o.Close()
	g, err := gateway.New(o.Store, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = g.Lock(ctx, "payment-42", func(context.Context) error { return nil })
	fmt.Println(o.Name, o.Records, err)
	// Output: sqlite table payments_once <nil>
}

// A SQL URL opens a *sqlstore.Store, whose CompleteTx writes an effect and
// DONE in one transaction: assert the type to reach it.
func ExampleOpened_sqlstore() {
	dir, err := os.MkdirTemp("", "storeurl-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	o, err := storeurl.Open(context.Background(), "sqlite://"+filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer o.Close()
	s, ok := o.Store.(*sqlstore.Store)
	fmt.Println(ok, s.Dialect(), o.Records)
	// Output: true SQLite table idemgate_records (default)
}
