package relay

import (
	"sync"
	"time"

	"github.com/idemgate/idemgate/outbox"
)

// suspects are messages refused in a shared request and given back
// because it was too late to send them alone (sendAlone): the next round
// that takes one publishes it alone, so that its refusals count. Safe for
// concurrent use.
type suspects struct {
	mu     sync.Mutex           // guards at
	at     map[string]time.Time // by outbox.Pending.ID: when marked
	forget time.Duration        // an older mark is dropped (another relay took it)
}

func newSuspects(lease time.Duration) *suspects {
	return &suspects{at: make(map[string]time.Time), forget: 10 * lease}
}

// mark remembers msgs as suspects.
func (s *suspects) mark(msgs []inflight) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, t := range s.at {
		if now.Sub(t) > s.forget {
			delete(s.at, id)
		}
	}
	for _, m := range msgs {
		s.at[m.p.ID] = now
	}
}

// take reports which messages of batch are suspects, by ID, and forgets them.
func (s *suspects) take(batch []outbox.Pending) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.at) == 0 {
		return nil
	}
	var taken map[string]bool
	for _, p := range batch {
		if _, ok := s.at[p.ID]; ok {
			if taken == nil {
				taken = make(map[string]bool)
			}
			taken[p.ID] = true
			delete(s.at, p.ID)
		}
	}
	return taken
}
