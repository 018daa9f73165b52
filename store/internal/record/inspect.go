package record

import (
	"context"
	"time"

	"github.com/idemgate/idemgate/store"
)

// Forget decides a Forget: a live record, whatever its state, becomes a
// released claim with a higher fence, without a fingerprint or failures
// but with its origin (Release without the fence and token guard). An expired or absent record is left
// alone.
func (p Rules) Forget(r *Record, now time.Time) (next Record, write bool) {
	if !p.live(r, now) {
		return Record{}, false
	}
	return p.forgotten(r, now), true
}

// View returns r as store.Record shows it to an operator, read at now;
// ok is false when r is absent or expired.
func (p Rules) View(r *Record, key string, now time.Time) (out store.Record, ok bool) {
	if !p.live(r, now) {
		return store.Record{}, false
	}
	out = store.Record{
		Key:          key,
		State:        store.Claimed,
		Fence:        r.Fence,
		Token:        r.Token,
		LeaseUntil:   r.LeaseUntil,
		ExpiresAt:    r.ExpiresAt,
		Origin:       r.Origin,
		ReadAt:       now,
		Attempts:     r.Attempts,
		Reason:       r.Reason,
		FirstFailure: r.FirstFailure,
	}
	if len(r.Fingerprint) > 0 {
		out.Fingerprint = append([]byte(nil), r.Fingerprint...)
	}
	switch r.State {
	case StateDone:
		out.State, out.Token = store.Done, ""
		out.CompletedAt = r.LeaseUntil
	case StateFailed:
		out.State, out.Token = store.Failed, ""
	}
	return out, true
}

// Inspect implements store.Inspector: one round that writes nothing.
func (o *Ops) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, false, err
	}
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, false, err
	}
	var (
		out store.Record
		ok  bool
	)
	err := o.update(ctx, "Inspect", key, func(cur *Record, now time.Time) *Record {
		out, ok = o.Rules.View(cur, key, now)
		return nil
	})
	if err != nil {
		return store.Record{}, false, err
	}
	return out, ok, nil
}

// Forget implements store.Inspector.
func (o *Ops) Forget(ctx context.Context, key string) (bool, error) {
	return o.free(ctx, "Forget", key, o.Rules.Forget)
}

// free runs rule (Rules.Forget, Rules.Retry) on key's record in one round
// and reports whether it freed the record: the operator's actions, which
// need no claim.
func (o *Ops) free(ctx context.Context, op, key string, rule func(*Record, time.Time) (Record, bool)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := store.CheckKey(key); err != nil {
		return false, err
	}
	var ok bool
	err := o.update(ctx, op, key, func(cur *Record, now time.Time) *Record {
		next, write := rule(cur, now)
		ok = write
		return written(next, write)
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}
