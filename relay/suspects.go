package relay

import (
	"sync"
	"time"

	"github.com/idemgate/idemgate/outbox"
)

// suspects are the messages Pub/Sub refused in a request they shared and
// that went back untried because sending them alone came too late in
// their lease (see sendAlone). The relay's next round that takes one
// publishes it alone, and only the first message of its ordering key, so
// that the refusal of the message that caused it is counted and a message
// Pub/Sub keeps refusing is given up in the end instead of blocking its
// key.
type suspects struct {
	mu     sync.Mutex
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

// take reports which messages of batch are suspects, by ID, and forgets
// them: the round publishes each alone, or holds it behind the first of
// its key, which goes alone.
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
