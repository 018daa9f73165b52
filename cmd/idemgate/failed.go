package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

const failedHelp = `Failed answers "what failed for good, and why?": it lists the FAILED
records (their work failed on its last allowed attempt, or with an error
that can never succeed), every page of the listing, grouped by reason:
the largest group first, the newest failure first within a group. Each
line shows the key, its failed attempts, when the first failed, when the
record went FAILED, the delivery that ran the last attempt (origin) and
the fence. A first line counts the keys and the reasons. It changes
nothing; idemgate retry -reason R retries a group.

-reason keeps the records whose reason starts with R, since reasons often
end with an ID; -prefix keeps the keys that start with P; -older the
records FAILED for at least D.

On a store with an outbox (SQL, Datastore, Firestore) it adds the
messages the relay gave up on ("dead"), grouped by reason (up to the
1000 oldest are read; the count covers them all): idemgate relay -dead
lists them and -revive revives them. -reason and -older (since the
message died) apply to them too; -prefix, which is about record keys,
leaves them out.

Keys are printed as list prints them. With -keys, only the keys are
printed, one per line, for a script (a key that holds a line break needs
-json).
`

// maxDeadRead bounds the dead outbox messages failed reads to group them.
const maxDeadRead = 1000

// selection is what failed lists and retry -reason retries: the FAILED
// records whose key starts with prefix, whose reason starts with reason,
// FAILED for at least olderThan.
type selection struct {
	prefix, reason string
	olderThan      time.Duration
	pageLimit      int // the records read per page; 0 means store.MaxListLimit
}

// define defines the flags of s in fs.
func (s *selection) define(fs *flag.FlagSet) {
	fs.StringVar(&s.reason, "reason", "", "the FAILED records whose reason starts with `R` (default every reason)")
	fs.StringVar(&s.prefix, "prefix", "", "the keys that start with `P`, taken literally (default every key)")
	fs.DurationVar(&s.olderThan, "older", 0, "the records FAILED for at least `D`")
}

// check refuses a selection no store can list.
func (s selection) check() error {
	if s.olderThan < 0 {
		return fmt.Errorf("%w: -older %v is negative", errUsage, s.olderThan)
	}
	return nil
}

// String says in words what s selects.
func (s selection) String() string {
	var with []string
	if s.prefix != "" {
		with = append(with, fmt.Sprintf("a key starting %q", s.prefix))
	}
	if s.reason != "" {
		with = append(with, fmt.Sprintf("a reason starting %q", s.reason))
	}
	w := "FAILED records"
	if len(with) > 0 {
		w += " with " + strings.Join(with, " and ")
	}
	if s.olderThan > 0 {
		w += fmt.Sprintf(", FAILED for %v or more", s.olderThan)
	}
	return w
}

// failedRecords reads every FAILED record of x that s selects, page after
// page, in key order. The reason is filtered here: a listing selects by
// key, state and age only.
func failedRecords(ctx context.Context, x store.Lister, s selection) ([]store.Record, error) {
	opts := store.ListOptions{States: store.StateFailed, Prefix: s.prefix, OlderThan: s.olderThan, Limit: cmp.Or(s.pageLimit, store.MaxListLimit)}
	var out []store.Record
	for {
		page, err := x.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Records {
			if r.State == store.Failed && strings.HasPrefix(r.Reason, s.reason) {
				out = append(out, r)
			}
		}
		if page.Next == "" {
			return out, nil
		}
		opts.Cursor = page.Next
	}
}

// failGroup is the FAILED records of one reason, newest failure first.
type failGroup struct {
	reason  string
	records []store.Record
}

// groupFailed groups rs by reason: the largest group first (then the one
// with the newest failure, then by reason), each newest failure first.
func groupFailed(rs []store.Record) []failGroup {
	by := map[string][]store.Record{}
	for _, r := range rs {
		by[r.Reason] = append(by[r.Reason], r)
	}
	groups := make([]failGroup, 0, len(by))
	for reason, rs := range by {
		slices.SortFunc(rs, func(a, b store.Record) int {
			return cmp.Or(b.FailedAt().Compare(a.FailedAt()), strings.Compare(a.Key, b.Key))
		})
		groups = append(groups, failGroup{reason, rs})
	}
	slices.SortFunc(groups, func(a, b failGroup) int {
		return cmp.Or(cmp.Compare(len(b.records), len(a.records)),
			b.records[0].FailedAt().Compare(a.records[0].FailedAt()), strings.Compare(a.reason, b.reason))
	})
	return groups
}

// deadGroup counts the dead outbox messages of one reason.
type deadGroup struct {
	Reason string    `json:"reason"`
	Count  int       `json:"count"`
	Oldest time.Time `json:"oldestDied"`
}

// deadOutbox is what failed shows of an outbox's dead messages.
type deadOutbox struct {
	total  int64       // every dead message, as the outbox counts them
	read   int         // the dead messages read, at most maxDeadRead
	groups []deadGroup // those read that the selection keeps, by reason, the largest first
	now    time.Time   // the clock their age is read on
	// note says why the messages are not shown, or not all.
	note string
}

// count is how many dead messages the groups hold.
func (d *deadOutbox) count() int {
	n := 0
	for _, g := range d.groups {
		n += g.Count
	}
	return n
}

// oldest is when the oldest message of the groups died.
func (d *deadOutbox) oldest() time.Time {
	var t time.Time
	for _, g := range d.groups {
		if t.IsZero() || g.Oldest.Before(t) {
			t = g.Oldest
		}
	}
	return t
}

// readDeadOutbox reads the dead messages of o's outbox that s selects; nil
// when o has no outbox or s leaves it out. An outbox that cannot be read
// (a service that enqueues nothing has no outbox table) is a note, not
// the command's failure: the records' answer stands.
func readDeadOutbox(ctx context.Context, o *storeurl.Opened, s selection) *deadOutbox {
	src, ok := outboxOf(o.Store)
	if !ok {
		return nil
	}
	if s.prefix != "" {
		return &deadOutbox{note: "left out: -prefix selects record keys, and a message has none"}
	}
	d := &deadOutbox{now: time.Now()}
	if c, ok := o.Store.(clocked); ok {
		now, err := c.Now(ctx)
		if err != nil {
			d.note = "the store's clock cannot be read: " + err.Error()
			return d
		}
		d.now = now
	}
	stater, ok := src.(relay.Stater)
	if !ok {
		d.note = "this outbox does not count its messages"
		return d
	}
	st, err := stater.Stats(ctx)
	if err != nil {
		d.note = "not readable: " + err.Error()
		return d
	}
	if d.total = st.Dead; d.total == 0 {
		return d
	}
	dl, ok := src.(relay.DeadLetters)
	if !ok {
		d.note = fmt.Sprintf("%d dead, which this outbox does not list", d.total)
		return d
	}
	dead, err := dl.Dead(ctx, maxDeadRead)
	if err != nil {
		d.note = fmt.Sprintf("%d dead, which cannot be listed: %v", d.total, err)
		return d
	}
	d.read = len(dead)
	at := map[string]int{}
	for _, m := range dead {
		if !strings.HasPrefix(m.Reason, s.reason) || d.now.Sub(m.Died) < s.olderThan {
			continue
		}
		i, ok := at[m.Reason]
		if !ok {
			i = len(d.groups)
			at[m.Reason] = i
			d.groups = append(d.groups, deadGroup{Reason: m.Reason, Oldest: m.Died})
		}
		d.groups[i].Count++
		if m.Died.Before(d.groups[i].Oldest) {
			d.groups[i].Oldest = m.Died
		}
	}
	slices.SortStableFunc(d.groups, func(a, b deadGroup) int { return cmp.Compare(b.Count, a.Count) })
	if int64(d.read) < d.total {
		d.note = fmt.Sprintf("the %d oldest of %d dead messages were read", d.read, d.total)
	}
	return d
}

func (c *cli) failed(ctx context.Context, args []string) int {
	fs, cm := c.flags("failed", "", failedHelp, time.Minute)
	var sel selection
	sel.define(fs)
	asJSON := fs.Bool("json", false, "print an object with the counts, then one JSON object per record, for scripts")
	keysOnly := fs.Bool("keys", false, "print only the keys, one per line, in the groups' order")
	rest, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	err := sel.check()
	switch {
	case err != nil:
	case len(rest) > 0:
		err = fmt.Errorf("%w: failed takes no arguments (got %q): give the key prefix with -prefix", errUsage, rest[0])
	case *asJSON && *keysOnly:
		err = fmt.Errorf("%w: give -json or -keys, not both", errUsage)
	}
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	return c.withStore(ctx, cm, func(ctx context.Context, o *storeurl.Opened) error {
		x, err := lister(o)
		if err != nil {
			return err
		}
		rs, err := failedRecords(ctx, x, sel)
		if err != nil {
			return err
		}
		groups := groupFailed(rs)
		switch {
		case *keysOnly:
			for _, g := range groups {
				for _, r := range g.records {
					fmt.Fprintln(c.stdout, r.Key)
				}
			}
			return nil
		case *asJSON:
			return writeFailedJSON(c.stdout, o, groups, readDeadOutbox(ctx, o, sel))
		}
		writeFailed(c.stdout, o, sel, groups, readDeadOutbox(ctx, o, sel))
		return nil
	})
}

// summary is failed's first line: "3 failed keys, 2 reasons", and the
// outbox's dead messages.
func summary(groups []failGroup, dead *deadOutbox) string {
	n := 0
	for _, g := range groups {
		n += len(g.records)
	}
	s := plural(n, "failed key") + ", " + plural(len(groups), "reason")
	if dead != nil && (dead.note == "" || dead.count() > 0) {
		s += "; outbox: " + plural(dead.count(), "dead message")
	}
	return s
}

// writeFailed prints failed's answer for people.
func writeFailed(w io.Writer, o *storeurl.Opened, sel selection, groups []failGroup, dead *deadOutbox) {
	fmt.Fprintln(w, summary(groups, dead))
	fmt.Fprintf(w, "store:    %s\n", o.Where())
	fmt.Fprintf(w, "listed:   %s\n", sel)
	for _, g := range groups {
		fmt.Fprintf(w, "\nreason:   %q (%s)\n", g.reason, plural(len(g.records), "key"))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  KEY\tATTEMPTS\tFIRST FAILURE\tFAILED AT\tORIGIN\tFENCE")
		for _, r := range g.records {
			first, origin := "-", cmp.Or(r.Origin, "-")
			if !r.FirstFailure.IsZero() {
				first = stamp(r.FirstFailure)
			}
			fmt.Fprintf(tw, "  %q\t%d\t%s\t%s\t%s\t%d\n", r.Key, r.Attempts, first, stamp(r.FailedAt()), origin, r.Fence)
		}
		tw.Flush()
	}
	if dead != nil && (dead.count() > 0 || dead.note != "") {
		writeDeadOutbox(w, dead)
	}
	fmt.Fprintf(w, "\nread on %s. idemgate inspect KEY shows a record; idemgate retry -reason R retries a group.\n", clockOf(o))
}

// writeDeadOutbox prints the outbox's group of dead messages.
func writeDeadOutbox(w io.Writer, d *deadOutbox) {
	fmt.Fprintln(w)
	if n := d.count(); n > 0 {
		old := d.oldest()
		fmt.Fprintf(w, "outbox:   %s (the oldest died %s, %s ago)\n", plural(n, "dead message"), stamp(old), short(d.now.Sub(old)))
		for _, g := range d.groups {
			fmt.Fprintf(w, "  %d  %q\n", g.Count, g.Reason)
		}
	}
	if d.note != "" {
		fmt.Fprintf(w, "outbox:   %s\n", d.note)
	}
	if d.total > 0 {
		fmt.Fprintln(w, "          idemgate relay -dead lists them; idemgate relay -revive ID,… revives them")
	}
}

// failedJSON is failed -json's first object: the counts.
type failedJSON struct {
	Failed  int           `json:"failed"`
	Reasons []reasonCount `json:"reasons"`
	Outbox  *outboxJSON   `json:"outbox,omitempty"`
	Store   string        `json:"store"`
}

// reasonCount is a group of FAILED records.
type reasonCount struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// outboxJSON is the outbox's dead messages in failed -json's first
// object: dead counts those the selection keeps, total every one.
type outboxJSON struct {
	Dead    int         `json:"dead"`
	Total   int64       `json:"total"`
	Reasons []deadGroup `json:"reasons,omitempty"`
	Note    string      `json:"note,omitempty"`
}

// writeFailedJSON prints failed's answer for scripts: the counts, then
// one object per record as list -json prints it, in the groups' order.
func writeFailedJSON(w io.Writer, o *storeurl.Opened, groups []failGroup, dead *deadOutbox) error {
	head := failedJSON{Reasons: []reasonCount{}, Store: o.Where()}
	for _, g := range groups {
		head.Failed += len(g.records)
		head.Reasons = append(head.Reasons, reasonCount{g.reason, len(g.records)})
	}
	if dead != nil {
		head.Outbox = &outboxJSON{Dead: dead.count(), Total: dead.total, Reasons: dead.groups, Note: dead.note}
		for i, g := range dead.groups {
			dead.groups[i].Oldest = g.Oldest.UTC()
		}
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(head); err != nil {
		return err
	}
	for _, g := range groups {
		for _, r := range g.records {
			if err := enc.Encode(listedJSON{toJSON(o, r.Key, r, true, nearby{}), r.Age().Round(time.Millisecond).String()}); err != nil {
				return err
			}
		}
	}
	return nil
}
