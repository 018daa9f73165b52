package sqlstore_test

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// obEnv is a store with an outbox on one backend, driven the way a relay
// drives it.
type obEnv struct {
	db *sql.DB
	st *sqlstore.Store
	ob *sqlstore.Outbox
}

// newObEnv returns an outbox on a fresh table of b.
func newObEnv(t testing.TB, b backend) *obEnv {
	t.Helper()
	conns := 4
	if b.dialect == sqlstore.SQLite {
		conns = 1
	}
	db := b.open(t, conns)
	st := outboxStore(t, db, b.dialect)
	return &obEnv{db: db, st: st, ob: st.Outbox()}
}

// enqueue commits msgs with the completion of a fresh claim.
func (e *obEnv) enqueue(t testing.TB, msgs ...outbox.Message) {
	t.Helper()
	ctx := t.Context()
	c, err := e.st.Claim(ctx, "k-"+uniqueTable(), time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := e.st.CompleteTx(ctx, tx, c, msgs...); err != nil {
		t.Fatalf("CompleteTx: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// take takes up to n messages for an hour.
func (e *obEnv) take(t testing.TB, n int) []outbox.Pending {
	t.Helper()
	got, err := e.ob.Take(t.Context(), n, time.Hour)
	if err != nil {
		t.Fatalf("Take(%d): %v", n, err)
	}
	return got
}

// settle settles a Take.
func (e *obEnv) settle(t testing.TB, sent []outbox.Pending, failed ...outbox.Failure) {
	t.Helper()
	if err := e.ob.Settle(t.Context(), sent, failed); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

// backlog fails t unless the backlog is want.
func (e *obEnv) backlog(t testing.TB, want int64, rule string) {
	t.Helper()
	n, err := e.ob.Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("%s: Backlog = %d, want %d", rule, n, want)
	}
}

// data lists the payloads of ps, as strings.
func data(ps []outbox.Pending) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.Data)
	}
	return out
}

// msg is a message of topic "orders" with payload d and ordering key k.
func msg(d, k string) outbox.Message {
	return outbox.Message{Topic: "orders", Data: []byte(d), OrderingKey: k}
}

// A window's worth of messages waiting behind a blocked message of their
// key must not hide a free message after them: Take(n) returns the free
// one (S2). Before the fix, PostgreSQL and MySQL/MariaDB chose n rows and
// only then dropped those behind the held one, and returned nothing.
func TestOutboxTakeSkipsRowsBehindBlocked(t *testing.T) {
	const batch = 5
	blocks := []struct {
		name  string
		block func(t testing.TB, e *obEnv, head outbox.Pending)
	}{
		{"Held", func(t testing.TB, e *obEnv, head outbox.Pending) {}},
		{"BackingOff", func(t testing.TB, e *obEnv, head outbox.Pending) {
			e.settle(t, nil, outbox.Failure{Pending: head, Reason: "unavailable", After: time.Hour})
		}},
		{"DeadHolding", func(t testing.TB, e *obEnv, head outbox.Pending) {
			e.settle(t, nil, outbox.Failure{Pending: head, Reason: "not found", Dead: true})
		}},
	}
	for _, b := range backends {
		for _, bl := range blocks {
			t.Run(b.name+"/"+bl.name, func(t *testing.T) {
				t.Parallel()
				e := newObEnv(t, b)
				e.enqueue(t, msg("head", "K"))
				head := e.take(t, 1)
				if len(head) != 1 {
					t.Fatalf("Take(1) = %q, want the head", data(head))
				}
				bl.block(t, e, head[0])
				var behind []outbox.Message
				for range batch {
					behind = append(behind, msg("behind", "K"))
				}
				e.enqueue(t, behind...)
				e.enqueue(t, msg("free", "other"))
				if got := e.take(t, batch); !slices.Equal(data(got), []string{"free"}) {
					t.Fatalf("Take(%d) = %q with %d messages behind a blocked one of their key and a free one after them; want [free]",
						batch, data(got), batch)
				}
				if got := e.take(t, batch); len(got) != 0 {
					t.Errorf("Take(%d) = %q; want nothing: every message left waits behind the blocked one", batch, data(got))
				}
			})
		}
	}
}

// Two spellings of a topic are one order (outbox.OrderKey): the message
// on "projects/P/topics/orders" waits behind the held one on "orders" of
// its key.
func TestOutboxOrderKeyOnTopicID(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newObEnv(t, b)
			e.enqueue(t,
				outbox.Message{Topic: "orders", Data: []byte("short"), OrderingKey: "k"},
				outbox.Message{Topic: "projects/p-1/topics/orders", Data: []byte("long"), OrderingKey: "k"})
			first := e.take(t, 1)
			if !slices.Equal(data(first), []string{"short"}) {
				t.Fatalf("Take(1) = %q, want [short]", data(first))
			}
			if got := e.take(t, 10); len(got) != 0 {
				t.Fatalf("Take = %q while the message before it on its topic ID and key is held; want nothing (one order for both spellings)", data(got))
			}
			e.settle(t, first)
			if got := e.take(t, 10); !slices.Equal(data(got), []string{"long"}) {
				t.Errorf("Take after the first was sent = %q, want [long]", data(got))
			}
		})
	}
}

// A Settle that the database rolls back with a transient error, and that
// runs again, still deletes the sent messages: each attempt starts from
// the whole list. A trigger on PostgreSQL fails the first give-back with
// a serialization failure (a sequence, which no rollback undoes, counts
// the tries).
func TestOutboxSettleRetryDeletesSent(t *testing.T) {
	ctx := t.Context()
	e := newObEnv(t, postgresBackend)
	e.enqueue(t, msg("sent", ""), msg("failed", ""))
	got := e.take(t, 10)
	if len(got) != 2 {
		t.Fatalf("Take = %q", data(got))
	}
	ob := sqlstore.OutboxTable(e.st)
	fn := strings.ReplaceAll(ob, ".", "_") + "_fail_once"
	for _, ddl := range []string{
		`CREATE SEQUENCE ` + fn,
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('` + fn + `') = 1 THEN
				RAISE EXCEPTION 'test: fail the first give-back' USING ERRCODE = '40001';
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER ` + fn + ` BEFORE UPDATE ON ` + ob + ` FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
	} {
		if _, err := e.db.ExecContext(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		e.db.ExecContext(context.Background(), `DROP FUNCTION IF EXISTS `+fn+`() CASCADE`)
		e.db.ExecContext(context.Background(), `DROP SEQUENCE IF EXISTS `+fn)
	})
	e.settle(t, got[:1], outbox.Failure{Pending: got[1]})
	var tries int64
	if err := e.db.QueryRowContext(ctx, `SELECT last_value FROM `+fn).Scan(&tries); err != nil || tries != 2 {
		t.Fatalf("the give-back ran %d times (%v); want 2: the test's trigger did not fail the first Settle", tries, err)
	}
	e.backlog(t, 1, "a Settle retried after a transient error must delete the sent message")
	if left := e.take(t, 10); !slices.Equal(data(left), []string{"failed"}) {
		t.Errorf("Take after the retried Settle = %q; want [failed]", data(left))
	}
}

// BenchmarkOutboxTakeBehindHeld measures a Take(100) that must pass over
// 10,000 messages waiting behind a held message of their key to reach
// the one free message after them (which it gives back at once): the cost
// of choosing in the statement, on every dialect.
func BenchmarkOutboxTakeBehindHeld(b *testing.B) {
	const behind = 10000
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			e := newObEnv(b, be)
			e.enqueue(b, msg("head", "K"))
			if head := e.take(b, 1); len(head) != 1 {
				b.Fatalf("Take(1) = %q", data(head))
			}
			for range behind / 500 {
				var ms []outbox.Message
				for range 500 {
					ms = append(ms, msg("behind", "K"))
				}
				e.enqueue(b, ms...)
			}
			e.enqueue(b, msg("free", ""))
			b.ResetTimer()
			for b.Loop() {
				got := e.take(b, 100)
				if !slices.Equal(data(got), []string{"free"}) {
					b.Fatalf("Take(100) = %d messages, want [free]", len(got))
				}
				e.settle(b, nil, outbox.Failure{Pending: got[0]})
			}
		})
	}
}

// TestOutboxSettleMatchesPairs: Settle deletes a message only when its ID
// and its child key match as a pair, whatever bytes a child key holds
// (PostgreSQL passes them as array literals, which quotes, braces, commas
// and backslashes could split or shift).
func TestOutboxSettleMatchesPairs(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			e := newObEnv(t, b)
			e.enqueue(t, msg("a", ""), msg("b", ""))
			got := e.take(t, 10)
			if len(got) != 2 {
				t.Fatalf("took %d, want 2", len(got))
			}
			swapped := slices.Clone(got)
			swapped[0].ChildKey, swapped[1].ChildKey = got[1].ChildKey, got[0].ChildKey
			odd := slices.Clone(got)
			odd[0].ChildKey = `x","` + got[1].ChildKey + `\`
			odd[1].ChildKey = got[1].ChildKey + `"}`
			for _, bad := range [][]outbox.Pending{swapped, odd} {
				e.settle(t, bad)
				e.backlog(t, 2, "a Settle whose child keys do not match the IDs deletes nothing")
			}
			e.settle(t, got)
			e.backlog(t, 0, "both sent")
		})
	}
}
