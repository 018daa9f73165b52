package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// deadListing is how relay -dead lists.
type deadListing struct {
	n            int  // the most messages listed
	json         bool // one JSON object per line
	orderingKeys bool // show the ordering keys, which may name a customer
}

// deadLetters runs relay -dead (list) or relay -revive IDS on the outbox
// of cm's store, within cm's timeout.
func (c *cli) deadLetters(ctx context.Context, cm *common, rest []string, list bool, revive string, how deadListing) int {
	ctx, cancel := context.WithTimeout(ctx, cm.timeout)
	defer cancel()
	var ids []string
	for _, id := range strings.Split(revive, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	switch {
	case len(rest) > 0:
		return c.fail(ctx, cm, fmt.Errorf("%w: relay takes no arguments; give the IDs to revive as -revive ID,…", errUsage))
	case list && revive != "":
		return c.fail(ctx, cm, fmt.Errorf("%w: give -dead or -revive, not both", errUsage))
	case !list && len(ids) == 0:
		return c.fail(ctx, cm, fmt.Errorf("%w: -revive names no ID", errUsage))
	case list && how.n <= 0:
		return c.fail(ctx, cm, fmt.Errorf("%w: -n must be positive", errUsage))
	}
	st, err := c.open(ctx, cm)
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	defer st.Close()
	if _, sql := st.Store.(*sqlstore.Store); sql && !list {
		for _, id := range ids {
			if _, err := strconv.ParseInt(id, 10, 64); err != nil {
				return c.fail(ctx, cm, fmt.Errorf("%w: -revive %q: a SQL outbox's IDs are numbers (relay -dead lists them)", errUsage, id))
			}
		}
	}
	src, err := openOutbox(ctx, st)
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	dl, ok := src.(relay.DeadLetters)
	if !ok {
		return c.fail(ctx, cm, fmt.Errorf("the outbox of the %s store does not keep dead messages (it does not implement relay.DeadLetters)", st.Name))
	}
	if list {
		err = c.listDead(ctx, dl, st.Where(), how)
	} else {
		err = c.reviveDead(ctx, dl, st.Where(), ids)
	}
	if err != nil {
		return c.fail(ctx, cm, err)
	}
	return exitOK
}

// listDead prints up to how.n dead messages of dl, the outbox of where,
// oldest first.
func (c *cli) listDead(ctx context.Context, dl relay.DeadLetters, where string, how deadListing) error {
	dead, err := dl.Dead(ctx, how.n)
	if err != nil {
		return fmt.Errorf("listing the dead messages of %s: %w", where, err)
	}
	if how.json {
		enc := json.NewEncoder(c.stdout)
		for _, d := range dead {
			if err := enc.Encode(toDeadJSON(d, where, how.orderingKeys)); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(c.stdout, "store:      %s\n", where)
	switch {
	case len(dead) == 0:
		fmt.Fprintln(c.stdout, "dead:       none")
	case len(dead) == how.n:
		fmt.Fprintf(c.stdout, "dead:       the %d oldest (-n lists more)\n", len(dead))
	default:
		fmt.Fprintf(c.stdout, "dead:       %d, oldest first\n", len(dead))
	}
	for _, d := range dead {
		fmt.Fprintln(c.stdout)
		writeDead(c.stdout, d, how.orderingKeys)
	}
	return nil
}

// writeDead prints one dead message.
func writeDead(w io.Writer, d outbox.DeadMessage, orderingKeys bool) {
	fmt.Fprintf(w, "id:         %s\n", d.ID)
	fmt.Fprintf(w, "topic:      %s\n", d.Topic)
	fmt.Fprintf(w, "child key:  %s\n", d.ChildKey)
	if orderingKeys && d.OrderingKey != "" {
		fmt.Fprintf(w, "ordering:   %s\n", d.OrderingKey)
	}
	fmt.Fprintf(w, "attempts:   %d\n", d.Attempts)
	fmt.Fprintf(w, "died:       %s (the store's clock)\n", stamp(d.Died))
	fmt.Fprintf(w, "committed:  %v ago\n", d.Waited.Round(time.Second))
	switch {
	case d.OrderingKey == "":
		fmt.Fprintln(w, "holds:      no (no ordering key)")
	case d.Holds:
		fmt.Fprintln(w, "holds:      yes: the later messages of its ordering key wait until it is revived")
	default:
		fmt.Fprintln(w, "holds:      no: the later messages of its ordering key were let past it")
	}
	fmt.Fprintf(w, "reason:     %s\n", oneLine(d.Reason))
}

// jsonDead is relay -dead -json's output for one message.
type jsonDead struct {
	ID             string     `json:"id"`
	Topic          string     `json:"topic"`
	ChildKey       string     `json:"childKey"`
	OrderingKey    string     `json:"orderingKey,omitempty"` // with -ordering-keys only
	Attempts       int        `json:"attempts"`
	Died           *time.Time `json:"died,omitempty"`
	WaitedSeconds  float64    `json:"waitedSeconds"` // since its commit
	Holds          bool       `json:"holds"`         // the later messages of its ordering key wait behind it
	Reason         string     `json:"reason"`
	HasOrderingKey bool       `json:"hasOrderingKey"`
	Store          string     `json:"store"`
}

func toDeadJSON(d outbox.DeadMessage, where string, orderingKeys bool) jsonDead {
	j := jsonDead{ID: d.ID, Topic: d.Topic, ChildKey: d.ChildKey, Attempts: d.Attempts, Died: utc(d.Died),
		WaitedSeconds: d.Waited.Seconds(), Holds: d.Holds && d.OrderingKey != "", Reason: d.Reason,
		HasOrderingKey: d.OrderingKey != "", Store: where}
	if orderingKeys {
		j.OrderingKey = d.OrderingKey
	}
	return j
}

// reviveDead revives the dead messages of ids in dl, the outbox of where.
// It fails when some ID named no dead message.
func (c *cli) reviveDead(ctx context.Context, dl relay.DeadLetters, where string, ids []string) error {
	n, err := dl.Revive(ctx, ids...)
	if err != nil {
		return fmt.Errorf("reviving dead messages of %s: %w", where, err)
	}
	fmt.Fprintf(c.stdout, "store:      %s\nrevived:    %d of %d\n", where, n, len(ids))
	if n < len(ids) {
		return fmt.Errorf("%d of the %d IDs name no dead message of %s (relay -dead lists them)", len(ids)-n, len(ids), where)
	}
	return nil
}
