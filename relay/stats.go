package relay

import (
	"context"

	"github.com/idemgate/idemgate/outbox"
)

// Stater is implemented by a Source that reads its [outbox.Stats] in one
// go, for the relay's gauges; a Source without it has only the backlog
// gauge. Every store in this module implements it.
type Stater interface {
	Stats(ctx context.Context) (outbox.Stats, error)
}
