package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/storeurl"
)

const forgetHelp = `Forget frees each KEY at once, whatever its state, so that the next
delivery of its message runs the work again. It breaks the guarantee for
those keys on purpose. The record is not deleted: it becomes a released
claim one fence higher, so a holder still at work is fenced out (its
completion is refused) and fences never restart.

Forget shows the records first, warns about those a holder is working on
now, and asks for confirmation on stdin, unless -yes is given. A KEY
without a live record has nothing to forget, and makes forget exit 1
once it has forgotten the others. It then forgets only the
records it showed: a record whose state or fence changed since (a holder
took it, completed it, or released it) is left alone and reported, unless
-force is given. That check and the forget are two steps of the store: a
claim won between them is fenced out like any other holder.
`

func (c *cli) forget(outer context.Context, args []string) int {
	fs, cm := c.flags("forget", "KEY…", forgetHelp, time.Minute)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	force := fs.Bool("force", false, "forget a record even if it changed since it was shown")
	keys, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	return c.withKeys(outer, cm, keys, func(ctx context.Context, o *storeurl.Opened, x store.Inspector, keys []string) error {
		fmt.Fprintf(c.stdout, "store: %s\n", o.Where())
		// 1. Show what would be forgotten.
		var live []string
		shown := map[string]store.Record{}
		for _, key := range keys {
			r, ok, err := x.Inspect(ctx, key)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(c.stdout, "%q: nothing to forget (no live record; inspect lists records whose key ends with it)\n", key)
				continue
			}
			st := status(r, ok)
			fmt.Fprintf(c.stdout, "%q: %s, %s, fence %d\n", key, r.State, st, r.Fence)
			if st == "held" {
				fmt.Fprintf(c.stdout, "  WARNING: a holder is working on it now (lease until %s): forgetting it lets the next delivery run the work beside it, and the holder's completion will be refused\n",
					r.LeaseUntil.UTC().Format(time.RFC3339))
			}
			live = append(live, key)
			shown[key] = r
		}
		// A KEY without a live record is not a success (exit 1), after
		// the others are forgotten.
		var absent error
		if n := len(keys) - len(live); n > 0 {
			absent = fmt.Errorf("%d of %d keys had no live record: nothing forgotten for them", n, len(keys))
		}
		if len(live) == 0 {
			return absent
		}
		// 2. Confirm. The question waits for as long as the operator
		// needs: -timeout bounds the store's work, before and after.
		if !*yes {
			if err := c.confirm(outer, fmt.Sprintf("Forget %d record(s)? The next delivery of each runs its work again.", len(live))); err != nil {
				return err
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(outer, cm.timeout)
			defer cancel()
		}
		// 3. Forget, each in one atomic step of the store.
		for _, key := range live {
			if !*force {
				r, ok, err := x.Inspect(ctx, key)
				if err != nil {
					return err
				}
				if was := shown[key]; !ok || r.State != was.State || r.Fence != was.Fence || r.Token != was.Token {
					fmt.Fprintf(c.stdout, "%q: not forgotten: it changed since it was shown (now %s, %s, fence %d); look again, or use -force\n", key, r.State, status(r, ok), r.Fence)
					continue
				}
			}
			ok, err := x.Forget(ctx, key)
			if err != nil {
				return err
			}
			if ok {
				fmt.Fprintf(c.stdout, "%q: forgotten: the next delivery runs the work\n", key)
			} else {
				fmt.Fprintf(c.stdout, "%q: nothing to forget any more (the record expired meanwhile)\n", key)
			}
		}
		return absent
	})
}

// confirm asks question, with [y/N], and returns errNotConfirmed unless
// the answer read from stdin is yes. The question waits on outer for as
// long as the operator needs: -timeout bounds the store's work, before and
// after.
func (c *cli) confirm(outer context.Context, question string) error {
	fmt.Fprint(c.stdout, question+" [y/N] ")
	line, err := c.readLine(outer)
	if err != nil {
		return err
	}
	// A terminal echoes the answer and its newline; a pipe or an end of
	// input does not: end the question's line.
	if !c.terminal || !strings.HasSuffix(line, "\n") {
		fmt.Fprintln(c.stdout)
	}
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return errNotConfirmed
	}
	return nil
}

// readLine reads a line of the operator's answer, or returns when ctx
// ends (an interrupt): then the read is left behind, and the process exits.
// EOF or a failed read is an empty answer.
func (c *cli) readLine(ctx context.Context) (string, error) {
	line := make(chan string, 1)
	go func() {
		s, _ := c.stdin.ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		return s, nil
	case <-ctx.Done():
		fmt.Fprintln(c.stdout)
		return "", fmt.Errorf("interrupted; nothing changed: %w", ctx.Err())
	}
}

// errNotConfirmed ends a forget or a settle that was not confirmed.
var errNotConfirmed = errors.New("not confirmed; nothing changed (-yes skips the question)")
