package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemgate/idemgate/store"
)

const forgetHelp = `Forget frees each KEY at once, whatever its state, so that the next
delivery of its message runs the work again. It breaks the guarantee for
those keys on purpose. The record is not deleted: it becomes a released
claim one fence higher, so a holder still at work is fenced out (its
completion is refused) and fences never restart.

Forget shows the records first and asks for confirmation on stdin, unless
-yes is given. Keys without a live record have nothing to forget.
`

func (c *cli) forget(outer context.Context, args []string) int {
	fs, cm := c.flags("forget", "KEY…", forgetHelp, time.Minute)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	if code, done := parse(fs, args); done {
		return code
	}
	return c.withKeys(outer, cm, fs.Args(), func(ctx context.Context, x store.Inspector, keys []string) error {
		// 1. Show what would be forgotten.
		var live []string
		for _, key := range keys {
			r, ok, err := x.Inspect(ctx, key)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(c.stdout, "%q: nothing to forget (no live record)\n", key)
				continue
			}
			fmt.Fprintf(c.stdout, "%q: %s, %s, fence %d\n", key, r.State, status(r, ok), r.Fence)
			live = append(live, key)
		}
		if len(live) == 0 {
			return nil
		}
		// 2. Confirm. The question waits for as long as the operator
		// needs: -timeout bounds the store's work, before and after.
		if !*yes {
			fmt.Fprintf(c.stdout, "Forget %d record(s)? The next delivery of each runs its work again. [y/N] ", len(live))
			line, err := c.readLine(outer)
			if err != nil {
				return err
			}
			if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
				fmt.Fprintln(c.stdout)
				return errNotConfirmed
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(outer, cm.timeout)
			defer cancel()
		}
		// 3. Forget, each in one atomic step of the store.
		for _, key := range live {
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
		return nil
	})
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
		return "", fmt.Errorf("interrupted; nothing forgotten: %w", ctx.Err())
	}
}

// errNotConfirmed ends a forget that was not confirmed.
var errNotConfirmed = errors.New("not confirmed; nothing forgotten (-yes skips the question)")
