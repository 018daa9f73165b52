package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/redisstore"
)

const checkHelp = `Check verifies, as far as the store can tell, that it is ready for the
service: it connects, looks for the SQL table, its index, its fingerprint
and origin columns and the unique key on key_hash that every claim relies on, reads a
record, measures the skew of the store's clock against this machine's
where the store has a readable clock (SQL, Redis), and reads Redis's
maxmemory-policy. On a store with an outbox (SQL, Datastore, Firestore)
it reports the outbox's backlog, how long its oldest unsent message has
waited, and its dead messages: a message older than -max-outbox-age (a
relay that does not run or cannot publish) or a dead one is a problem.
Where the store lists records, more FAILED keys than -max-failed (the
work failed for good: each waits for an operator's retry) and a claim
held or lapsed for longer than -max-held (a holder slow or crashed: its
work may have run) are problems too, as the shipped alert policies
failed-keys.json and relay-behind.json see them. It writes nothing. Run it in the deploy pipeline before rolling out: it
exits 1 when it finds a problem.
`

// probeKey is the key check reads to prove that records can be read. It
// is only read, never written.
const probeKey = "idemgate-check-probe"

// clocked is a store with a readable clock of its own (sqlstore, redisstore).
type clocked interface {
	Now(ctx context.Context) (time.Time, error)
}

// evicting is a store that can read its server's eviction policy
// (redisstore).
type evicting interface {
	CheckEviction(ctx context.Context) error
}

// report prints check's findings and counts the problems.
type report struct {
	c        *cli
	problems int
}

func (r *report) ok(what, format string, args ...any) { r.line("ok", what, format, args...) }
func (r *report) info(what, format string, args ...any) {
	r.line("info", what, format, args...)
}
func (r *report) fail(what, format string, args ...any) {
	r.problems++
	r.line("FAIL", what, format, args...)
}
func (r *report) line(level, what, format string, args ...any) {
	fmt.Fprintf(r.c.stdout, "%-5s %-9s %s\n", level, what, oneLine(fmt.Sprintf(format, args...)))
}

func (c *cli) check(ctx context.Context, args []string) int {
	fs, cm := c.flags("check", "", checkHelp, 30*time.Second)
	maxSkew := fs.Duration("max-skew", 2*time.Second, "largest skew of the store's clock against this machine's that passes")
	maxAge := fs.Duration("max-outbox-age", 10*time.Minute, "longest wait of the oldest unsent outbox message that passes")
	maxFailed := fs.Int("max-failed", 0, "most FAILED keys that pass")
	maxHeld := fs.Duration("max-held", 10*time.Minute, "longest a claim may stay held or lapsed and pass")
	rest, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintln(c.stderr, "idemgate: check takes no arguments")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, cm.timeout)
	defer cancel()
	r := &report{c: c}
	o, err := c.open(ctx, cm)
	if errors.Is(err, errUsage) {
		return c.fail(ctx, cm, err)
	}
	if err != nil {
		r.fail("store", "%v", c.explain(ctx, cm, err))
		return r.done()
	}
	defer o.Close()
	r.ok("store", "%s store opened: %s", o.Name, o.Where())

	// 1. The table, where there is one.
	if t, ok := o.Store.(tableOwner); ok {
		switch exists, err := t.TableExists(ctx); {
		case err != nil:
			r.fail("table", "%v", c.explain(ctx, cm, err))
			return r.done()
		case !exists:
			r.fail("table", "%v", noTable(o))
			return r.done()
		}
		r.ok("table", "table, unique key on key_hash, index on expires_at, fingerprint and origin columns in place")
	} else {
		r.info("table", "%s keeps records without a schema: nothing to create", o.Name)
	}

	// 2. A read, which also proves the store is reachable where opening
	// it did no I/O (Datastore, Firestore).
	x, err := inspector(o)
	if err == nil {
		_, _, err = x.Inspect(ctx, probeKey)
	}
	if err != nil {
		r.fail("read", "%v", c.explain(ctx, cm, err))
		return r.done()
	}
	r.ok("read", "records readable")

	// 3. The clock.
	if s, ok := o.Store.(clocked); ok {
		if err := r.clock(ctx, s, *maxSkew); err != nil {
			r.fail("clock", "%v", c.explain(ctx, cm, err))
		}
	} else {
		r.info("clock", "skew not measurable: this store decides on each process's own clock, so keep the service's clocks synchronised (and see SkewMargin in docs/stores/%s.md)", o.Name)
	}

	// 4. Redis's eviction policy.
	if s, ok := o.Store.(evicting); ok {
		err := s.CheckEviction(ctx)
		var ev *redisstore.EvictionError
		switch {
		case err == nil:
			r.ok("eviction", "maxmemory-policy noeviction")
		case errors.As(err, &ev) && allowsEviction(cm.store):
			r.info("eviction", "maxmemory-policy %s%s may evict records, accepted by allow_eviction=true in the store URL", ev.Policy, onAddr(ev.Addr))
		default:
			r.fail("eviction", "%v", c.explain(ctx, cm, err))
		}
	}

	// 5. The records that wait for an operator, where the store lists them.
	if x, err := lister(o); err == nil {
		r.records(ctx, x, *maxFailed, *maxHeld)
	}

	// 6. The outbox, where the store has one.
	if src, ok := outboxOf(o.Store); ok {
		if s, ok := src.(relay.Stater); ok {
			r.outbox(ctx, s, *maxAge)
		}
	}
	return r.done()
}

// records reports the FAILED keys of x by reason, a problem when there are
// more than maxFailed, and the claims held or lapsed for longer than
// maxHeld, a problem when there is one.
func (r *report) records(ctx context.Context, x store.Lister, maxFailed int, maxHeld time.Duration) {
	failed, err := failedRecords(ctx, x, selection{})
	switch {
	case err != nil:
		r.fail("failed", "listing the FAILED records: %v", err)
	case len(failed) > maxFailed:
		var by []string
		for _, g := range groupFailed(failed) {
			by = append(by, fmt.Sprintf("%d %q", len(g.records), g.reason))
		}
		r.fail("failed", "%s, more than -max-failed %d (by reason: %s): the work failed for good; idemgate failed lists them, idemgate retry -reason R runs them again once the cause is fixed",
			plural(len(failed), "FAILED key"), maxFailed, strings.Join(by, ", "))
	default:
		r.ok("failed", "%s", plural(len(failed), "FAILED key"))
	}
	page, err := x.List(ctx, store.ListOptions{States: store.StateHeld | store.StateLapsed, OlderThan: maxHeld, Limit: store.MaxListLimit})
	switch n := len(page.Records); {
	case err != nil:
		r.fail("held", "listing the held and lapsed claims: %v", err)
	case n > 0:
		more := ""
		if page.Next != "" {
			more = " or more"
		}
		r.fail("held", "%s%s held or lapsed for longer than -max-held %v (the oldest listed: %q): a holder slow or crashed, whose work may have run: check the sink before a replay (idemgate list -state held,lapsed -older %v)",
			plural(n, "claim"), more, maxHeld, page.Records[0].Key, maxHeld)
	default:
		r.ok("held", "no claim held or lapsed for longer than %v", maxHeld)
	}
}

// outbox reports the state of s, an outbox: a problem when its oldest
// unsent message has waited longer than maxAge, or when it keeps dead
// messages; only information when it cannot be read (a service that
// enqueues nothing has no outbox table).
func (r *report) outbox(ctx context.Context, s relay.Stater, maxAge time.Duration) {
	st, err := s.Stats(ctx)
	if err != nil {
		r.info("outbox", "not readable: %v", err)
		return
	}
	msg := fmt.Sprintf("%d unsent", st.Unsent)
	if st.Unsent > 0 {
		msg += fmt.Sprintf(", the oldest waiting %v", st.Oldest.Round(time.Millisecond))
	}
	msg += fmt.Sprintf(", %d dead", st.Dead)
	switch {
	case st.Oldest > maxAge:
		r.fail("outbox", "%s: a message has waited longer than -max-outbox-age %v: is a relay running, and can it publish? (its WARN lines, idemgate relay -dead)", msg, maxAge)
	case st.Dead > 0:
		r.fail("outbox", "%s: list them with idemgate relay -dead, fix the cause, revive them with idemgate relay -revive", msg)
	default:
		r.ok("outbox", "%s", msg)
	}
}

// clock measures the skew of s's clock against this machine's and reports
// a problem when it exceeds maxSkew by more than the measurement can tell.
func (r *report) clock(ctx context.Context, s clocked, maxSkew time.Duration) error {
	before := time.Now()
	now, err := s.Now(ctx)
	after := time.Now()
	if err != nil {
		return err
	}
	skew := now.Sub(before.Add(after.Sub(before) / 2))
	// The store's clock is read somewhere in the round trip, to the
	// millisecond: that bounds what can be known.
	margin := after.Sub(before)/2 + time.Millisecond
	msg := fmt.Sprintf("the store's clock is %s this machine's (±%v)", skewWords(skew), margin.Round(time.Millisecond))
	if skew.Abs()-margin > maxSkew {
		r.fail("clock", "%s, more than -max-skew %v: fix the clocks' synchronisation (NTP)", msg, maxSkew)
		return nil
	}
	r.ok("clock", "%s; the store decides on its own clock", msg)
	return nil
}

// done prints the verdict and returns the exit status.
func (r *report) done() int {
	if r.problems > 0 {
		fmt.Fprintf(r.c.stdout, "check: %d problem(s) found\n", r.problems)
		return exitProblem
	}
	fmt.Fprintln(r.c.stdout, "check: no problem found")
	return exitOK
}

// explain adds to err that the command ran out of time, when it did.
func (c *cli) explain(ctx context.Context, cm *common, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("%v (no answer within -timeout %v)", err, cm.timeout)
	}
	return err.Error()
}

// skewWords says how far ahead or behind a clock is.
func skewWords(d time.Duration) string {
	d = d.Round(time.Millisecond)
	switch {
	case d > 0:
		return fmt.Sprintf("%v ahead of", d)
	case d < 0:
		return fmt.Sprintf("%v behind", -d)
	}
	return "level with"
}

// onAddr is " on addr", or nothing for a lone server.
func onAddr(addr string) string {
	if addr == "" {
		return ""
	}
	return " on " + addr
}

// allowsEviction reports whether a Redis store URL sets allow_eviction,
// which made opening it skip the eviction check.
func allowsEviction(rawURL string) bool {
	_, query, _ := strings.Cut(rawURL, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return false
	}
	ok, _ := strconv.ParseBool(q.Get("allow_eviction"))
	return ok
}
