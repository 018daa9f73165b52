package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

const retryHelp = `Retry makes FAILED records claimable again, for an operator who fixed what
made their work fail: each becomes a released claim one fence higher, its
failed attempts, reason and first failure cleared, so that the next
delivery of its message (a redelivery, a seek or a republish) runs the
work with a fresh budget of attempts. Retry delivers nothing itself.

Give the KEYs, or select the records as idemgate failed does: -reason R
retries the FAILED records whose reason starts with R, -prefix and
-older narrow the selection (-reason '' selects every reason).
-dry-run shows what would be retried and changes nothing.

Each key is reported "retried", or "not FAILED any more; unchanged" when
its record was not FAILED when retry reached it (retried, forgotten or
expired meanwhile, or never FAILED): retry changes no other record, and
exits 1 when a KEY given was not retried. A record selected by -reason
that failed again, for another reason, between the listing and its retry
is retried all the same.
`

func (c *cli) retry(ctx context.Context, args []string) int {
	fs, cm := c.flags("retry", "KEY… | -reason R", retryHelp, time.Minute)
	var sel selection
	sel.define(fs)
	dryRun := fs.Bool("dry-run", false, "show what would be retried; change nothing")
	keys, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	selecting := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "reason", "prefix", "older":
			selecting = true
		}
	})
	err := sel.check()
	switch {
	case err != nil:
	case selecting && len(keys) > 0:
		err = fmt.Errorf("%w: give KEYs or -reason, -prefix and -older, not both", errUsage)
	case !selecting:
		err = checkKeys(keys)
		if len(keys) == 0 {
			err = fmt.Errorf("%w: no KEY given: give KEYs, or -reason R to retry the FAILED records whose reason starts with R", errUsage)
		}
	}
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	return c.withStore(ctx, cm, func(ctx context.Context, o *storeurl.Opened) error {
		return c.retryOn(ctx, o, retrying{keys: keys, sel: sel, selecting: selecting, dryRun: *dryRun})
	})
}

// retrying is what retry was asked to retry: keys, or the FAILED records
// sel selects.
type retrying struct {
	keys      []string
	sel       selection
	selecting bool // sel chooses the records, not keys
	dryRun    bool // show what would be retried; change nothing
}

// retryOn runs retry on o's store.
func (c *cli) retryOn(ctx context.Context, o *storeurl.Opened, how retrying) error {
	keys, sel := how.keys, how.sel
	f, ok := o.Store.(store.Failer)
	if !ok {
		return fmt.Errorf("the %s store cannot retry FAILED records: it does not implement store.Failer", o.Name)
	}
	fmt.Fprintf(c.stdout, "store:    %s\n", o.Where())
	var failed []store.Record // the records to retry, when selected
	if how.selecting {
		x, err := lister(o)
		if err != nil {
			return err
		}
		if failed, err = failedRecords(ctx, x, sel); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "selected: %s: %s\n", sel, plural(len(failed), "record"))
		for _, r := range failed {
			keys = append(keys, r.Key)
		}
	} else if how.dryRun {
		x, err := inspector(o)
		if err != nil {
			return err
		}
		for _, key := range keys {
			r, ok, err := x.Inspect(ctx, key)
			if err != nil {
				return err
			}
			if !ok || r.State != store.Failed {
				fmt.Fprintf(c.stdout, "%q: not FAILED (%s); would be unchanged\n", key, status(r, ok))
				continue
			}
			failed = append(failed, r)
		}
	}
	if how.dryRun {
		for _, r := range failed {
			fmt.Fprintf(c.stdout, "%q: FAILED after %s, reason %q: would be retried\n", r.Key, plural(r.Attempts, "attempt"), r.Reason)
		}
		fmt.Fprintf(c.stdout, "dry run: %s would be retried; nothing changed.\n", plural(len(failed), "record"))
		return nil
	}
	n, err := c.retryKeys(ctx, f, keys)
	if err == nil && !how.selecting && n < len(keys) {
		err = fmt.Errorf("%d of %d keys not retried: not FAILED (inspect KEY shows what they are)", len(keys)-n, len(keys))
	}
	return err
}

// retryKeys retries each of keys in f, saying what became of it, and
// returns how many it retried. It stops at the first error.
func (c *cli) retryKeys(ctx context.Context, f store.Failer, keys []string) (int, error) {
	n := 0
	for _, key := range keys {
		ok, err := f.Retry(ctx, key)
		if err != nil {
			return n, fmt.Errorf("retrying %q: %w (%d of %d retried before it)", key, err, n, len(keys))
		}
		if ok {
			n++
			fmt.Fprintf(c.stdout, "%q: retried: the next delivery runs the work\n", key)
		} else {
			fmt.Fprintf(c.stdout, "%q: not FAILED any more; unchanged\n", key)
		}
	}
	fmt.Fprintf(c.stdout, "retried %d of %d.\n", n, len(keys))
	return n, nil
}
