package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemgate/idemgate/store"
)

const listHelp = `List answers "what is stuck?": the live records whose key starts with
-prefix, in the states asked for, that have been in that state for at least
-older, one line each, a page at a time. It changes nothing. The states are
inspect's:

  held      a holder is working; FOR counts from its claim (its fence)
  lapsed    the lease ended without a release; FOR counts from the lease's end
  released  the claim was given up (Release or forget); FOR counts from then
  done      the work succeeded; FOR counts from the completion, which is the
            record's expiry less the store's ttl (the URL's ttl, default 1h):
            exact when it is the service's
  failed    the work failed for good; FOR counts from its last failure

A record whose attempts at the work failed shows their count (ATTEMPTS);
idemgate failed lists the FAILED records by reason.

A held record FOR longer than the service's longest work, or any lapsed
one, is worth an inspect: its work may have run, so check the sink before
a replay. Keys come in key order (in SCAN's order on Redis,
sorted within a page; the Google stores list keys they keep hashed last).
The line after the page is the command for the next one. A page may be
short, or empty, before the end: some stores read a bounded number of
records per page. What each listing costs, store by store, is in
docs/operations.md.
`

func (c *cli) list(ctx context.Context, args []string) int {
	fs, cm := c.flags("list", "", listHelp, 30*time.Second)
	states := fs.String("state", "", "the `states` to list, comma-separated: held, lapsed, released, done, failed (default all)")
	prefix := fs.String("prefix", "", "list the keys that start with `P`, taken literally (default every key)")
	older := fs.Duration("older", 0, "list the records in their state for at least `D`")
	limit := fs.Int("limit", store.DefaultListLimit, fmt.Sprintf("the most records on the page, at most %d", store.MaxListLimit))
	cursor := fs.String("cursor", "", "continue from the page that printed `C`")
	asJSON := fs.Bool("json", false, "print one JSON object per record, then {\"next\": C}, for scripts")
	showToken := fs.Bool("show-token", false, "with -json: print a live claim's token, the credential that completes or releases it")
	rest, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, cm.timeout)
	defer cancel()
	opts := store.ListOptions{Prefix: *prefix, OlderThan: *older, Limit: *limit, Cursor: *cursor}
	var err error
	if opts.States, err = store.ParseStates(*states); err == nil {
		_, err = opts.Check()
	}
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("list takes no arguments (got %q): give the key prefix with -prefix", rest[0])
	}
	if err != nil {
		return c.fail(ctx, cm, fmt.Errorf("%w: %w", errUsage, err))
	}
	o, err := c.open(ctx, cm)
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	defer o.Close()
	x, err := lister(o)
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	if err := tableReady(ctx, o); err != nil {
		return c.fail(ctx, cm, err)
	}
	page, err := x.List(ctx, opts)
	if errors.Is(err, store.ErrInvalidCursor) {
		err = fmt.Errorf("%w: -cursor %.40q is not one a listing printed (a page's next cursor, for the same store, -state and -prefix)", errUsage, opts.Cursor)
	}
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		for _, r := range page.Records {
			hideToken(&r, *showToken)
			j := listedJSON{toJSON(o, r.Key, r, true, nearby{}), r.Age().Round(time.Millisecond).String()}
			if err := enc.Encode(j); err != nil {
				return c.fail(ctx, cm, err)
			}
		}
		if err := enc.Encode(map[string]string{"next": page.Next}); err != nil {
			return c.fail(ctx, cm, err)
		}
		return exitOK
	}
	fmt.Fprintf(c.stdout, "store:    %s\n", o.Where())
	fmt.Fprintf(c.stdout, "listed:   %s\n", describe(opts))
	if len(page.Records) > 0 {
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tSTATE\tFOR\tFENCE\tLEASE\tEXPIRES\tATTEMPTS")
		for _, r := range page.Records {
			// A DONE or FAILED record's lease ended when it got there.
			lease, attempts := "-", "-"
			if r.State == store.Claimed {
				lease = ago(r.LeaseUntil, r.ReadAt)
			}
			if r.Attempts > 0 {
				attempts = fmt.Sprint(r.Attempts)
			}
			fmt.Fprintf(tw, "%q\t%s\t%v\t%d\t%s\t%s\t%s\n", r.Key, r.ListState(), short(r.Age()), r.Fence, lease, ago(r.ExpiresAt, r.ReadAt), attempts)
		}
		tw.Flush()
	}
	if slices.ContainsFunc(page.Records, func(r store.Record) bool { return r.ListState() == store.StateLapsed }) {
		fmt.Fprintln(c.stdout, crashWindow)
	}
	fmt.Fprintf(c.stdout, "%d records on this page, read on %s.\n", len(page.Records), clockOf(o))
	if page.Next == "" {
		fmt.Fprintln(c.stdout, "end of the listing.")
	} else {
		fmt.Fprintf(c.stdout, "next page: %s\n", nextCommand(fs, page.Next))
	}
	return exitOK
}

// listedJSON is list's -json output for one record: inspect's, with the
// time in its state.
type listedJSON struct {
	jsonRecord
	Age string `json:"for"`
}

// describe says in words what opts lists.
func describe(o store.ListOptions) string {
	s := "every record"
	if o.States != 0 {
		s = o.States.String() + " records"
	}
	if o.Prefix != "" {
		s += fmt.Sprintf(" with a key starting %q", o.Prefix)
	}
	if o.OlderThan > 0 {
		s += fmt.Sprintf(", in that state for %v or more", o.OlderThan)
	}
	return s
}

// ago formats t relative to now, for a column.
func ago(t, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + short(d)
	} else {
		return short(-d) + " ago"
	}
}

// short rounds d to the second from a minute up, to the millisecond below.
func short(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// nextCommand is the command line of the page after this one: the flags
// given, but -store, which may hold a password (it is in $IDEMGATE_STORE,
// or the reader adds it back), with -cursor next.
func nextCommand(fs *flag.FlagSet, next string) string {
	args := []string{"idemgate", "list"}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "store", "cursor":
			return
		}
		args = append(args, "-"+f.Name, shellQuote(f.Value.String()))
	})
	return strings.Join(append(args, "-cursor", next), " ")
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/=+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
