package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strconv"
)

// Outcomes, as logged in the "outcome" attribute and counted by metrics.
const (
	OutcomeWon           = "won"            // the work ran and was recorded
	OutcomeDuplicate     = "duplicate"      // the work was already done
	OutcomeInProgress    = "in_progress"    // a live holder owns the key
	OutcomeFailed        = "failed"         // the work failed; the claim was released
	OutcomeFencedOut     = "fenced_out"     // the work ran but the claim had been taken over
	OutcomeCompleteError = "complete_error" // the work ran but recording it failed
	OutcomeStoreError    = "store_error"    // the store failed before the work
	OutcomeUnguarded     = "unguarded"      // ran without a guard (disabled, or no key allowed)
	OutcomeNoKey         = "no_key"         // refused: no key could be resolved
)

// keyText is the key as it may appear in logs and errors.
func (g *Gateway) keyText(key string) string {
	if g.opts.HideKeys {
		sum := sha256.Sum256([]byte(key))
		return "sha256:" + hex.EncodeToString(sum[:8])
	}
	return strconv.Quote(key)
}

func (g *Gateway) keyAttr(key string) slog.Attr {
	if g.opts.HideKeys {
		return slog.String("key_digest", g.keyText(key))
	}
	return slog.String("key", key)
}
