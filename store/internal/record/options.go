package record

import (
	"fmt"
	"time"
)

// GoogleRules checks a Google store's TTL and SkewMargin, the TTL
// defaulting to an hour, and returns its Rules; name prefixes errors.
func GoogleRules(name string, ttl, skew time.Duration) (Rules, error) {
	switch {
	case ttl < 0:
		return Rules{}, fmt.Errorf("%s: negative TTL %v", name, ttl)
	case skew < 0:
		return Rules{}, fmt.Errorf("%s: negative SkewMargin %v", name, skew)
	}
	if ttl == 0 {
		ttl = time.Hour
	}
	if skew >= ttl {
		// A record made anew after a TTL deletion is fenced above the old
		// one only if its maker's clock lags by less than a ttl (store.FenceAt).
		return Rules{}, fmt.Errorf("%s: SkewMargin %v is not shorter than the TTL %v", name, skew, ttl)
	}
	return Rules{TTL: ttl, Skew: skew}, nil
}
