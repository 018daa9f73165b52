package storeurl

import (
	"cmp"
	"context"

	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/store/firestorestore"
)

// openFirestore opens firestore://[project][?database=…&collection=…].
func openFirestore(ctx context.Context, rawURL string) (*Opened, error) {
	project, q, err := googleURL(rawURL, "database", "collection")
	if err != nil {
		return nil, badURL(err)
	}
	id := cmp.Or(project, firestore.DetectProjectID)
	var client *firestore.Client
	if db := q["database"]; db == "" || db == firestore.DefaultDatabaseID {
		client, err = firestore.NewClient(ctx, id)
	} else {
		client, err = firestore.NewClientWithDatabase(ctx, id, db)
	}
	if err != nil {
		return nil, err
	}
	st, err := firestorestore.New(client, &firestorestore.Options{Collection: q["collection"]})
	if err != nil {
		client.Close()
		return nil, badURL(err) // New does no I/O: its parameters are the URL's
	}
	coll := cmp.Or(q["collection"], "idemgate_records") // firestorestore's default
	return &Opened{Store: st, close: client.Close, Addr: googleAddr("firestore", project, q["database"], "FIRESTORE_EMULATOR_HOST"), Records: orDefault("collection "+coll, q["collection"] != "")}, nil
}
