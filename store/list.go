package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Lister is implemented by stores that can list their records for an
// operator: "what is stuck?". Every store in this module implements it;
// idemgate list is built on it.
type Lister interface {
	// List returns the live records whose key starts with opts.Prefix and
	// that match opts.States and opts.OlderThan, in key order, at most
	// opts.Limit of them, from where opts.Cursor says the previous page
	// stopped. A record past its expiresAt counts as absent and is never
	// listed. Each record is read atomically, with its ReadAt, but the page
	// is no snapshot: records are read one after another, so a key written
	// behind the cursor while paging is missed, and one whose state changed
	// between pages is listed as it was when its page was read.
	//
	// A page may hold fewer records than the limit, even none, while Next
	// is not empty: a store that filters after reading stops after a
	// bounded number of reads (each store's documentation says how many).
	// Next is empty only after the last page. A cursor that does not come
	// from the same store's previous page is an error wrapping
	// ErrInvalidCursor.
	List(ctx context.Context, opts ListOptions) (ListPage, error)
}

// ListOptions selects and bounds what [Lister.List] returns.
type ListOptions struct {
	// Prefix keeps the keys that start with it, compared byte for byte:
	// no character is special. Default "", every key.
	Prefix string
	// States keeps the records in one of these states. Default 0, every
	// state.
	States States
	// OlderThan keeps the records that have been in their state at least
	// this long when read, by the store's clock: see [Record.Age]. Default
	// 0, every age.
	OlderThan time.Duration
	// Limit is the most records a page holds. Default DefaultListLimit; at
	// most MaxListLimit.
	Limit int
	// Cursor continues a listing where a previous page with the same
	// Prefix stopped: its ListPage.Next. Default "", from the first key.
	Cursor string
}

// The page sizes of [Lister.List].
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ErrInvalidCursor is wrapped by [Lister.List] for a cursor it cannot
// continue from.
var ErrInvalidCursor = errors.New("store: invalid list cursor")

// ListPage is one page of a listing.
type ListPage struct {
	Records []Record // in key order
	// Next is the cursor of the following page; empty when there is none.
	Next string
}

// States is a set of the states a listing tells apart.
type States uint8

// The states of a listed record. Every live record is in exactly one.
const (
	StateHeld     States = 1 << iota // CLAIMED, its holder's lease not ended
	StateLapsed                      // CLAIMED, the lease ended without a release: crashed or a zombie
	StateReleased                    // CLAIMED, given up by Release or Forget: the next Claim wins
	StateDone                        // DONE: duplicates are suppressed
	StateFailed                      // FAILED: the work failed for good; not run again until retried

	allStates = StateHeld | StateLapsed | StateReleased | StateDone | StateFailed
)

var stateNames = [...]string{"held", "lapsed", "released", "done", "failed"}

// String returns the names of the states in s, separated by commas
// ("held,lapsed"); "" for none.
func (s States) String() string {
	var names []string
	for i, n := range stateNames {
		if s&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

// ParseStates reads a comma-separated list of state names, as
// [States.String] writes them; "" is every state.
func ParseStates(list string) (States, error) {
	var s States
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		i := 0
		for i < len(stateNames) && stateNames[i] != n {
			i++
		}
		if i == len(stateNames) {
			return 0, fmt.Errorf("store: unknown state %q (want held, lapsed, released, done or failed)", n)
		}
		s |= 1 << i
	}
	return s, nil
}

// ListState returns the one state of r that a listing tells apart, judged
// at r.ReadAt.
func (r Record) ListState() States {
	switch {
	case r.State == Done:
		return StateDone
	case r.State == Failed:
		return StateFailed
	case r.Released():
		return StateReleased
	case r.Lapsed():
		return StateLapsed
	}
	return StateHeld
}

// Age returns how long r had been in its [Record.ListState] at ReadAt: since
// the claim won for held (its fence's clock, never more than the truth),
// since LeaseUntil for lapsed and released, since CompletedAt for done, and
// since FailedAt for failed. A negative age, from a clock that stepped
// back, reads as 0.
func (r Record) Age() time.Duration {
	var since time.Time
	switch r.ListState() {
	case StateHeld:
		since = time.UnixMicro(r.Fence)
	case StateDone:
		since = r.CompletedAt
	default:
		since = r.LeaseUntil
	}
	return max(r.ReadAt.Sub(since), 0)
}

// Match reports whether a live record r, read at r.ReadAt, belongs in a
// listing with o: its key starts with o.Prefix, and its state and age
// match o.States and o.OlderThan. Stores call it on what they read.
func (o ListOptions) Match(r Record) bool {
	states := o.States
	if states == 0 {
		states = allStates
	}
	return strings.HasPrefix(r.Key, o.Prefix) && r.ListState()&states != 0 && r.Age() >= o.OlderThan
}

// Check returns o with its defaults filled in, or an error for a negative
// OlderThan or Limit, or a Limit above MaxListLimit.
func (o ListOptions) Check() (ListOptions, error) {
	switch {
	case o.OlderThan < 0:
		return o, fmt.Errorf("store: list: negative OlderThan %v", o.OlderThan)
	case o.Limit < 0 || o.Limit > MaxListLimit:
		return o, fmt.Errorf("store: list: Limit %d is not between 0 and %d", o.Limit, MaxListLimit)
	case o.States&^allStates != 0:
		return o, fmt.Errorf("store: list: unknown states %#x", uint8(o.States))
	}
	if o.Limit == 0 {
		o.Limit = DefaultListLimit
	}
	if o.States == 0 {
		o.States = allStates
	}
	return o, nil
}
