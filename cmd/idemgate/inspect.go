package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

const inspectHelp = `Inspect shows the record of each KEY as the store holds it, read in one
step, and changes nothing. It names the store and the table, key prefix,
kind or collection it read. The status says what the next delivery of the
key's message meets:

  absent    no live record (never claimed, or expired): the work runs
  held      a holder is working: deliveries get 503 (nack) until its lease ends
  lapsed    the lease ended without a release: the holder crashed or is still
            working past its lease; the next delivery takes the key over.
            The work may have run: check the sink before you replay it
  released  the claim was given up (Release or forget): the work runs
  done      the work succeeded: deliveries are acked as duplicates until expiry
  failed    the work failed for good: deliveries do not run it again until
            the record expires or idemgate retry frees it

For an absent KEY, inspect lists up to 5 records whose key ends with KEY,
where the store can search keys (SQL, Redis): a service often puts a prefix
before a message's key (KeyFromAttribute puts the attribute's name:
order_id:o-1; example-run's prefixes are in docs/operations.md).
The record names the delivery that won it, as the gateway sets it: its
surface and message id (push/…, cloudevent/…, pull/…), so a done record
answers "which message did the work, and when": done by push/4711 at T,
fence F. A held record names its holder; a released one, its last holder.
A record whose work failed shows its failed attempts, the last one's
reason and when the first failed; a FAILED one, when it went FAILED.
A record written by an earlier idemgate, or by a Lock whose caller named
no origin, names none; one completed by an earlier idemgate shows its last
lease end as its completion time.
The instants are on the clock the store decides with: the server's for SQL
and Redis, each process's own for Datastore and Firestore (then this
machine's clock reads them).
`

func (c *cli) inspect(ctx context.Context, args []string) int {
	fs, cm := c.flags("inspect", "KEY…", inspectHelp, 10*time.Second)
	asJSON := fs.Bool("json", false, "print one JSON object per key, one per line, for scripts")
	showToken := fs.Bool("show-token", false, "print a live claim's token, the credential that completes or releases it")
	keys, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	return c.withKeys(ctx, cm, keys, func(ctx context.Context, o *storeurl.Opened, x store.Inspector, keys []string) error {
		if !*asJSON {
			fmt.Fprintf(c.stdout, "store:      %s\n", o.Where())
		}
		for _, key := range keys {
			r, ok, err := x.Inspect(ctx, key)
			if err != nil {
				return err
			}
			hideToken(&r, *showToken)
			var near nearby
			if !ok {
				near = findNearby(ctx, o, x, key)
			}
			if *asJSON {
				if err := json.NewEncoder(c.stdout).Encode(toJSON(o, key, r, ok, near)); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintln(c.stdout)
			writeRecord(c.stdout, o, key, r, ok, near)
		}
		return nil
	})
}

// hideToken replaces r's token by a mark unless show: the token is the
// credential that completes or releases the claim, and is printed only
// when asked for.
func hideToken(r *store.Record, show bool) {
	if r.Token != "" && !show {
		r.Token = "(hidden: -show-token prints it)"
	}
}

// clockOf names the clock o's records are read on.
func clockOf(o *storeurl.Opened) string {
	if _, ok := o.Store.(clocked); ok {
		return "the store's clock"
	}
	return "this machine's clock: the " + o.Name + " store decides on each process's own clock"
}

// maxNearby bounds the records an absent key's answer lists.
const maxNearby = 5

// nearby is what an absent key's answer adds: the records whose key ends
// with it, or why none are listed, and a hint.
type nearby struct {
	records []nearRecord
	note    string // why no record is listed, or that more may exist
	hint    string
}

type nearRecord struct {
	Key    string `json:"key"`
	Status string `json:"status"`
}

// findNearby looks for the records whose key ends with key, where o can
// search keys by suffix. A failed search is a note, not the command's
// failure: the key's own answer stands.
func findNearby(ctx context.Context, o *storeurl.Opened, x store.Inspector, key string) nearby {
	n := nearby{hint: keyHint(key, storePrefixes(ctx, o.Store))}
	if o.FindSuffix == nil {
		n.note = "this store cannot search keys by suffix"
		return n
	}
	keys, complete, err := o.FindSuffix(ctx, key, maxNearby+1)
	if err != nil {
		n.note = "the search for keys ending with it failed: " + err.Error()
		return n
	}
	for _, k := range keys {
		if k == key || len(n.records) == maxNearby {
			continue
		}
		r, ok, err := x.Inspect(ctx, k)
		if err != nil {
			n.note = "reading " + strconv.Quote(k) + " failed: " + err.Error()
			return n
		}
		n.records = append(n.records, nearRecord{k, status(r, ok)})
	}
	switch {
	case len(keys) > maxNearby:
		n.note = fmt.Sprintf("the first %d keys ending with it are shown", maxNearby)
	case !complete:
		n.note = "the search stopped before it covered every record"
	case len(n.records) == 0:
		n.note = "no record's key ends with it"
	}
	return n
}

// status says in one word what the next delivery of r's message meets; ok
// is false when there is no live record.
func status(r store.Record, ok bool) string {
	switch {
	case !ok:
		return "absent"
	case r.State == store.Done:
		return "done"
	case r.State == store.Failed:
		return "failed"
	case r.Released():
		return "released"
	case r.Lapsed():
		return "lapsed"
	}
	return "held"
}

// crashWindow is what a lapsed claim means for an operator about to replay
// its message: the holder may have done the work before it died.
const crashWindow = "The work may have run before the holder stopped: check the sink before you replay the message."

// meaning explains each status on one line.
var meaning = map[string]string{
	"absent":   "no live record (never claimed, or expired): the next delivery runs the work",
	"held":     "a holder is working: deliveries get 503 (nack) until its lease ends",
	"lapsed":   "the lease ended without a release: the holder crashed or is still working past it; the next delivery takes the key over. " + crashWindow,
	"released": "the claim was given up (Release or forget): the next delivery runs the work",
	"done":     "the work succeeded: deliveries are acked as duplicates until the record expires",
	"failed":   "the work failed for good: deliveries do not run it again until the record expires, or idemgate retry frees it",
}

// writeRecord prints r for people, its instants in UTC and relative to
// clock at the read, or what was found near an absent key.
func writeRecord(w io.Writer, o *storeurl.Opened, key string, r store.Record, ok bool, near nearby) {
	st := status(r, ok)
	fmt.Fprintf(w, "key:        %q\n", key)
	if !ok {
		fmt.Fprintf(w, "status:     absent in %s: %s\n", o.Where(), meaning[st])
	} else {
		fmt.Fprintf(w, "status:     %s: %s\n", st, meaning[st])
	}
	if !ok {
		for i, n := range near.records {
			label := "similar:"
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(w, "%-11s %q (%s)\n", label, n.Key, n.Status)
		}
		if near.note != "" {
			fmt.Fprintf(w, "similar:    %s\n", near.note)
		}
		if len(near.records) == 0 {
			fmt.Fprintf(w, "hint:       %s\n", near.hint)
		}
		return
	}
	fmt.Fprintf(w, "%-11s %s\n", st+":", byLine(st, r))
	fmt.Fprintf(w, "state:      %v\n", r.State)
	fmt.Fprintf(w, "fence:      %d\n", r.Fence)
	if r.Token != "" {
		fmt.Fprintf(w, "token:      %s\n", r.Token)
	}
	// A DONE record's lease ended at its completion, shown above; a
	// FAILED one's when it failed, shown below.
	if r.State == store.Claimed {
		fmt.Fprintf(w, "lease:      %s\n", when(r.LeaseUntil, r.ReadAt))
	}
	writeFailures(w, r)
	fmt.Fprintf(w, "expires:    %s\n", when(r.ExpiresAt, r.ReadAt))
	if len(r.Fingerprint) > 0 {
		fmt.Fprintf(w, "payload:    %x (fingerprint; a delivery of this key with another is a conflict)\n", r.Fingerprint)
	}
	fmt.Fprintf(w, "read at:    %s (%s)\n", stamp(r.ReadAt), clockOf(o))
}

// byLine says who had the record: "by push/4711 at T, fence F" for a done
// record, the holder for a held or lapsed one, the last holder for a
// released one.
func byLine(st string, r store.Record) string {
	by := r.Origin
	if by == "" {
		by = "a delivery the record does not name"
	}
	switch st {
	case "done":
		return fmt.Sprintf("by %s at %s, fence %d", by, when(r.CompletedAt, r.ReadAt), r.Fence)
	case "released":
		return "last held by " + by
	case "failed":
		return fmt.Sprintf("last run by %s, fence %d", by, r.Fence)
	}
	return fmt.Sprintf("by %s, fence %d", by, r.Fence)
}

// writeFailures prints the failed attempts r counts, if any: for a FAILED
// record the count, the reason, the first failure and when it went
// FAILED; for another, one line on the attempts that failed before the
// current holder's or the completion, and the first failure.
func writeFailures(w io.Writer, r store.Record) {
	if r.Attempts == 0 && r.State != store.Failed {
		return
	}
	switch r.State {
	case store.Failed:
		fmt.Fprintf(w, "attempts:   %d failed\n", r.Attempts)
		fmt.Fprintf(w, "reason:     %s\n", r.Reason)
	case store.Done:
		fmt.Fprintf(w, "failures:   %s before the work succeeded, last: %s\n", plural(r.Attempts, "failed attempt"), r.Reason)
	default:
		fmt.Fprintf(w, "failures:   %s so far, last: %s\n", plural(r.Attempts, "failed attempt"), r.Reason)
	}
	if !r.FirstFailure.IsZero() {
		fmt.Fprintf(w, "first fail: %s\n", when(r.FirstFailure, r.ReadAt))
	}
	if r.State == store.Failed {
		fmt.Fprintf(w, "failed at:  %s\n", when(r.FailedAt(), r.ReadAt))
	}
}

// plural is n and noun, with an s unless n is 1: "2 failed attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// stamp formats t in UTC to the millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// when formats t and how far it is from now.
func when(t, now time.Time) string {
	d := t.Sub(now).Round(time.Millisecond)
	switch {
	case d > 0:
		return fmt.Sprintf("%s (in %v)", stamp(t), d)
	case d < 0:
		return fmt.Sprintf("%s (%v ago)", stamp(t), -d)
	}
	return stamp(t) + " (now)"
}

// jsonRecord is inspect's -json output for one key.
// A DONE record has a completedAt in place of a leaseUntil; origin names
// the delivery that won the record (the last holder of a released one).
// A record with failed attempts has their count, the last one's reason
// and the first one's instant; a FAILED record, its failedAt in place of
// a leaseUntil. For an absent key, similar lists records whose key ends with it, and
// note says why none or not all are listed.
type jsonRecord struct {
	Key          string       `json:"key"`
	Found        bool         `json:"found"`
	Status       string       `json:"status"`
	State        string       `json:"state,omitempty"`
	Fence        int64        `json:"fence,omitempty"`
	Token        string       `json:"token,omitempty"`
	Origin       string       `json:"origin,omitempty"`
	LeaseUntil   *time.Time   `json:"leaseUntil,omitempty"`
	CompletedAt  *time.Time   `json:"completedAt,omitempty"`
	ExpiresAt    *time.Time   `json:"expiresAt,omitempty"`
	ReadAt       *time.Time   `json:"readAt,omitempty"`
	Fingerprint  string       `json:"fingerprint,omitempty"` // hex
	Attempts     int          `json:"attempts,omitempty"`
	Reason       string       `json:"reason,omitempty"`
	FirstFailure *time.Time   `json:"firstFailure,omitempty"`
	FailedAt     *time.Time   `json:"failedAt,omitempty"`
	Similar      []nearRecord `json:"similar,omitempty"`
	Note         string       `json:"note,omitempty"`
	Store        string       `json:"store"` // the store and where its records are read
}

func toJSON(o *storeurl.Opened, key string, r store.Record, ok bool, near nearby) jsonRecord {
	j := jsonRecord{Key: key, Found: ok, Status: status(r, ok), Store: o.Where()}
	if !ok {
		j.Similar, j.Note = near.records, near.note
		return j
	}
	j.State, j.Fence, j.Token, j.Fingerprint = r.State.String(), r.Fence, r.Token, hex.EncodeToString(r.Fingerprint)
	j.Origin, j.ExpiresAt, j.ReadAt = r.Origin, utc(r.ExpiresAt), utc(r.ReadAt)
	j.Attempts, j.Reason, j.FirstFailure = r.Attempts, r.Reason, utc(r.FirstFailure)
	switch r.State {
	case store.Done:
		j.CompletedAt = utc(r.CompletedAt)
	case store.Failed:
		j.FailedAt = utc(r.FailedAt())
	default:
		j.LeaseUntil = utc(r.LeaseUntil)
	}
	return j
}

// utc is t in UTC, or nil when t is zero.
func utc(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
