package gateway

import "errors"

// hideKey returns cause, the reason a delivery's work did not run, with key
// out of reach when Options.HideKeys is set: an adapter hands it on (the
// CloudEvents SDK and functions-framework print what they are handed, and
// may walk it with errors.As), so neither the text nor any error in the
// tree may hold the raw key.
//
// An *InProgressError, a *ConflictError or a *FailedError is rebuilt with the digest as
// its Key, so errors.As still finds it with its other fields. Any other cause (a store
// error, the store's refusal of the key) is replaced by a *hiddenKeyError:
// its text is cause's without the key (see withoutKey),
// and errors.Is still matches what cause matched (ErrStore,
// ErrNoKey, context.Canceled…), but errors.As reaches no type inside
// it, since such a type could carry the key in a field.
func (g *Gateway) hideKey(key string, cause error) error {
	if !g.opts.HideKeys || key == "" || cause == nil {
		return cause
	}
	digest := g.keyText(key)
	switch e := cause.(type) {
	case *InProgressError:
		hidden := *e
		hidden.Key = digest
		return &hidden
	case *ConflictError:
		hidden := *e
		hidden.Key = digest
		return &hidden
	case *FailedError:
		hidden := *e
		hidden.Key = digest
		return &hidden
	}
	return &hiddenKeyError{
		msg:   g.withoutKey(key, cause.Error()),
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
