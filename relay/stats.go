package relay

import (
	"context"

	"github.com/idemgate/idemgate/outbox"
)

// Stater is implemented by a Source that reads its [outbox.Stats] in one
// go. The relay's gauges use it (idemgate.relay.backlog,
// idemgate.relay.oldest_age and idemgate.relay.dead_messages); a Source
// without it has only the backlog gauge, from Backlog. Every store in this
// module implements it.
type Stater interface {
	Stats(ctx context.Context) (outbox.Stats, error)
}
