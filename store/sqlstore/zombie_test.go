package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// The zombie proof. Holders stall past their 100ms lease (no renewal), the
// other deliveries of their message take the key over, and the stalled
// holders wake up and write anyway. The sink is a ledger table with no
// unique constraint, so nothing but the store can keep a message to one
// row.
//
//   - Transactional (mode A): the body writes its ledger row in the
//     transaction in which it calls CompleteTx first. A zombie's
//     transaction fails its fence check and rolls back: exactly one row
//     per message.
//   - Plain (mode B): the body writes its row on its own, and Lock
//     completes afterwards. Zombies' rows stay: duplicates, which shows
//     that the test can fail.
const (
	zombieMessages   = 500
	zombieDeliveries = 4  // concurrent deliveries of each message
	zombieWorkers    = 16 // messages in flight: 64 goroutines
	zombieLease      = 100 * time.Millisecond
	zombieTries      = 1000 // deliveries of one copy before the test gives up
)

func TestCompleteTxFencesOutZombies(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("stall seed %d", seed)
	db := postgresBackend.open(t, 24)

	transactional := runZombies(t, db, seed, true)
	plain := runZombies(t, db, seed, false)
	t.Logf("transactional: %d ledger rows for %d messages, %d zombie deliveries fenced out, %d ERROR lines",
		transactional.rows, zombieMessages, transactional.fenced, transactional.errorLines)
	t.Logf("plain:         %d ledger rows for %d messages, %d duplicates, %d ERROR lines (work done after a takeover)",
		plain.rows, zombieMessages, plain.rows-zombieMessages, plain.errorLines)

	if transactional.fenced == 0 {
		t.Error("transactional: no delivery was fenced out; the test staged no zombie")
	}
	if transactional.rows != zombieMessages {
		t.Errorf("transactional: %d ledger rows, want exactly one per message (%d)", transactional.rows, zombieMessages)
	}
	for msg, n := range transactional.perMessage {
		if n != 1 {
			t.Errorf("transactional: message %d has %d ledger rows, want 1", msg, n)
		}
	}
	if len(transactional.perMessage) != zombieMessages {
		t.Errorf("transactional: %d messages in the ledger, want %d", len(transactional.perMessage), zombieMessages)
	}
	if transactional.errorLines != 0 {
		t.Errorf("transactional: the gateway logged %d ERROR lines, want none: a body that completed in its transaction must leave Lock's own Complete answering true\n%s",
			transactional.errorLines, transactional.errors)
	}
	if plain.rows <= zombieMessages {
		t.Errorf("plain: %d ledger rows for %d messages, want duplicates: the zombies the transactional mode fences out must write here, or the test proves nothing", plain.rows, zombieMessages)
	}
}

// zombieRun is what one mode left behind.
type zombieRun struct {
	rows       int
	perMessage map[int]int // ledger rows per message
	fenced     int64       // deliveries whose body failed with ErrFenced
	errorLines int
	errors     logtest.Records
}

// runZombies delivers every message zombieDeliveries times at once, each
// delivery retrying while the key is held, as Pub/Sub's redelivery would.
func runZombies(t *testing.T, db *sql.DB, seed uint64, transactional bool) zombieRun {
	t.Helper()
	ctx := testenv.Context(t)
	s := newStore(t, db, sqlstore.PostgreSQL, nil)
	ledger := uniqueTable()
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+ledger+` (msg int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(testenv.Context(t), "DROP TABLE IF EXISTS "+ledger) })
	insert := `INSERT INTO ` + ledger + ` (msg) VALUES ($1)`

	logs := &logtest.Sink{}
	g, err := gateway.New(s, &gateway.Options{NoRenew: true, Lease: zombieLease, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex // guards rng
		rng    = rand.New(rand.NewPCG(seed, 0))
		fenced atomic.Int64 // bodies whose transaction was fenced out
	)
	// stall pauses a third of the bodies past their lease.
	stall := func() {
		mu.Lock()
		d := time.Duration(0)
		if rng.IntN(3) == 0 {
			d = 150*time.Millisecond + time.Duration(rng.Int64N(int64(101*time.Millisecond)))
		}
		mu.Unlock()
		time.Sleep(d) // the slow work itself, not a synchronisation
	}
	body := func(msg int) func(ctx context.Context) error {
		if !transactional {
			return func(ctx context.Context) error {
				stall()
				_, err := db.ExecContext(ctx, insert, msg)
				return err
			}
		}
		return func(ctx context.Context) error {
			stall()
			c, _ := gateway.ClaimFromContext(ctx)
			err := insertCompleted(ctx, db, s, c, insert, msg)
			if errors.Is(err, store.ErrFenced) {
				fenced.Add(1) // Lock acks it when the new holder owns the work, and retries it otherwise
			}
			return err
		}
	}

	var (
		run  zombieRun
		next atomic.Int64
		wg   sync.WaitGroup
	)
	// deliver is Pub/Sub's redelivery: every answer but an ack (nil, a
	// duplicate) comes back after a backoff, until it is acked.
	deliver := func(msg int) error {
		key := "msg-" + strconv.Itoa(msg)
		var err error
		for range zombieTries {
			err = g.Lock(ctx, key, body(msg))
			if err == nil || errors.Is(err, gateway.ErrDuplicate) {
				return nil
			}
			time.Sleep(5*time.Millisecond + rand.N(10*time.Millisecond)) // redelivery backoff
		}
		return fmt.Errorf("not acked after %d deliveries: %w", zombieTries, err)
	}
	for range zombieWorkers {
		wg.Go(func() {
			for msg := int(next.Add(1)); msg <= zombieMessages && !t.Failed(); msg = int(next.Add(1)) {
				var copies sync.WaitGroup
				for range zombieDeliveries {
					copies.Go(func() {
						if err := deliver(msg); err != nil {
							t.Errorf("message %d: Lock = %v", msg, err)
						}
					})
				}
				copies.Wait()
			}
		})
	}
	wg.Wait()

	run.fenced = fenced.Load()
	run.perMessage = map[int]int{}
	rows, err := db.QueryContext(ctx, `SELECT msg, count(*) FROM `+ledger+` GROUP BY msg`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var msg, n int
		if err := rows.Scan(&msg, &n); err != nil {
			t.Fatal(err)
		}
		run.perMessage[msg] = n
		run.rows += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	run.errors = logs.Records().Level(slog.LevelError)
	run.errorLines = len(run.errors)
	return run
}
