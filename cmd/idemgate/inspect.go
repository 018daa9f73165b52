package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/idemgate/idemgate/store"
)

const inspectHelp = `Inspect shows the record of each KEY as the store holds it, read in one
step on the store's clock, and changes nothing. The status says what the
next delivery of the key's message meets:

  absent    no live record (never claimed, or expired): the work runs
  held      a holder is working: deliveries get 503 (nack) until its lease ends
  lapsed    the lease ended without a release: the holder crashed or is still
            working past its lease; the next delivery takes the key over
  released  the claim was given up (Release or forget): the work runs
  done      the work succeeded: deliveries are acked as duplicates until expiry
`

func (c *cli) inspect(ctx context.Context, args []string) int {
	fs, cm := c.flags("inspect", "KEY…", inspectHelp, 10*time.Second)
	asJSON := fs.Bool("json", false, "print one JSON object per key, one per line, for scripts")
	if code, done := parse(fs, args); done {
		return code
	}
	return c.withKeys(ctx, cm, fs.Args(), func(ctx context.Context, x store.Inspector, keys []string) error {
		for i, key := range keys {
			r, ok, err := x.Inspect(ctx, key)
			if err != nil {
				return err
			}
			if *asJSON {
				if err := json.NewEncoder(c.stdout).Encode(toJSON(key, r, ok)); err != nil {
					return err
				}
				continue
			}
			if i > 0 {
				fmt.Fprintln(c.stdout)
			}
			writeRecord(c.stdout, key, r, ok)
		}
		return nil
	})
}

// status says in one word what the next delivery of r's message meets; ok
// is false when there is no live record.
func status(r store.Record, ok bool) string {
	switch {
	case !ok:
		return "absent"
	case r.State == store.Done:
		return "done"
	case r.Released():
		return "released"
	case r.Lapsed():
		return "lapsed"
	}
	return "held"
}

// meaning explains each status on one line.
var meaning = map[string]string{
	"absent":   "no live record (never claimed, or expired): the next delivery runs the work",
	"held":     "a holder is working: deliveries get 503 (nack) until its lease ends",
	"lapsed":   "the lease ended without a release: the holder crashed or is still working past it; the next delivery takes the key over",
	"released": "the claim was given up (Release or forget): the next delivery runs the work",
	"done":     "the work succeeded: deliveries are acked as duplicates until the record expires",
}

// writeRecord prints r for people, its instants in UTC and relative to
// the store's clock at the read.
func writeRecord(w io.Writer, key string, r store.Record, ok bool) {
	st := status(r, ok)
	fmt.Fprintf(w, "key:        %q\n", key)
	fmt.Fprintf(w, "status:     %s: %s\n", st, meaning[st])
	if !ok {
		return
	}
	fmt.Fprintf(w, "state:      %v\n", r.State)
	fmt.Fprintf(w, "fence:      %d\n", r.Fence)
	if r.Token != "" {
		fmt.Fprintf(w, "token:      %s\n", r.Token)
	}
	fmt.Fprintf(w, "lease:      %s\n", when(r.LeaseUntil, r.ReadAt))
	if !r.CompletedAt.IsZero() {
		fmt.Fprintf(w, "completed:  %s\n", when(r.CompletedAt, r.ReadAt))
	}
	fmt.Fprintf(w, "expires:    %s\n", when(r.ExpiresAt, r.ReadAt))
	if len(r.Fingerprint) > 0 {
		fmt.Fprintf(w, "payload:    %x (fingerprint; a delivery of this key with another is a conflict)\n", r.Fingerprint)
	}
	fmt.Fprintf(w, "read at:    %s (the store's clock)\n", stamp(r.ReadAt))
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
type jsonRecord struct {
	Key         string     `json:"key"`
	Found       bool       `json:"found"`
	Status      string     `json:"status"`
	State       string     `json:"state,omitempty"`
	Fence       int64      `json:"fence,omitempty"`
	Token       string     `json:"token,omitempty"`
	LeaseUntil  *time.Time `json:"leaseUntil,omitempty"`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	ReadAt      *time.Time `json:"readAt,omitempty"`
	Fingerprint string     `json:"fingerprint,omitempty"` // hex
}

func toJSON(key string, r store.Record, ok bool) jsonRecord {
	j := jsonRecord{Key: key, Found: ok, Status: status(r, ok)}
	if !ok {
		return j
	}
	j.State, j.Fence, j.Token, j.Fingerprint = r.State.String(), r.Fence, r.Token, hex.EncodeToString(r.Fingerprint)
	j.LeaseUntil, j.ExpiresAt, j.CompletedAt, j.ReadAt = utc(r.LeaseUntil), utc(r.ExpiresAt), utc(r.CompletedAt), utc(r.ReadAt)
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
