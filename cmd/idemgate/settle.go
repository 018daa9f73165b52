package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

const settleHelp = `Settle records each KEY as done, for an operator who checked the sink
and found the work there: a holder crashed after the effect and before its
completion (a lapsed claim), or the effect was made by hand. The key's
redeliveries and replays are then acknowledged as duplicates until the
record expires. To have the work run again instead, use forget.

Settle takes the key over as a delivery would, with a fence above the
holder's, and completes it at once: a holder still at work is fenced out
(its completion is refused). It refuses a key a live holder holds now
(wait until its lease ends, or forget it) and a FAILED one (forget it
first); a DONE key is left as it is. The record names the settling as its
origin (settle/HOST), which inspect shows. It asks for confirmation on
stdin, unless -yes is given, and exits 1 when a KEY was not settled.
`

// settleLease is the lease of settle's own claim, completed at once.
const settleLease = 30 * time.Second

func (c *cli) settle(outer context.Context, args []string) int {
	fs, cm := c.flags("settle", "KEY…", settleHelp, time.Minute)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	keys, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	return c.withKeys(outer, cm, keys, func(ctx context.Context, o *storeurl.Opened, x store.Inspector, keys []string) error {
		fmt.Fprintf(c.stdout, "store: %s\n", o.Where())
		if !*yes {
			if err := c.confirm(outer, fmt.Sprintf("Record %d key(s) as done? Their redeliveries will be acknowledged without running the work.", len(keys))); err != nil {
				return err
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(outer, cm.timeout)
			defer cancel()
		}
		host, _ := os.Hostname()
		opts := store.ClaimOptions{Origin: store.MakeOrigin("settle", host)}
		n := 0
		for _, key := range keys {
			ok, err := settleKey(ctx, o.Store, key, opts)
			if err != nil {
				return fmt.Errorf("settling %q: %w (%d of %d settled before it)", key, err, n, len(keys))
			}
			fmt.Fprintf(c.stdout, "%q: %s\n", key, ok)
			if strings.HasPrefix(ok, "settled") {
				n++
			}
		}
		if n < len(keys) {
			return fmt.Errorf("%d of %d keys not settled", len(keys)-n, len(keys))
		}
		return nil
	})
}

// settleKey claims key in st and completes the claim, and says what
// became of it.
func settleKey(ctx context.Context, st store.Store, key string, opts store.ClaimOptions) (string, error) {
	c, err := st.Claim(ctx, key, settleLease, opts)
	if err != nil {
		return "", err
	}
	switch c.Status {
	case store.Won:
	case store.AlreadyDone:
		return "already done; unchanged", nil
	case store.AlreadyFailed:
		return "not settled: FAILED (forget it first, or retry it to run the work again)", nil
	default:
		return fmt.Sprintf("not settled: a holder is working on it now (lease until %s): wait until it lapses, or forget it",
			c.LeaseUntil.UTC().Format(time.RFC3339)), nil
	}
	ok, err := st.Complete(ctx, c)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "not settled: taken over while it was settled; inspect it", nil
	}
	return fmt.Sprintf("settled: done at fence %d; its redeliveries are acknowledged", c.Fence), nil
}
