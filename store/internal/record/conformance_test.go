package record

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/storetest"
)

// The whole conformance suite, run here on Ops over a map: the Google
// stores' operations and List, and every row of Rules, are held to the
// contract by this package's own tests, with no emulator, so that a
// mutation of a rule is caught where the rule lives.

// mapStore keeps records in a map under one mutex: each round is atomic.
// Keys are stored as they are (no hashed names).
type mapStore struct {
	ops  Ops
	now  func() time.Time
	mu   sync.Mutex // guards recs
	recs map[string]Record
}

func newMapStore(s storetest.Setup) *mapStore {
	m := &mapStore{now: s.Now, recs: map[string]Record{}}
	m.ops = Ops{Name: "mapstore", Rules: Rules{TTL: s.TTL}, Round: m.round, Retryable: func(error) (bool, bool) { return false, false }}
	return m
}

func (m *mapStore) round(ctx context.Context, key string, attempt int, decide Decide) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur *Record
	if r, ok := m.recs[key]; ok {
		cur = &r
	}
	if next := decide(cur, m.now()); next != nil {
		m.recs[key] = *next
	}
	return nil
}

func (m *mapStore) scan(ctx context.Context, from, after string, n int) ([]Named, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Named
	for k, r := range m.recs {
		if k >= from && (after == "" || k > after) {
			out = append(out, Named{Name: k, Record: r})
		}
	}
	slices.SortFunc(out, func(a, b Named) int { return strings.Compare(a.Name, b.Name) })
	return out[:min(n, len(out))], nil
}

// The store's methods are Ops's, but for CompleteTx, which takes a Step
// of the Google stores' transactions and has no place in this suite.
func (m *mapStore) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	return m.ops.Claim(ctx, key, lease, opts)
}
func (m *mapStore) Complete(ctx context.Context, c store.Claim) (bool, error) {
	return m.ops.Complete(ctx, c)
}
func (m *mapStore) Release(ctx context.Context, c store.Claim) error { return m.ops.Release(ctx, c) }
func (m *mapStore) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	return m.ops.Extend(ctx, c, lease)
}
func (m *mapStore) Fail(ctx context.Context, c store.Claim, f store.Failure) (int, bool, error) {
	return m.ops.Fail(ctx, c, f)
}
func (m *mapStore) Retry(ctx context.Context, key string) (bool, error) { return m.ops.Retry(ctx, key) }
func (m *mapStore) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	return m.ops.Inspect(ctx, key)
}
func (m *mapStore) Forget(ctx context.Context, key string) (bool, error) {
	return m.ops.Forget(ctx, key)
}
func (m *mapStore) List(ctx context.Context, o store.ListOptions) (store.ListPage, error) {
	return m.ops.Rules.List(ctx, o, m.now, "\x00hashed:", m.scan) // no name starts so: nothing is hashed
}

var _ interface {
	store.Extender
	store.Inspector
	store.Lister
	store.Failer
} = (*mapStore)(nil)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Config{
		NewStore: func(t testing.TB, s storetest.Setup) store.Store { return newMapStore(s) },
		Delete: func(t testing.TB, st store.Store, key string) {
			m := st.(*mapStore)
			m.mu.Lock()
			delete(m.recs, key)
			m.mu.Unlock()
		},
	})
}

// A page stops after MaxListReads records read, wherever the matches are,
// and the next page starts with the record after the last one read.
func TestListBoundsItsReads(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m := newMapStore(storetest.Setup{TTL: time.Hour, Now: func() time.Time { return now }})
	live := Record{State: StateDone, Fence: 1, LeaseUntil: now, ExpiresAt: now.Add(time.Hour)}
	held := Record{State: StateClaimed, Fence: 1, Token: "t", LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	for i := range 1500 {
		r := live
		if i == MaxListReads-1 || i == MaxListReads { // the last record a page may read, and the first it may not
			r = held
		}
		m.recs[fmt.Sprintf("k%04d", i)] = r
	}
	var pages [][]string
	opts := store.ListOptions{States: store.StateHeld}
	for {
		page, err := m.List(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range page.Records {
			keys = append(keys, r.Key)
		}
		pages = append(pages, keys)
		if page.Next == "" || len(pages) > 3 {
			break
		}
		opts.Cursor = page.Next
	}
	want := [][]string{{"k0999"}, {"k1000"}}
	if !slices.EqualFunc(pages, want, slices.Equal) {
		t.Errorf("pages = %v, want %v: %d reads a page", pages, want, MaxListReads)
	}
}

func TestDecodeCursorRefuses(t *testing.T) {
	for _, c := range []string{EncodeCursor("k"), EncodeCursor("k", "a", "b"), "not base64!"} {
		if _, err := DecodeCursor(c, 2); !errors.Is(err, store.ErrInvalidCursor) {
			t.Errorf("DecodeCursor(%q, 2) = %v, want ErrInvalidCursor", c, err)
		}
	}
}
