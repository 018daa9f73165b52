package firestorestore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

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
	first, err := st.Claim(ctx, messageID, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first delivery:", first.Status, "fence", first.Fence)
	// … run the side effect, then:
	if ok, err := st.Complete(ctx, first); err != nil || !ok {
		fmt.Println("not completed:", ok, err)
		return
	}
	again, err := st.Claim(ctx, messageID, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("redelivery:", again.Status)
	// Output:
	// first delivery: won fence 1
	// redelivery: already_done
}
