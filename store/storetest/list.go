package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
)

// The List cases. Every store must implement store.Lister.

// listPrefix holds the characters that are special somewhere a store may
// match keys: SQL's LIKE (% _ and the quote), Redis's glob (* ? [ ] \).
// A listing must take them literally.
const listPrefix = `p%_*'?[x]\:`

// listDecoys are keys that a listing of listPrefix must not return: one
// that contains the prefix without starting with it, the prefix cut short,
// and, for each special character, the prefix with another character in
// its place.
func listDecoys() []string {
	out := []string{"x" + listPrefix + "held", listPrefix[:len(listPrefix)-1]}
	for i, c := range listPrefix {
		if strings.ContainsRune(`%_*'?[]\`, c) {
			out = append(out, listPrefix[:i]+"z"+listPrefix[i+1:]+"held")
		}
	}
	return out
}

// lister is the store's Lister; the suite requires one.
func (e *env) lister() store.Lister {
	x, ok := e.s.(store.Lister)
	e.expect(ok, "store does not implement store.Lister")
	return x
}

// listAll follows the pages of a listing to its end, checking that every
// page respects the limit and that no record comes twice, and returns the
// records by key.
func (e *env) listAll(o store.ListOptions, rule string) map[string]store.Record {
	got := map[string]store.Record{}
	limit := cmp.Or(o.Limit, store.DefaultListLimit)
	for pages := 0; ; pages++ {
		e.expect(pages <= 100, "%s: List did not end after 100 pages", rule)
		p, err := e.lister().List(e.ctx, o)
		e.must(err, fmt.Sprintf("%s: List(%+v) error", rule, o))
		e.expect(len(p.Records) <= limit, "%s: List returned %d records, above the limit %d", rule, len(p.Records), limit)
		for _, r := range p.Records {
			_, dup := got[r.Key]
			e.expect(!dup, "%s: List returned %.40q twice", rule, r.Key)
			got[r.Key] = r
		}
		if p.Next == "" {
			return got
		}
		o.Cursor = p.Next
	}
}

// sameKeys compares the keys listed with the keys wanted.
func (e *env) sameKeys(got map[string]store.Record, want []string, rule string) {
	g := slices.Sorted(maps.Keys(got))
	w := slices.Sorted(slices.Values(want))
	e.expect(slices.Equal(g, w), "%s: List returned %.60q, want %.60q", rule, g, w)
}

// listAge is the OlderThan that tells the fixture's old records from its
// young ones, in ticks: the old ones are past listAge+listAge in their
// state, and the young ones must be listed within listAge-1 ticks of their
// making, which leaves a slow store on a real clock some room.
const listAge = 5

// listFixture makes records in every state under listPrefix, half of them
// old and half young (see listAge), and the decoys. It returns the keys by state and age, and the claims by key.
func listFixture(e *env) (old, young map[store.States][]string, claims map[string]store.Claim) {
	old, young = map[store.States][]string{}, map[store.States][]string{}
	claims = map[string]store.Claim{}
	// One key over 1500 bytes and one with a slash, which some stores keep
	// under a hashed name: a listing must find them by their key.
	longKey := listPrefix + "long" + strings.Repeat("l", 1600)
	mk := func(key string, state store.States, lease time.Duration) {
		c := e.claim(key, lease, store.Won, "first Claim must win")
		claims[key] = c
		switch state {
		case store.StateReleased:
			e.release(c, "Release by the holder")
		case store.StateDone:
			e.complete(c, true, "the holder must complete")
		case store.StateFailed:
			f := e.failer()
			e.failure(f, c, store.Failure{Reason: "listed", Final: true}, 1, true, "a final failure")
		}
	}
	for _, k := range listDecoys() {
		mk(k, store.StateHeld, long)
	}
	for _, k := range []struct {
		key   string
		state store.States
		lease time.Duration
	}{
		{listPrefix, store.StateHeld, long},
		{listPrefix + "old-held", store.StateHeld, long},
		{longKey, store.StateHeld, long},
		{listPrefix + "old/lapsed", store.StateLapsed, e.tick},
		{listPrefix + "old-released", store.StateReleased, long},
		{listPrefix + "old-done", store.StateDone, long},
		{listPrefix + "old-failed", store.StateFailed, long},
	} {
		mk(k.key, k.state, k.lease)
		old[k.state] = append(old[k.state], k.key)
	}
	e.pass(2 * listAge * e.tick)
	// The young lapsed claim first, since its lease must end before the
	// listing.
	mk(listPrefix+"young-lapsed", store.StateLapsed, e.tick)
	young[store.StateLapsed] = []string{listPrefix + "young-lapsed"}
	e.pass(e.tick)
	for _, st := range []store.States{store.StateHeld, store.StateReleased, store.StateDone, store.StateFailed} {
		k := listPrefix + "young-" + st.String()
		mk(k, st, long)
		young[st] = []string{k}
	}
	return old, young, claims
}

// union returns the keys of every state in the maps.
func union(ms ...map[store.States][]string) []string {
	var out []string
	for _, m := range ms {
		for _, ks := range m {
			out = append(out, ks...)
		}
	}
	return out
}

func listStates(e *env) {
	before := e.now()
	old, young, claims := listFixture(e)
	// First, so that the young records are still young on a real clock.
	got := e.listAll(store.ListOptions{Prefix: listPrefix, OlderThan: listAge * e.tick}, "List by age")
	e.sameKeys(got, union(old), "List with OlderThan must return the records in their state for at least that long")
	got = e.listAll(store.ListOptions{Prefix: listPrefix, States: store.StateHeld | store.StateLapsed, OlderThan: listAge * e.tick}, "List by state and age")
	e.sameKeys(got, append(old[store.StateHeld], old[store.StateLapsed]...), "List of old held and lapsed records")
	all := union(old, young)
	got = e.listAll(store.ListOptions{Prefix: listPrefix, Limit: store.MaxListLimit}, "List by prefix must return exactly the keys that start with it")
	e.sameKeys(got, all, "List by prefix must return exactly the keys that start with it, its characters taken literally")
	for _, m := range []map[store.States][]string{old, young} {
		for st, keys := range m {
			for _, k := range keys {
				r, c := got[k], claims[k]
				switch {
				case r.ListState() != st:
					e.fail("List: %.40q is %v, want %v (%+v)", k, r.ListState(), st, r)
				case st == store.StateReleased && r.Fence <= c.Fence:
					e.fail("List: released %.40q has fence %d, want above the holder's %d", k, r.Fence, c.Fence)
				case st != store.StateReleased && r.Fence != c.Fence:
					e.fail("List: %.40q has fence %d, want the holder's %d", k, r.Fence, c.Fence)
				case st == store.StateHeld && r.Token != c.Token:
					e.fail("List: held %.40q has token %q, want the holder's %q", k, r.Token, c.Token)
				}
				e.readAtSane(r, before)
			}
		}
	}
	for _, st := range []store.States{store.StateHeld, store.StateLapsed, store.StateReleased, store.StateDone} {
		got := e.listAll(store.ListOptions{Prefix: listPrefix, States: st}, "List by state")
		e.sameKeys(got, append(old[st], young[st]...), "List of the "+st.String()+" records")
	}
	got = e.listAll(store.ListOptions{}, "List with no prefix")
	e.sameKeys(got, slices.Collect(maps.Keys(claims)), "List with no prefix must return every record")
}

// listPaging follows small pages while records are written between them:
// every record that exists throughout is listed exactly once.
func listPaging(e *env) {
	old, young, claims := listFixture(e)
	all := union(old, young)
	for _, limit := range []int{1, 2, 3} {
		got := e.listAll(store.ListOptions{Prefix: listPrefix, Limit: limit}, fmt.Sprintf("List in pages of %d", limit))
		e.sameKeys(got, all, fmt.Sprintf("List in pages of %d must return each record once", limit))
	}
	got := e.listAll(store.ListOptions{Limit: 2}, "List with no prefix in pages of 2")
	e.sameKeys(got, slices.Collect(maps.Keys(claims)), "List with no prefix in pages of 2 must return every record once")
	// Writes between pages: new keys, and a record that changes state.
	o := store.ListOptions{Prefix: listPrefix, Limit: 2}
	seen := map[string]bool{}
	for n := 0; ; n++ {
		e.expect(n <= 100, "List did not end after 100 pages")
		p, err := e.lister().List(e.ctx, o)
		e.must(err, fmt.Sprintf("List(%+v) error", o))
		for _, r := range p.Records {
			e.expect(!seen[r.Key], "List in pages while writing returned %.40q twice", r.Key)
			seen[r.Key] = true
		}
		if p.Next == "" {
			break
		}
		o.Cursor = p.Next
		e.claim(fmt.Sprintf("%snew-%03d", listPrefix, n), long, store.Won, "Claim of a new key must win")
		if n == 0 {
			e.complete(claims[listPrefix+"old-held"], true, "the holder must complete")
		}
	}
	for _, k := range all {
		e.expect(seen[k], "List in pages while writing missed %.40q, which existed throughout", k)
	}
}

// listExpired: a record past its expiry is absent to a listing.
func listExpired(e *env) {
	done := e.claim(listPrefix+"gone-done", e.lease(), store.Won, "first Claim must win")
	e.complete(done, true, "the holder must complete")
	e.claim(listPrefix+"gone-claimed", e.lease(), store.Won, "first Claim must win")
	e.pass(2 * e.tick) // past lease + ttl
	e.claim(listPrefix+"live", e.lease(), store.Won, "first Claim must win")
	got := e.listAll(store.ListOptions{}, "List after expiry")
	e.sameKeys(got, []string{listPrefix + "live"}, "List must not return a record past its expiry (it counts as absent)")
}

// listArguments: bad options and cancelled contexts fail.
func listArguments(e *env) {
	x := e.lister()
	e.claim("k", long, store.Won, "first Claim must win")
	for _, o := range []store.ListOptions{{Limit: -1}, {Limit: store.MaxListLimit + 1}, {OlderThan: -1}} {
		_, err := x.List(e.ctx, o)
		e.expect(err != nil, "List(%+v) succeeded, want an error", o)
	}
	_, err := x.List(e.ctx, store.ListOptions{Cursor: "not a cursor!"})
	e.expect(errors.Is(err, store.ErrInvalidCursor), "List with a bad cursor = %v, want an error wrapping store.ErrInvalidCursor", err)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err = x.List(ctx, store.ListOptions{})
	e.expect(errors.Is(err, context.Canceled), "List with a cancelled context = %v; want an error wrapping context.Canceled", err)
}
