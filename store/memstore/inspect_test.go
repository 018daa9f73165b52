package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
)

// An operator forgets a key whose work is done: the record stays, a
// fence higher, so the next delivery runs the work again and the first
// holder can never complete over it. A new record's fence is the store's
// clock in microseconds, and each raise adds at least one.
func ExampleStore_Forget() {
	clock := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	st, _ := memstore.New(&memstore.Options{Now: func() time.Time { return clock }})
	ctx := context.Background()

	first, _ := st.Claim(ctx, "order-42", time.Minute, store.ClaimOptions{})
	st.Complete(ctx, first)
	r, _, _ := st.Inspect(ctx, "order-42")
	fmt.Println(r.State, "fence", r.Fence, "completed", r.CompletedAt.Format(time.TimeOnly))

	forgotten, _ := st.Forget(ctx, "order-42")
	r, _, _ = st.Inspect(ctx, "order-42")
	fmt.Println("forgotten:", forgotten, "->", r.State, "fence", r.Fence, "released", r.Released())

	again, _ := st.Claim(ctx, "order-42", time.Minute, store.ClaimOptions{})
	fmt.Println("next claim:", again.Status, "fence", again.Fence)
	ok, _ := st.Complete(ctx, first)
	fmt.Println("first holder completes:", ok)
	// Output:
	// DONE fence 1893499200000000 completed 12:00:00
	// forgotten: true -> CLAIMED fence 1893499200000001 released true
	// next claim: won fence 1893499200000002
	// first holder completes: false
}
