package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/relay"
)

// PipeScenario is what a seed of the pipeline family decides before the
// run starts: the stage A parents and their messages, the faults of each
// message's publishes, and the relays with their own faults.
type PipeScenario struct {
	Seed    uint64
	Parents []*PipeParent
	Relays  []PipeRelay
	// Batch is the relays' Options.BatchSize: small, so that a key's
	// blocked messages can fill a Take's window.
	Batch int
	// ReleaseDead is the relays' Options.ReleaseDead.
	ReleaseDead bool
	// Latency is how long each publish request takes on its way, in relay
	// leases, its client worker busy meanwhile: a slow Pub/Sub, behind
	// which the client's requests queue for workers.
	Latency float64
	// Burst: the scenario has a slow Pub/Sub's burst (drawPipeReaches);
	// unburst is its Batch without it.
	Burst   bool
	unburst int
}

// PipeParent is one stage A message: a body that completes its claim of
// Key with Msgs through the outbox.
type PipeParent struct {
	Index int
	Key   string
	At    float64 // when its first attempt starts, in relay leases
	Msgs  []*PipeMsg
	// Faults are those of its first attempts, in order: what each body
	// does instead of committing (the later ones commit).
	Faults []bodyFault
	// Forget: once DONE, an operator forgets the key ForgetAfter leases
	// later, with its messages likely still queued, and a redelivery
	// completes it again (a second version of each message, with the
	// same child keys).
	Forget      bool
	ForgetAfter float64
	// Burst: one of the parents of a slow Pub/Sub's burst.
	Burst bool
}

// bodyFault is what a stage A attempt does instead of committing.
type bodyFault uint8

const (
	bodyCommits  bodyFault = iota
	bodyRollback           // CompleteTx, then the transaction rolls back
	bodyFenced             // the body outlives its lease, a redelivery takes the key over and commits, then the stale body's CompleteTx
)

func (f bodyFault) String() string { return [...]string{"commits", "rollback", "fenced"}[f] }

// PipeMsg is one outbox message of a parent, and what Pub/Sub does to its
// publishes.
type PipeMsg struct {
	Name        string
	Topic       string // as the body spells it: an ID or a full name
	OrderingKey string
	// ErrTries: the first ErrTries publish requests carrying it fail with
	// FAILED_PRECONDITION (the client does not retry it).
	ErrTries int
	// Unavailable: the next Unavailable requests fail with UNAVAILABLE,
	// which the client retries by itself, so that the relay may see the
	// outcome late or not at all.
	Unavailable int
	// Stall: the first request that would land it is held Stall relay
	// leases by the server, then lands.
	Stall float64
	// Big: the body first enqueues it with data just under 10 MiB (what
	// Prepare must refuse, and plant 291 admits), then, refused, with
	// small data.
	Big bool
}

// PipeRelay is one relay slot's faults; they hit its first process only,
// the process that replaces it is clean (but for the skew).
type PipeRelay struct {
	// CrashAt: the process dies at its CrashAt-th Settle with sent
	// messages, before the store hears of it (0: never).
	CrashAt int
	// ShutdownAt: the process is shut down ShutdownAfter leases after its
	// ShutdownAt-th Take that took something (0: never).
	ShutdownAt    int
	ShutdownAfter float64
	// Skew: the store's clock runs ahead of the relay's by Skew (a tenth
	// of the lease at most): the lease ends that much sooner than the
	// relay reckons.
	Skew float64
}

// The topics of the pipeline family: two that take messages, and one that
// refuses every message for good.
const (
	pipeProject   = "sim"
	pipeTopicA    = "t-a"
	pipeTopicB    = "t-b"
	pipeTopicGone = "t-x"
)

// NewPipeScenario draws the pipeline scenario of seed.
func NewPipeScenario(seed uint64) *PipeScenario {
	r := rand.New(rand.NewPCG(seed, 0x91be))
	s := &PipeScenario{Seed: seed, Batch: 1 + r.IntN(4), ReleaseDead: r.IntN(2) == 0}
	for range 1 + r.IntN(3) {
		rl := PipeRelay{Skew: float64(r.IntN(11)) / 100}
		if r.IntN(3) == 0 {
			rl.CrashAt = 1 + r.IntN(3)
		}
		if r.IntN(3) == 0 {
			rl.ShutdownAt, rl.ShutdownAfter = 1+r.IntN(3), float64(r.IntN(6))/10
		}
		s.Relays = append(s.Relays, rl)
	}
	keys := 1 + r.IntN(3)
	refusing := r.IntN(4) == 0 // a key whose first message goes to the refusing topic
	big := r.IntN(8) == 0
	n := 2 + r.IntN(5)
	for i := range n {
		p := &PipeParent{Index: i, Key: fmt.Sprintf("parent-%d", i), At: float64(r.IntN(30))/10 + float64(i)/997}
		for j := range 1 + r.IntN(3) {
			m := &PipeMsg{Name: fmt.Sprintf("m%d", j), Topic: pipeTopicA}
			if r.IntN(2) == 0 {
				m.Topic = pipeTopicB
			}
			if r.IntN(3) == 0 {
				m.Topic = "projects/" + pipeProject + "/topics/" + m.Topic
			}
			if r.IntN(4) != 0 {
				m.OrderingKey = fmt.Sprintf("k%d", r.IntN(keys))
			}
			switch r.IntN(8) {
			case 0:
				m.ErrTries = 1 + r.IntN(3)
			case 1:
				m.Unavailable = 1 + r.IntN(3)
			case 2:
				m.Stall = 0.3 + float64(r.IntN(20))/10
			}
			p.Msgs = append(p.Msgs, m)
		}
		for range 2 {
			switch r.IntN(6) {
			case 0:
				p.Faults = append(p.Faults, bodyRollback)
			case 1:
				p.Faults = append(p.Faults, bodyFenced)
			}
		}
		if r.IntN(5) == 0 {
			p.Forget, p.ForgetAfter = true, float64(r.IntN(5))/10
			if r.IntN(2) == 0 {
				// Its first publish lands late: the Forget and the next
				// completion come while the relay still holds it.
				p.Msgs[0].Stall = 0.6 + float64(r.IntN(5))/10
			}
		}
		s.Parents = append(s.Parents, p)
	}
	if refusing {
		s.refuse(s.Batch + 1)
	}
	if big {
		s.Parents[r.IntN(n)].Msgs[0].Big = true
	}
	drawPipeReaches(s, r)
	return s
}

// refuse sends the first parent's first message to the refusing topic,
// ordered, early; the other messages of its ordering key go there too,
// so that they queue behind it (one order key: the topic's ID and the
// ordering key), at least behind of them, to fill a Take's window while
// messages of other keys wait after them.
func (s *PipeScenario) refuse(behind int) {
	p := s.Parents[0]
	p.At = 0
	p.Msgs[0].Topic, p.Msgs[0].OrderingKey = pipeTopicGone, "k0"
	n := 0
	for _, q := range s.Parents {
		for _, m := range q.Msgs {
			if m.OrderingKey == "k0" {
				m.Topic = strings.Replace(m.Topic, pipeTopicA, pipeTopicGone, 1)
				m.Topic = strings.Replace(m.Topic, pipeTopicB, pipeTopicGone, 1)
				m.ErrTries, m.Unavailable, m.Stall = 0, 0, 0
				n++
			}
		}
	}
	for ; n < behind; n++ {
		p.Msgs = append(p.Msgs, &PipeMsg{Name: fmt.Sprintf("m%d", len(p.Msgs)), Topic: pipeTopicGone, OrderingKey: "k0"})
	}
}

// BurstBesideRefusals draws the slow Pub/Sub's burst beside refused
// messages too (-sim.burst-refusals; make sim sets it): those runs reach the
// relay's suspects but are the most sensitive to a loaded machine.
var BurstBesideRefusals bool

// drawPipeReaches draws, after every earlier draw so that those stay as
// they were, what reaches the relay's and the outboxes' limits: a crowd
// behind a dead message, a request refused whole, a slow Pub/Sub's burst
// (docs/testing.md, "The pipeline family's model and rules").
func drawPipeReaches(s *PipeScenario, r *rand.Rand) {
	if r.IntN(3) == 0 {
		s.ReleaseDead = false
		s.refuse(pipeScanPages*s.Batch + 1 + r.IntN(8))
	}
	if r.IntN(3) == 0 {
		s.Batch = max(s.Batch, 2)
		topic := []string{pipeTopicA, pipeTopicB}[r.IntN(2)]
		s.Parents = append(s.Parents, &PipeParent{Index: len(s.Parents), Key: fmt.Sprintf("parent-%d", len(s.Parents)),
			At: float64(r.IntN(20)) / 10, Msgs: []*PipeMsg{
				{Name: "m0", Topic: topic, OrderingKey: "kr"},
				{Name: "m1", Topic: topic, OrderingKey: "kr", ErrTries: pipeMaxAttempts + r.IntN(2)},
			}})
	}
	// Beside a refusal, the burst is drawn only with BurstBesideRefusals
	// (see there).
	if burst := r.IntN(4) == 0; burst && (BurstBesideRefusals || !refuses(s)) {
		s.Burst, s.unburst = true, s.Batch
		s.Batch = 24 + r.IntN(25)
		s.Latency = 0.3 + float64(r.IntN(5))/20
		msgs, at := 120+r.IntN(100), float64(r.IntN(5))/10
		for i := 0; i < msgs; i += pipeBurstParent {
			p := &PipeParent{Index: len(s.Parents), Key: fmt.Sprintf("parent-%d", len(s.Parents)), At: at + float64(i)/997, Burst: true}
			for j := i; j < min(i+pipeBurstParent, msgs); j++ {
				p.Msgs = append(p.Msgs, &PipeMsg{Name: fmt.Sprintf("m%d", j-i), Topic: pipeTopicA, OrderingKey: fmt.Sprintf("b%d", j)})
			}
			s.Parents = append(s.Parents, p)
		}
		if r.IntN(2) == 0 {
			// The server stalls as the burst begins: the requests pile
			// up behind the client's workers, generations deep.
			s.Parents[len(s.Parents)-(msgs+pipeBurstParent-1)/pipeBurstParent].Msgs[0].Stall = 2 + float64(r.IntN(6))/10
		}
	}
}

// withoutBurst returns s without its burst, for a backend that runs none
// (PipeBackend.Burst).
func (s *PipeScenario) withoutBurst() *PipeScenario {
	if !s.Burst {
		return s
	}
	c := *s
	c.Burst, c.Batch, c.Latency = false, s.unburst, 0
	c.Parents = slices.DeleteFunc(slices.Clone(s.Parents), func(p *PipeParent) bool { return p.Burst })
	return &c
}

// pipeScanPages is outboxq.ScanPages: a Take of the Google stores scans
// at most that many times its limit of due messages.
const pipeScanPages = 4

// pipeBurstParent is how many of a burst's messages one parent commits.
const pipeBurstParent = 25

// String sums the scenario up, a line per parent.
func (s *PipeScenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline seed %d: %d relays (batch %d, release_dead=%v), Pub/Sub latency %.2f leases a request", s.Seed, len(s.Relays), s.Batch, s.ReleaseDead, s.Latency)
	for i, rl := range s.Relays {
		fmt.Fprintf(&b, "\n  relay %d: crash at settle %d, shutdown at take %d (+%.1f leases), skew %.2f leases", i, rl.CrashAt, rl.ShutdownAt, rl.ShutdownAfter, rl.Skew)
	}
	for _, p := range s.Parents {
		fmt.Fprintf(&b, "\n  %s at %.2f leases, faults %v, forget=%v", p.Key, p.At, p.Faults, p.Forget)
		for i, m := range p.Msgs {
			if i == 4 && len(p.Msgs) > 8 {
				fmt.Fprintf(&b, "\n    … and %d more (%s to %s)", len(p.Msgs)-4, m.Name, p.Msgs[len(p.Msgs)-1].Name)
				break
			}
			fmt.Fprintf(&b, "\n    %s: topic %s, ordering key %q, err tries %d, unavailable %d, stall %.1f, big=%v", m.Name, m.Topic, m.OrderingKey, m.ErrTries, m.Unavailable, m.Stall, m.Big)
		}
	}
	return b.String()
}

// pipeMaxAttempts is the relays' MaxAttempts: every injected failure
// sequence (ErrTries + Unavailable ≤ 6) may exhaust it, which the rules
// allow (a message dies only after injected failures).
const pipeMaxAttempts = 4

// pipeRelayOptions are the options of every relay of a run.
func pipeRelayOptions(s *PipeScenario, lease time.Duration) relay.Options {
	return relay.Options{BatchSize: s.Batch, Lease: lease, PollInterval: lease / 8,
		MaxAttempts: pipeMaxAttempts, ReleaseDead: s.ReleaseDead,
		StopTimeout: lease / 2, MinBackoff: lease / 8, MaxBackoff: lease}
}

// stopBound is how long a relay's Run may take to return once its context
// ends, beside the time its Settles take meanwhile (each bounded by the
// relay): its StopTimeout and a lease of slack for the scheduler.
func stopBound(o relay.Options) time.Duration { return o.StopTimeout + o.Lease }

// refuses reports whether a message of s is refused by Pub/Sub: sent to
// the refusing topic, or refused on some tries.
func refuses(s *PipeScenario) bool {
	for _, p := range s.Parents {
		for _, m := range p.Msgs {
			if m.ErrTries > 0 || strings.Contains(m.Topic, pipeTopicGone) {
				return true
			}
		}
	}
	return false
}
