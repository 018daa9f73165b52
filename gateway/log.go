package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/idemgate/idemgate/store"
)

// Outcome is what became of one guarded call or delivery. The constants
// below are the whole set; each one's value is the name that log lines carry
// in their "outcome" attribute and metrics in theirs.
type Outcome string

// The outcomes.
const (
	OutcomeWon           Outcome = "won"            // the work ran and was recorded
	OutcomeDuplicate     Outcome = "duplicate"      // the work was already done
	OutcomeInProgress    Outcome = "in_progress"    // a live holder owns the key
	OutcomeFailed        Outcome = "failed"         // the work failed; the claim was released
	OutcomeFencedOut     Outcome = "fenced_out"     // the work ran but the claim had been taken over
	OutcomeCompleteError Outcome = "complete_error" // the work ran but recording it failed
	OutcomeStoreError    Outcome = "store_error"    // the store failed before the work
	OutcomeUnguarded     Outcome = "unguarded"      // ran without a guard (disabled, or no key allowed)
	OutcomeNoKey         Outcome = "no_key"         // refused: no key could be resolved
	OutcomeRejected      Outcome = "rejected"       // refused: not a usable delivery (malformed, too large)
	OutcomeConflict      Outcome = "conflict"       // the key was used for another payload
	OutcomeCancelled     Outcome = "cancelled"      // the caller's context ended before the key was claimed
	OutcomeAbandoned     Outcome = "abandoned"      // the work failed for good; the key's record is FAILED
	OutcomeAlreadyFailed Outcome = "already_failed" // the key's work failed for good before; not run
)

// String returns o's name.
func (o Outcome) String() string { return string(o) }

// attr is o as the "outcome" attribute of a log line.
func (o Outcome) attr() slog.Attr { return slog.String("outcome", string(o)) }

// ran reports whether the work ran on the way to o.
func (o Outcome) ran() bool {
	switch o {
	case OutcomeWon, OutcomeFailed, OutcomeFencedOut, OutcomeCompleteError, OutcomeUnguarded, OutcomeAbandoned:
		return true
	}
	return false
}

// keyText is the key as it may appear in logs and errors.
func (g *Gateway) keyText(key string) string {
	if g.opts.HideKeys {
		sum := sha256.Sum256([]byte(key))
		return "sha256:" + hex.EncodeToString(sum[:8])
	}
	return strconv.Quote(key)
}

// errorAttr is err as the "error" attribute of a line about key: with the
// key out of its text when the gateway hides keys, since a store's error
// may quote it.
func (g *Gateway) errorAttr(key string, err error) slog.Attr {
	return slog.Any("error", g.hideKey(key, err))
}

func (g *Gateway) keyAttr(key string) slog.Attr {
	if g.opts.HideKeys {
		return slog.String("key_digest", g.keyText(key))
	}
	return slog.String("key", key)
}

// withoutKey is s with key replaced by its digest when the gateway hides
// keys, and s unchanged otherwise: wherever s names key as stores name keys
// in their errors (store.QuoteKey, which cuts a long key short), and
// wherever it holds key whole.
func (g *Gateway) withoutKey(key, s string) string {
	if g.opts.HideKeys && key != "" {
		digest := g.keyText(key)
		s = strings.ReplaceAll(s, store.QuoteKey(key), digest)
		s = strings.ReplaceAll(s, key, digest)
	}
	return s
}

// maxLoggedBody is how much of a failed handler's body its log line
// carries.
const maxLoggedBody = 256

// bodyText is the first maxLoggedBody bytes of body, a failed handler's
// answer, as a log line carries it: valid UTF-8, control characters
// escaped (\n, \x1b), "…" when cut. When the gateway hides keys, key is
// replaced by its digest first, as in errors; a body that spells the key
// otherwise (escaped, split) is logged as written.
func (g *Gateway) bodyText(key string, body []byte) string {
	s := g.withoutKey(key, string(body))
	var b strings.Builder
	for i, r := range s {
		if i >= maxLoggedBody {
			b.WriteString("…")
			break
		}
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r) // an invalid byte ranges as utf8.RuneError: U+FFFD
		}
	}
	return b.String()
}

// millis is d as the log attribute name_ms, in milliseconds.
func millis(name string, d time.Duration) slog.Attr {
	return slog.Float64(name+"_ms", float64(d)/float64(time.Millisecond))
}
