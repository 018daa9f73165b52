package storetest

import (
	"context"
	"errors"
	"strings"

	"github.com/idemgate/idemgate/store"
)

// The KeysInErrors case holds every error a store returns about a key to
// naming it only as store.QuoteKey does, so that a caller hiding keys (the
// gateway's HideKeys) finds and replaces every mention. The key is long
// (cut by QuoteKey), holds characters %q escapes, and every window of it
// is distinct, so that any other spelling of any part of it is seen.

// longKey is a 200-byte key shaped like personal data.
var longKey = func() string {
	var b strings.Builder
	for i := 0; b.Len() < 200; i++ {
		b.WriteString(`mail:"alice.smith+` + string(rune('a'+i%26)) + `"@example.com/`)
	}
	return b.String()[:200]
}()

// keyLeak says where err's text, once every store.QuoteKey(key) is taken
// out, still holds a piece of key ("" when none does): any 8 bytes of the
// key, raw or as %q would escape them.
func keyLeak(key string, err error) string {
	if err == nil {
		return ""
	}
	text := strings.ReplaceAll(err.Error(), store.QuoteKey(key), "<key>")
	quoted := store.QuoteKey(key) // the escaped spelling, cut
	for _, s := range []string{key, quoted[1:strings.LastIndexByte(quoted, '"')]} {
		for i := 0; i+8 <= len(s); i++ {
			if strings.Contains(text, s[i:i+8]) {
				return s[i : i+8]
			}
		}
	}
	return ""
}

func keysInErrors(e *env) {
	key := longKey
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	type call struct {
		op  string
		err error
	}
	var errs []call
	note := func(op string, err error) { errs = append(errs, call{op, err}) }

	_, err := e.s.Claim(cancelled, key, long, store.ClaimOptions{})
	note("Claim with a cancelled context", err)
	a := e.claim(key, long, store.Won, "first Claim must win")
	held := e.claim(key, long, store.HeldByOther, "a second Claim of a live claim must be held by other")
	_, err = e.s.Complete(cancelled, a)
	note("Complete with a cancelled context", err)
	note("Release with a cancelled context", e.s.Release(cancelled, a))
	_, err = e.s.Complete(e.ctx, held)
	note("Complete of a HeldByOther claim", err)
	note("Release of a HeldByOther claim", e.s.Release(e.ctx, held))
	if x, ok := e.s.(store.Extender); ok {
		_, err = x.Extend(cancelled, a, long)
		note("Extend with a cancelled context", err)
		_, err = x.Extend(e.ctx, held, long)
		note("Extend of a HeldByOther claim", err)
	}
	if f, ok := e.s.(store.Failer); ok {
		_, _, err = f.Fail(cancelled, a, store.Failure{Reason: "r", MaxAttempts: 3})
		note("Fail with a cancelled context", err)
		_, _, err = f.Fail(e.ctx, held, store.Failure{Reason: "r", MaxAttempts: 3})
		note("Fail of a HeldByOther claim", err)
		_, err = f.Retry(cancelled, key)
		note("Retry with a cancelled context", err)
	}
	if x, ok := e.s.(store.Inspector); ok {
		_, _, err = x.Inspect(cancelled, key)
		note("Inspect with a cancelled context", err)
		_, err = x.Forget(cancelled, key)
		note("Forget with a cancelled context", err)
	}
	if e.cfg.InTx != nil {
		stale := a
		stale.Fence--
		note("CompleteTx of a stale fence", e.inTx(func(complete func(store.Claim) error) error { return complete(stale) }))
		note("CompleteTx of a HeldByOther claim", e.inTx(func(complete func(store.Claim) error) error { return complete(held) }))
	}
	failed := 0
	for _, c := range errs {
		if c.err == nil {
			continue
		}
		failed++
		if leak := keyLeak(key, c.err); leak != "" {
			e.fail("%s: the error holds %q of the key outside store.QuoteKey's name for it, which a caller hiding keys cannot find: %v", c.op, leak, c.err)
		}
	}
	e.expect(failed >= 4, "only %d of the %d calls meant to fail failed: the case tested nothing", failed, len(errs))
	e.expect(errors.Is(errs[0].err, context.Canceled), "Claim with a cancelled context = %v; want an error wrapping context.Canceled", errs[0].err)
	e.complete(a, true, "the holder must still Complete after the refused calls")
}
