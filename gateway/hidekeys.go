package gateway

import "errors"

// hideKey returns cause, the reason a delivery's work did not run, with key
// out of reach when Options.HideKeys is set, in its text and in every
// error of its tree (adapters hand it on). The gateway's own error types
// are rebuilt with the digest as Key; any other cause becomes a
// *hiddenKeyError, which errors.Is sees through but errors.As does not.
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
