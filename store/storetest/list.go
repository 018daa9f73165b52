package storetest

import (
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

var errNoLister = errors.New("store does not implement store.Lister")

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

// lister returns the store's Lister.
func lister(e *env) (store.Lister, error) {
	x, ok := e.s.(store.Lister)
	if !ok {
		return nil, errNoLister
	}
	return x, nil
}

// listAll follows the pages of a listing to its end, checking that every
// page respects the limit and that no record comes twice, and returns the
// records by key.
func (e *env) listAll(x store.Lister, o store.ListOptions, rule string) (map[string]store.Record, error) {
	got := map[string]store.Record{}
	for pages := 0; ; pages++ {
		if pages > 100 {
			return nil, violated("%s: List did not end after 100 pages", rule)
		}
		p, err := x.List(e.ctx, o)
		if err != nil {
			return nil, fmt.Errorf("%s: List(%+v) error: %w", rule, o, err)
		}
		if limit := cmpOr(o.Limit, store.DefaultListLimit); len(p.Records) > limit {
			return nil, violated("%s: List returned %d records, above the limit %d", rule, len(p.Records), limit)
		}
		for _, r := range p.Records {
			if _, dup := got[r.Key]; dup {
				return nil, violated("%s: List returned %.40q twice", rule, r.Key)
			}
			got[r.Key] = r
		}
		if p.Next == "" {
			return got, nil
		}
		o.Cursor = p.Next
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// sameKeys compares the keys listed with the keys wanted.
func sameKeys(got map[string]store.Record, want []string, rule string) error {
	g := slices.Sorted(maps.Keys(got))
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		return violated("%s: List returned %.60q, want %.60q", rule, g, w)
	}
	return nil
}

// listAge is the OlderThan that tells the fixture's old records from its
// young ones, in ticks: the old ones are past listAge+listAge in their
// state, and the young ones must be listed within listAge-1 ticks of their
// making, which leaves a slow store on a real clock some room.
const listAge = 5

// listFixture makes records in every state under listPrefix, half of them
// old and half young (see listAge), and the decoys. It returns the keys by state and age, and the claims by key.
func listFixture(e *env) (old, young map[store.States][]string, claims map[string]store.Claim, err error) {
	old, young = map[store.States][]string{}, map[store.States][]string{}
	claims = map[string]store.Claim{}
	// One key over 1500 bytes and one with a slash, which some stores keep
	// under a hashed name: a listing must find them by their key.
	longKey := listPrefix + "long" + strings.Repeat("l", 1600)
	mk := func(key string, state store.States, lease time.Duration) error {
		c, err := e.claimE(key, lease, store.Won, "first Claim must win")
		if err != nil {
			return err
		}
		claims[key] = c
		switch state {
		case store.StateReleased:
			return e.releaseE(c, "Release by the holder")
		case store.StateDone:
			return e.completeE(c, true, "the holder must complete")
		case store.StateFailed:
			f, _, err := failer(e)
			if err != nil {
				return err
			}
			return e.failE(f, c, store.Failure{Reason: "listed", Final: true}, 1, true, "a final failure")
		}
		return nil
	}
	for _, k := range listDecoys() {
		if err := mk(k, store.StateHeld, long); err != nil {
			return nil, nil, nil, err
		}
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
		if err := mk(k.key, k.state, k.lease); err != nil {
			return nil, nil, nil, err
		}
		old[k.state] = append(old[k.state], k.key)
	}
	e.pass(2 * listAge * e.tick)
	// The young lapsed claim first, since its lease must end before the
	// listing.
	if err := mk(listPrefix+"young-lapsed", store.StateLapsed, e.tick); err != nil {
		return nil, nil, nil, err
	}
	young[store.StateLapsed] = []string{listPrefix + "young-lapsed"}
	e.pass(e.tick)
	for _, st := range []store.States{store.StateHeld, store.StateReleased, store.StateDone, store.StateFailed} {
		k := listPrefix + "young-" + st.String()
		if err := mk(k, st, long); err != nil {
			return nil, nil, nil, err
		}
		young[st] = []string{k}
	}
	return old, young, claims, nil
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

func listStates(e *env) error {
	x, err := lister(e)
	if err != nil {
		return err
	}
	before := e.now()
	old, young, claims, err := listFixture(e)
	if err != nil {
		return err
	}
	// First, so that the young records are still young on a real clock.
	got, err := e.listAll(x, store.ListOptions{Prefix: listPrefix, OlderThan: listAge * e.tick}, "List by age")
	if err != nil {
		return err
	}
	if err := sameKeys(got, union(old), "List with OlderThan must return the records in their state for at least that long"); err != nil {
		return err
	}
	got, err = e.listAll(x, store.ListOptions{Prefix: listPrefix, States: store.StateHeld | store.StateLapsed, OlderThan: listAge * e.tick}, "List by state and age")
	if err != nil {
		return err
	}
	if err := sameKeys(got, append(old[store.StateHeld], old[store.StateLapsed]...), "List of old held and lapsed records"); err != nil {
		return err
	}
	all := union(old, young)
	got, err = e.listAll(x, store.ListOptions{Prefix: listPrefix, Limit: store.MaxListLimit}, "List by prefix must return exactly the keys that start with it")
	if err != nil {
		return err
	}
	if err := sameKeys(got, all, "List by prefix must return exactly the keys that start with it, its characters taken literally"); err != nil {
		return err
	}
	for _, m := range []map[store.States][]string{old, young} {
		for st, keys := range m {
			for _, k := range keys {
				r, c := got[k], claims[k]
				switch {
				case r.ListState() != st:
					return violated("List: %.40q is %v, want %v (%+v)", k, r.ListState(), st, r)
				case st == store.StateReleased && r.Fence <= c.Fence:
					return violated("List: released %.40q has fence %d, want above the holder's %d", k, r.Fence, c.Fence)
				case st != store.StateReleased && r.Fence != c.Fence:
					return violated("List: %.40q has fence %d, want the holder's %d", k, r.Fence, c.Fence)
				case st == store.StateHeld && r.Token != c.Token:
					return violated("List: held %.40q has token %q, want the holder's %q", k, r.Token, c.Token)
				}
				if err := e.readAtSane(r, before); err != nil {
					return err
				}
			}
		}
	}
	for _, st := range []store.States{store.StateHeld, store.StateLapsed, store.StateReleased, store.StateDone} {
		got, err := e.listAll(x, store.ListOptions{Prefix: listPrefix, States: st}, "List by state")
		if err != nil {
			return err
		}
		if err := sameKeys(got, append(old[st], young[st]...), "List of the "+st.String()+" records"); err != nil {
			return err
		}
	}
	got, err = e.listAll(x, store.ListOptions{}, "List with no prefix")
	if err != nil {
		return err
	}
	return sameKeys(got, slices.Collect(maps.Keys(claims)), "List with no prefix must return every record")
}

// listPaging follows small pages while records are written between them:
// every record that exists throughout is listed exactly once.
func listPaging(e *env) error {
	x, err := lister(e)
	if err != nil {
		return err
	}
	old, young, claims, err := listFixture(e)
	if err != nil {
		return err
	}
	all := union(old, young)
	for _, limit := range []int{1, 2, 3} {
		got, err := e.listAll(x, store.ListOptions{Prefix: listPrefix, Limit: limit}, fmt.Sprintf("List in pages of %d", limit))
		if err != nil {
			return err
		}
		if err := sameKeys(got, all, fmt.Sprintf("List in pages of %d must return each record once", limit)); err != nil {
			return err
		}
	}
	got, err := e.listAll(x, store.ListOptions{Limit: 2}, "List with no prefix in pages of 2")
	if err != nil {
		return err
	}
	if err := sameKeys(got, slices.Collect(maps.Keys(claims)), "List with no prefix in pages of 2 must return every record once"); err != nil {
		return err
	}
	// Writes between pages: new keys, and a record that changes state.
	o := store.ListOptions{Prefix: listPrefix, Limit: 2}
	seen := map[string]bool{}
	for n := 0; ; n++ {
		if n > 100 {
			return violated("List did not end after 100 pages")
		}
		p, err := x.List(e.ctx, o)
		if err != nil {
			return fmt.Errorf("List(%+v) error: %w", o, err)
		}
		for _, r := range p.Records {
			if seen[r.Key] {
				return violated("List in pages while writing returned %.40q twice", r.Key)
			}
			seen[r.Key] = true
		}
		if p.Next == "" {
			break
		}
		o.Cursor = p.Next
		if _, err := e.claimE(fmt.Sprintf("%snew-%03d", listPrefix, n), long, store.Won, "Claim of a new key must win"); err != nil {
			return err
		}
		if n == 0 {
			if err := e.completeE(claims[listPrefix+"old-held"], true, "the holder must complete"); err != nil {
				return err
			}
		}
	}
	for _, k := range all {
		if !seen[k] {
			return violated("List in pages while writing missed %.40q, which existed throughout", k)
		}
	}
	return nil
}

// listExpired: a record past its expiry is absent to a listing.
func listExpired(e *env) error {
	x, err := lister(e)
	if err != nil {
		return err
	}
	done, err := e.claimE(listPrefix+"gone-done", e.lease(), store.Won, "first Claim must win")
	if err != nil {
		return err
	}
	if err := e.completeE(done, true, "the holder must complete"); err != nil {
		return err
	}
	if _, err := e.claimE(listPrefix+"gone-claimed", e.lease(), store.Won, "first Claim must win"); err != nil {
		return err
	}
	e.pass(2 * e.tick) // past lease + ttl
	if _, err := e.claimE(listPrefix+"live", e.lease(), store.Won, "first Claim must win"); err != nil {
		return err
	}
	got, err := e.listAll(x, store.ListOptions{}, "List after expiry")
	if err != nil {
		return err
	}
	return sameKeys(got, []string{listPrefix + "live"}, "List must not return a record past its expiry (it counts as absent)")
}

// listArguments: bad options and cancelled contexts fail.
func listArguments(e *env) error {
	x, err := lister(e)
	if err != nil {
		return err
	}
	if _, err := e.claimE("k", long, store.Won, "first Claim must win"); err != nil {
		return err
	}
	for _, o := range []store.ListOptions{{Limit: -1}, {Limit: store.MaxListLimit + 1}, {OlderThan: -1}} {
		if _, err := x.List(e.ctx, o); err == nil {
			return violated("List(%+v) succeeded, want an error", o)
		}
	}
	if _, err := x.List(e.ctx, store.ListOptions{Cursor: "not a cursor!"}); !errors.Is(err, store.ErrInvalidCursor) {
		return violated("List with a bad cursor = %v, want an error wrapping store.ErrInvalidCursor", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := x.List(ctx, store.ListOptions{}); !errors.Is(err, context.Canceled) {
		return violated("List with a cancelled context = %v; want an error wrapping context.Canceled", err)
	}
	return nil
}
