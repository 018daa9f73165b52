package cloudevent

import (
	"errors"
	"strings"

	"github.com/idemgate/idemgate/gateway"
)

// keyDigest returns how g renders key in its logs when its Options.HideKeys
// is set, and false when g shows keys. It reads the answer off g.KeyAttr,
// the one place the gateway exports its rendering, so the digest in an
// error is the one an operator finds in the log line of the same event.
func keyDigest(g *gateway.Gateway, key string) (string, bool) {
	a := g.KeyAttr(key)
	if a.Key != "key_digest" {
		return "", false
	}
	return a.Value.String(), true
}

// hideKey returns cause, the reason behind an answer Wrap decides, with key
// out of reach when g hides keys: the framework and the SDK print what they
// are handed and may walk it with errors.As, so neither the text nor any
// error in the tree may hold the raw key.
//
// An *gateway.InProgressError is rebuilt with the digest as its Key, so
// errors.As still finds it with its LeaseUntil. Any other cause (a store
// error, the store's refusal of the key) is replaced by a *hiddenKeyError:
// its text is cause's with every occurrence of key replaced by the digest,
// and errors.Is still matches what cause matched (gateway.ErrStore,
// gateway.ErrNoKey, context.Canceled…), but errors.As reaches no type inside
// it, since such a type could carry the key in a field.
func hideKey(g *gateway.Gateway, key string, cause error) error {
	if key == "" || cause == nil {
		return cause
	}
	digest, hidden := keyDigest(g, key)
	if !hidden {
		return cause
	}
	if ip, ok := cause.(*gateway.InProgressError); ok {
		return &gateway.InProgressError{Key: digest, LeaseUntil: ip.LeaseUntil}
	}
	return &hiddenKeyError{
		msg:   strings.ReplaceAll(cause.Error(), key, digest),
		cause: cause,
	}
}

// hiddenKeyError is a cause whose text no longer holds the key. It keeps
// the original only to answer errors.Is, which reveals nothing but a yes or
// a no; it has no Unwrap, so nothing can reach the original's fields.
type hiddenKeyError struct {
	msg   string
	cause error
}

func (e *hiddenKeyError) Error() string { return e.msg }

// Is reports whether the original cause matches target.
func (e *hiddenKeyError) Is(target error) bool { return errors.Is(e.cause, target) }
