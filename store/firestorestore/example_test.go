package firestorestore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/firestorestore"
)

func ExampleNew() {
	ctx := context.Background()
	// NewClient uses Application Default Credentials, or the emulator
	// named by FIRESTORE_EMULATOR_HOST. NewClientWithDatabase picks a
	// database other than (default).
	client, err := firestore.NewClient(ctx, "my-project")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	st, err := firestorestore.New(client, &firestorestore.Options{
		Collection: "idemgate_records",
		TTL:        24 * time.Hour, // suppress duplicates for a day
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	messageID := rand.Text() // the Pub/Sub message ID, in real life
	first, err := st.Claim(ctx, messageID, time.Minute, store.ClaimOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first delivery:", first.Status)
	// … run the side effect, then:
	if ok, err := st.Complete(ctx, first); err != nil || !ok {
		fmt.Println("not completed:", ok, err)
		return
	}
	again, err := st.Claim(ctx, messageID, time.Minute, store.ClaimOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("redelivery:", again.Status)
	// Output:
	// first delivery: won
	// redelivery: already_done
}

// Booking a payment and completing its message in one transaction: the
// ledger document commits only if the claim still owns its record, so a
// delivery that stalled past its lease and was taken over books nothing.
func ExampleStore_CompleteTx() {
	ctx := context.Background()
	client, err := firestore.NewClient(ctx, "my-project")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	// The records and the ledger share the client's database, so that one
	// transaction spans both.
	st, err := firestorestore.New(client, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := gateway.New(st, nil)
	if err != nil {
		fmt.Println(err)
		return
	}

	type Entry struct {
		Order  string
		Amount int64
	}
	book := func(ctx context.Context, c store.Claim, e *Entry) error {
		return client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			// First the completion, which reads: a transaction reads before
			// it writes. If c was fenced out, return its error and the
			// transaction rolls back; nothing is booked.
			if err := st.CompleteTx(tx, c); err != nil {
				return err
			}
			// An auto ID: nothing else dedupes.
			return tx.Create(client.Collection("ledger").NewDoc(), e)
		})
	}

	messageID := rand.Text() // the Pub/Sub message ID, in real life
	handle := func(ctx context.Context) error {
		c, _ := gateway.ClaimFromContext(ctx)
		return book(ctx, c, &Entry{Order: "o-1", Amount: 4200})
	}
	fmt.Println("first delivery:", g.Lock(ctx, messageID, handle))
	fmt.Println("redelivery:", g.Lock(ctx, messageID, handle))

	// A holder whose claim is gone, here released, books nothing.
	stale, err := st.Claim(ctx, rand.Text(), time.Minute, store.ClaimOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := st.Release(ctx, stale); err != nil {
		fmt.Println(err)
		return
	}
	err = book(ctx, stale, &Entry{Order: "o-2", Amount: 100})
	fmt.Println("stale claim fenced out:", errors.Is(err, store.ErrFenced))
	// Output:
	// first delivery: <nil>
	// redelivery: gateway: duplicate: the work for this key is already done
	// stale claim fenced out: true
}
