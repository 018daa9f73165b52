package layout

import (
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store/internal/record"
)

// The names of a record's fields that a store names itself.
const (
	State = "state"
	Key   = "key" // the key, kept only when the name or ID is its hash
)

// Record is the layout of a record. No field is indexed; the optional
// ones (key, fingerprint, origin, failures) are left out when empty, and
// read as empty when absent.
var Record = Fields[record.Record]{
	of(State, func(r *record.Record) *string { return &r.State }),
	of("fence", func(r *record.Record) *int64 { return &r.Fence }),
	of("token", func(r *record.Record) *string { return &r.Token }),
	of("leaseUntil", func(r *record.Record) *time.Time { return &r.LeaseUntil }),
	of("expiresAt", func(r *record.Record) *time.Time { return &r.ExpiresAt }),
	omit(of(Key, func(r *record.Record) *string { return &r.Key }), func(r *record.Record) bool { return r.Key == "" }),
	omit(of("fingerprint", func(r *record.Record) *[]byte { return &r.Fingerprint }), func(r *record.Record) bool { return len(r.Fingerprint) == 0 }),
	omit(of("origin", func(r *record.Record) *string { return &r.Origin }), func(r *record.Record) bool { return r.Origin == "" }),
	{
		Name: "attempts",
		Omit: func(r *record.Record) bool { return r.Attempts == 0 },
		Get:  func(r *record.Record) any { return int64(r.Attempts) },
		Set: func(r *record.Record, v any) bool {
			n, ok := v.(int64)
			r.Attempts = int(n)
			return ok
		},
	},
	omit(of("reason", func(r *record.Record) *string { return &r.Reason }), func(r *record.Record) bool { return r.Reason == "" }),
	omit(of("firstFailure", func(r *record.Record) *time.Time { return &r.FirstFailure }), func(r *record.Record) bool { return r.FirstFailure.IsZero() }),
}

func omit[T any](f Field[T], o func(*T) bool) Field[T] {
	f.Omit = o
	return f
}

// CheckRecord refuses a record read whose state is not CLAIMED, DONE or FAILED.
func CheckRecord(r *record.Record, what string) error {
	switch r.State {
	case record.StateClaimed, record.StateDone, record.StateFailed:
		return nil
	}
	return fmt.Errorf("%s %q is %q, want %q, %q or %q", what, State, r.State, record.StateClaimed, record.StateDone, record.StateFailed)
}
