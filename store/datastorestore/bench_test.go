package datastorestore_test

import (
	"testing"

	"github.com/idemgate/idemgate/internal/googletest"
	"github.com/idemgate/idemgate/store/datastorestore"
)

// The benchmarks run against the emulator, whose speed says little about
// production Datastore: they compare operations with each other and catch
// regressions in round trips, nothing more.
//
//	go test -run '^$' -bench . ./store/datastorestore/

func BenchmarkClaim(b *testing.B)         { googletest.BenchClaim(b, benchStore(b)) }
func BenchmarkClaimParallel(b *testing.B) { googletest.BenchClaimParallel(b, benchStore(b)) }
func BenchmarkMessage(b *testing.B)       { googletest.BenchMessage(b, benchStore(b)) }
func BenchmarkDuplicate(b *testing.B)     { googletest.BenchDuplicate(b, benchStore(b)) }

// benchStore returns a warm store in a fresh namespace.
func benchStore(b *testing.B) googletest.Store {
	return googletest.WarmUp(b, newStore(b, newClient(b), datastorestore.Options{}))
}

// BenchmarkRelayThroughput drains 2,000 messages from the outbox by one
// relay into pstest: its rate on the emulator, and the RPCs per message.
func BenchmarkRelayThroughput(b *testing.B) {
	w := &googletest.Wire{}
	client := wireClient(b, w)
	st := newStore(b, client, datastorestore.Options{})
	googletest.BenchRelay(b, googletest.OutboxWorld{Store: st, Source: st.Outbox(), Complete: completeIn(client, st)}, w, 2000)
}
