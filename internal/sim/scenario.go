package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Timing is the clock of a run: every duration the simulation uses is a
// multiple of Lease. Under fake time Lease can be seconds for free; on a
// real store it is a few hundred milliseconds.
type Timing struct {
	// Lease is the renewed lease, and the unit of everything else.
	Lease time.Duration
	// TTL is how long the store keeps a DONE record (and a CLAIMED record
	// past its lease): the backend's own setting.
	TTL time.Duration
	// Grace is how long past a record's expiry the store may keep it
	// before it deletes it (Redis's Options.Grace; SQL stores delete at the
	// run's PurgeExpired calls, memstore ignores expired records at once).
	Grace time.Duration
	// Quick shortens Pub/Sub's patience for runs in real time: fewer
	// attempts before the dead-letter topic, shorter backoffs.
	Quick bool
}

// lateGap is how long after a record could be deleted the late republishes
// of a deletion seed come, past the first wave's completions.
func (t Timing) lateGap() time.Duration {
	if t.Quick {
		return 4 * t.Lease
	}
	return 20 * t.Lease
}

// lateAfter is when a late republish comes, counted from its At: once
// the first wave's records are expired and deleted.
func (t Timing) lateAfter() time.Duration { return t.TTL + t.Grace + t.lateGap() }

func (t Timing) noRenewLease() time.Duration { return 3 * t.Lease }
func (t Timing) settle() time.Duration       { return 5 * t.Lease }
func (t Timing) ackDeadline() time.Duration  { return 6 * t.Lease }
func (t Timing) minBackoff() time.Duration   { return t.Lease / 2 }
func (t Timing) maxBackoff() time.Duration {
	if t.Quick {
		return 3 * t.Lease
	}
	return 8 * t.Lease
}

// maxAttempts is how many deliveries of a message Pub/Sub makes before it
// dead-letters the message.
func (t Timing) maxAttempts() int {
	if t.Quick {
		return 8
	}
	return 16
}

// stormAttempts is how many first attempts of a message may draw faults;
// later attempts are clean, so that every message can end acknowledged.
const stormAttempts = 4

// A bias makes a seed likely to reach one kind of interaction, so that the
// default budget of seeds reaches each. Plain seeds draw everything at low
// rates.
type bias uint8

const (
	biasNone      bias = iota
	biasConflicts      // republishes with another payload under a business key and fingerprints, AcceptConflicts, slow holders
	biasLeaseLost      // renewal failures, bodies that bail on ctx.Done
	biasComplete       // Complete failing for longer than the lease, renewal on, concurrent copies
	biasForget         // an operator's Forget while the body runs, then a transaction that finds itself fenced
	biasSlowClaim      // Claim replies slower than the lease
	biasNested         // bodies that take a nested Lock on a key shared by several messages
	biasCrash          // crashes and stalls past lease + ttl
	biasDeletion       // a holder stalls past lease + ttl, its record is deleted, a late republish claims anew, the zombie resumes
	biasOrdering       // pull with ordering keys, several messages a key, copies beside
	biasMutex          // bodies that take g.Mutex on an entity several messages share
	biasAuth           // forged push requests beside the genuine deliveries
	biasCount
)

var biasNames = [...]string{"none", "conflicts", "lease-lost", "complete-faults", "forget", "slow-claim", "nested", "crash",
	"deletion", "ordering", "mutex", "auth"}

func (b bias) String() string { return biasNames[b] }

// Scenario is what a seed decides before the run starts.
type Scenario struct {
	Seed      uint64
	Bias      bias
	Instances int // processes, each with its own gateway
	Renew     bool
	// BusinessKey keys the route on the order_id attribute rather than on
	// the messageId, so that republishes meet the same key.
	BusinessKey     bool
	Fingerprint     bool
	AcceptConflicts bool
	HideKeys        bool
	// Nested makes bodies take a nested g.Lock on the message's customer.
	Nested bool
	// Mutex makes bodies write their effect inside g.Mutex on the entity
	// "po:" + the message's customer ("Lock on the message, Mutex on the
	// entity").
	Mutex bool
	// Ordered gives each message the ordering key of its customer and
	// delivers it through pull, a key's messages one after another as the
	// client's scheduler does.
	Ordered bool
	// Auth routes Idempotent deliveries through pushauth's Middleware and
	// sends forged requests (no token, or one the validator refuses) beside
	// some genuine ones.
	Auth bool
	// Deletion stalls the first attempt of the first message past lease +
	// ttl and republishes its order late, once its record is deleted.
	Deletion bool
	// WaitForHolder, when positive, is the gateways' wait for a live
	// holder, in leases.
	WaitForHolder float64
	// Failures: some messages are poison, and the gateways count
	// failures (on a store that keeps them): MaxAttempts is their budget
	// (0: none), AckFailed acknowledges a FAILED key's deliveries, on
	// every surface but the push routes when RouteAckFailed (which take
	// the other setting), and an Operator retries FAILED keys now and
	// then.
	Failures       bool
	MaxAttempts    int
	AckFailed      bool
	RouteAckFailed bool
	Operator       bool
	Messages       []*Message
}

// Message is one message published to the topic.
type Message struct {
	Index    int
	ID       string // the Pub/Sub messageId
	Order    string // the order_id attribute
	Customer string // the customer_id attribute
	Data     string
	At       float64 // when it is published, in leases from the start
	// Late: published Timing.lateAfter past At, once the records of the
	// first wave may be deleted.
	Late bool
	// OrderingKey is its ordering key (Scenario.Ordered).
	OrderingKey string
	// Poison: the work of the message's key fails on every attempt until
	// an operator fixes it; for good (gateway.Permanent, or a 422 on the
	// Idempotent surface) when PoisonFinal.
	Poison      bool
	PoisonFinal bool
	rng         *rand.Rand // the message's own draws; used by its publisher only
}

// NewScenario draws the scenario of seed; quick draws fewer messages, for
// runs in real time.
func NewScenario(seed uint64, quick bool) *Scenario {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	s := &Scenario{Seed: seed, Bias: bias(r.IntN(int(biasCount)))}
	s.Instances = 1 + r.IntN(3)
	s.Renew = r.IntN(4) != 0
	s.BusinessKey = r.IntN(2) == 0
	s.Fingerprint = r.IntN(2) == 0
	s.AcceptConflicts = r.IntN(3) == 0
	s.HideKeys = r.IntN(3) == 0
	s.Nested = r.IntN(8) == 0
	switch s.Bias {
	case biasConflicts:
		s.BusinessKey, s.Fingerprint, s.AcceptConflicts = true, true, r.IntN(4) != 0
	case biasLeaseLost, biasComplete:
		s.Renew = true
	case biasForget:
		s.Renew = r.IntN(2) == 0
	case biasNested:
		s.Nested, s.Fingerprint = true, true
	}
	// Drawn after the rest, so that the draws above stay as they were.
	s.Mutex = r.IntN(10) == 0
	s.Auth = r.IntN(8) == 0
	switch s.Bias {
	case biasDeletion:
		s.Deletion, s.BusinessKey = true, true
		s.Instances = 2 + r.IntN(2) // a process is paused the whole stall: others must take over
	case biasOrdering:
		// messageId keys: every message of an ordering key has an effect
		// of its own, whose order is checked.
		s.Ordered, s.BusinessKey, s.Nested = true, false, false
	case biasMutex:
		s.Mutex = true
	case biasAuth:
		s.Auth = true
	}
	orders := 1 + r.IntN(4)
	customers := 1 + r.IntN(2)
	n := 2 + r.IntN(7)
	if quick {
		n = 2 + r.IntN(3)
	}
	for i := range n {
		m := &Message{
			Index: i,
			ID:    fmt.Sprintf("%d", 1000+i),
			// Distinct instants: two deliveries at the very same fake
			// instant would race in an order no seed decides.
			At:  float64(r.IntN(40))/10 + float64(i)/997,
			rng: rand.New(rand.NewPCG(seed, uint64(i)+1)),
		}
		o := r.IntN(orders)
		m.Order = fmt.Sprintf("o-%d", o)
		m.Customer = fmt.Sprintf("c-%d", r.IntN(customers))
		// A republish of an order carries the same payload, or (less
		// often) another one: the producer reused the key.
		m.Data = fmt.Sprintf("order %d", o)
		if r.IntN(4) == 0 || s.Bias == biasConflicts && r.IntN(2) == 0 {
			m.Data = fmt.Sprintf("order %d, amended %d", o, i)
		}
		if s.Ordered {
			m.OrderingKey = "ok-" + m.Customer
		}
		s.Messages = append(s.Messages, m)
	}
	if s.Deletion {
		// The late wave: each order of the first wave (the first message's
		// among them) published again once its record may be deleted.
		s.Messages[0].At = 0 // the zombie's message comes first: it wins the claim
		seen := map[string]bool{}
		for _, m := range s.Messages[:n] {
			if seen[m.Order] {
				continue
			}
			seen[m.Order] = true
			i := len(s.Messages)
			s.Messages = append(s.Messages, &Message{
				Index: i, ID: fmt.Sprintf("%d", 1000+i), Order: m.Order, Customer: m.Customer, Data: m.Data,
				At: float64(r.IntN(20))/10 + float64(i)/997, Late: true,
				rng: rand.New(rand.NewPCG(seed, uint64(i)+1)),
			})
		}
	}
	drawFailures(s, r)
	return s
}

// String sums the scenario up on one line.
func (s *Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (bias %s): %d instances, renew=%v, key=%s, fingerprint=%v, accept_conflicts=%v, hide_keys=%v, nested=%v, mutex=%v, ordered=%v, auth=%v, deletion=%v, %d messages",
		s.Seed, s.Bias, s.Instances, s.Renew, map[bool]string{true: "order_id", false: "messageId"}[s.BusinessKey],
		s.Fingerprint, s.AcceptConflicts, s.HideKeys, s.Nested, s.Mutex, s.Ordered, s.Auth, s.Deletion, len(s.Messages))
	if s.WaitForHolder > 0 {
		fmt.Fprintf(&b, ", wait_for_holder=%.2f leases", s.WaitForHolder)
	}
	if s.Failures {
		fmt.Fprintf(&b, ", failures: max_attempts=%d, ack_failed=%v, route_ack_failed=%v, operator=%v", s.MaxAttempts, s.AckFailed, s.RouteAckFailed, s.Operator)
	}
	for _, m := range s.Messages {
		fmt.Fprintf(&b, "\n  message %s: order %s, customer %s, data %q", m.ID, m.Order, m.Customer, m.Data)
		if m.OrderingKey != "" {
			fmt.Fprintf(&b, ", ordering key %s", m.OrderingKey)
		}
		if m.Late {
			b.WriteString(", late (after its record's deletion)")
		}
		switch {
		case m.Poison && m.PoisonFinal:
			b.WriteString(", poison (for good)")
		case m.Poison:
			b.WriteString(", poison")
		}
	}
	return b.String()
}
