package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// deadList is a relay.DeadLetters over a fixed list, for the command's
// output; the stores' own are tested by relaytest.
type deadList struct {
	dead    []outbox.DeadMessage
	revived []string
}

func (d *deadList) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	return d.dead[:min(n, len(d.dead))], nil
}

func (d *deadList) Revive(ctx context.Context, ids ...string) (int, error) {
	n := 0
	for _, m := range d.dead {
		if slices.Contains(ids, m.ID) {
			d.revived = append(d.revived, m.ID)
			n++
		}
	}
	return n, nil
}

func twoDead() *deadList {
	died := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	msg := func(id, topic, orderingKey string) outbox.Pending {
		return outbox.Pending{Message: outbox.Message{Topic: topic, OrderingKey: orderingKey}, ID: id,
			ChildKey: outbox.ChildKey("order-"+id, "0"), Attempts: 10, Waited: time.Hour}
	}
	return &deadList{dead: []outbox.DeadMessage{
		{Pending: msg("7", "shipments", "customer-42"), Reason: "rpc error: code = NotFound desc = topic", Died: died, Holds: true},
		{Pending: msg("9", "projects/p/topics/audit", ""), Reason: "rpc error: code = PermissionDenied\ndesc = no", Died: died.Add(time.Minute)},
	}}
}

// relay -dead lists each dead message with its topic, child key,
// attempts, death, hold and reason, the ordering key only when asked
// (it may name a customer).
func TestListDead(t *testing.T) {
	for _, orderingKeys := range []bool{false, true} {
		var out bytes.Buffer
		c := &cli{stdout: &out}
		if err := c.listDead(t.Context(), twoDead(), "table t of sqlite:///x.db", deadListing{n: 10, orderingKeys: orderingKeys}); err != nil {
			t.Fatal(err)
		}
		got := out.String()
		for _, want := range []string{
			"store:      table t of sqlite:///x.db\n", "dead:       2, oldest first\n",
			"id:         7\n", "topic:      shipments\n", "child key:  " + outbox.ChildKey("order-7", "0") + "\n",
			"attempts:   10\n", "died:       2026-12-03T10:00:00.000Z", "holds:      yes", "reason:     rpc error: code = NotFound",
			"holds:      no (no ordering key)", "reason:     rpc error: code = PermissionDenied; desc = no\n",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("relay -dead (ordering keys %v) printed\n%s\nwithout %q", orderingKeys, got, want)
			}
		}
		if strings.Contains(got, "customer-42") != orderingKeys {
			t.Errorf("relay -dead (ordering keys %v) printed\n%s\nthe ordering key must show with -ordering-keys only", orderingKeys, got)
		}

		out.Reset()
		if err := c.listDead(t.Context(), twoDead(), "w", deadListing{n: 1, json: true, orderingKeys: orderingKeys}); err != nil {
			t.Fatal(err)
		}
		var j jsonDead
		if err := json.Unmarshal(out.Bytes(), &j); err != nil {
			t.Fatalf("relay -dead -json printed %q: %v", out.String(), err)
		}
		want := jsonDead{ID: "7", Topic: "shipments", ChildKey: outbox.ChildKey("order-7", "0"), Attempts: 10, WaitedSeconds: 3600,
			Holds: true, Reason: "rpc error: code = NotFound desc = topic", HasOrderingKey: true, Store: "w"}
		if orderingKeys {
			want.OrderingKey = "customer-42"
		}
		j.Died = nil
		if j != want {
			t.Errorf("relay -dead -json -n 1 = %+v, want %+v", j, want)
		}
	}
}

// relay -revive revives the IDs given, and fails when one names no dead
// message.
func TestReviveDead(t *testing.T) {
	var out bytes.Buffer
	c := &cli{stdout: &out}
	d := twoDead()
	if err := c.reviveDead(t.Context(), d, "w", []string{"7", "9"}); err != nil || !strings.Contains(out.String(), "revived:    2 of 2") {
		t.Errorf("revive 7,9 = %v, printed %q; want both revived", err, out.String())
	}
	if err := c.reviveDead(t.Context(), d, "w", []string{"7", "8"}); err == nil || !strings.Contains(err.Error(), "1 of the 2 IDs name no dead message") {
		t.Errorf("revive 7,8 = %v; want an error naming the ID that is not dead", err)
	}
}

func TestRelayDeadUsage(t *testing.T) {
	url := enqueueSQLite(t, outbox.Message{Topic: "shipments", Data: []byte("x")})
	for _, args := range [][]string{
		{"-dead", "-revive", "1"},
		{"-revive", " , "},
		{"-dead", "extra"},
		{"-dead", "-n", "0"},
		{"-revive", "1,abc"}, // a SQL outbox's IDs are numbers
	} {
		r := idemgate(t, "", append([]string{"relay", "-store", url}, args...)...)
		if r.code != exitUsage {
			t.Errorf("relay %q = %d, %q; want a usage error", args, r.code, r.stderr)
		}
	}
}

// relay -dead and -revive on a SQL store: they read its outbox when it
// keeps dead messages, else say that it does not.
func TestRelayDeadOnSQLite(t *testing.T) {
	url := enqueueSQLite(t, outbox.Message{Topic: "shipments", Data: []byte("x")})
	_, keeps := any((*sqlstore.Outbox)(nil)).(relay.DeadLetters)
	list := idemgate(t, "", "relay", "-store", url, "-dead")
	revive := idemgate(t, "", "relay", "-store", url, "-revive", "1")
	if !keeps {
		for _, r := range []result{list, revive} {
			if r.code != exitProblem {
				t.Errorf("relay -dead/-revive on a store without DeadLetters = %d, %q; want 1", r.code, r.stderr)
			}
			r.oneErrorLine(t, "does not keep dead messages")
		}
		return
	}
	if list.code != exitOK || !strings.Contains(list.stdout, "dead:       none") {
		t.Errorf("relay -dead on an outbox without dead messages = %d, %q, %q; want none listed", list.code, list.stdout, list.stderr)
	}
	if revive.code != exitProblem || !strings.Contains(revive.stdout, "revived:    0 of 1") {
		t.Errorf("relay -revive 1 with nothing dead = %d, %q, %q; want 1 and nothing revived", revive.code, revive.stdout, revive.stderr)
	}
}

// The running relay's flags reach relay.Options: a backoff range the
// relay refuses is a usage error.
func TestRelayOptionFlags(t *testing.T) {
	t.Setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:9") // never dialled: New refuses first
	url := enqueueSQLite(t, outbox.Message{Topic: "shipments", Data: []byte("x")})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-min-backoff", "1m", "-max-backoff", "1s"}, "MaxBackoff"},
		{[]string{"-stop-timeout", "-1s"}, "StopTimeout"},
	} {
		r := idemgate(t, "", append([]string{"relay", "-store", url, "-project", "p"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("relay %q = %d, %q; want a usage error naming %s", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
