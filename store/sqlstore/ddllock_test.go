package sqlstore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// Bounds of CreateTable's DDL on a table in use (ddlLockTimeout,
// ddlAttempts and ddlPause in schema.go), with room for a loaded machine.
const (
	// stallBound is the longest another session's statement may wait
	// behind CreateTable's DDL: one lock timeout, and slack.
	stallBound = 2500 * time.Millisecond
	// createBound is the longest CreateTable may take on a table that
	// stays locked: five lock timeouts, the pauses between them, and slack.
	createBound = 15 * time.Second
	// buildHeld is how long another session's index build lasts in
	// TestRolloutCreateTable: longer than the pauses between CreateTable's
	// tries (3.75 s), well within the time its tries may wait (about 8.8 s).
	buildHeld = 4500 * time.Millisecond
)

// TestUpgradeDoesNotStall runs CreateTable on a table that needs DDL (the
// fingerprint, origin and failure columns, or the index on expires_at) while a transaction that
// updated one of its rows stays open, as a business transaction that
// called CompleteTx does. Meanwhile another session's Extend and Claim on
// other rows must not queue behind the DDL for longer than its lock
// timeout; and CreateTable must either finish once the transaction ends,
// or, when it outlasts CreateTable's tries, return an error that says the
// table stayed locked, within its bound: never wait unbounded.
func TestUpgradeDoesNotStall(t *testing.T) {
	for _, b := range []backend{postgresBackend, mariadbBackend} {
		for _, missing := range []string{"column", "index"} {
			for _, ends := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/transaction outlasts", b.name, missing)
				if ends {
					name = fmt.Sprintf("%s/%s/transaction ends", b.name, missing)
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					testUpgradeDoesNotStall(t, b, missing, ends)
				})
			}
		}
	}
}

func testUpgradeDoesNotStall(t *testing.T, b backend, missing string, txEnds bool) {
	ctx := t.Context()
	db := b.open(t, 6)
	table := uniqueTable()
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table) })
	mysql := b.dialect != sqlstore.PostgreSQL
	param := func(q string) string {
		if mysql {
			return strings.NewReplacer("$1", "?", "$2", "?", "$3", "?", "$4", "?").Replace(q)
		}
		return q
	}
	ddl := preFingerprintSchema(b.dialect)
	if missing == "index" {
		// The whole schema but the index on expires_at.
		ddl = handMadeTable(b.dialect, "")[:1]
		ddl[0] = strings.Replace(ddl[0], "bigserial PRIMARY KEY", "bigserial", 1)
		ddl[0] = strings.Replace(ddl[0], "AUTO_INCREMENT PRIMARY KEY", "AUTO_INCREMENT UNIQUE", 1)
		ddl = append(ddl, `ALTER TABLE %T ADD PRIMARY KEY (key_hash)`)
	}
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, strings.ReplaceAll(q, "%T", table)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	now := time.Now()
	for _, key := range []string{"busy", "held"} {
		h := sha256.Sum256([]byte(key))
		q := param(`INSERT INTO ` + table + ` (key_hash, key_text, state, fence, token, lease_until, expires_at) VALUES ($1, $2, 1, 1, 'tok', $3, $4)`)
		if _, err := db.ExecContext(ctx, q, h[:], key, now.Add(time.Hour).UnixMilli(), now.Add(2*time.Hour).UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	s, err := sqlstore.New(db, b.dialect, &sqlstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}

	// The business transaction: it updated the record "busy" and stays open.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	h := sha256.Sum256([]byte("busy"))
	if _, err := tx.ExecContext(ctx, param(`UPDATE `+table+` SET lease_until = lease_until WHERE key_hash = $1`), h[:]); err != nil {
		t.Fatal(err)
	}
	endTx := func() {
		if err := tx.Commit(); err != nil && err != sql.ErrTxDone {
			t.Error(err)
		}
	}

	start := time.Now()
	created := make(chan error, 1)
	go func() { created <- s.CreateTable(ctx) }()
	waitForDDL(t, db, b.dialect, table, created)

	// Another instance's traffic on other rows, until CreateTable returns:
	// each operation's latency goes to lat.
	lat := make(chan time.Duration, 1000)
	stop := make(chan struct{})
	traffic := make(chan error, 1)
	go func() {
		defer close(lat)
		held := store.Claim{Key: "held", Status: store.Won, Fence: 1, Token: "tok"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				traffic <- nil
				return
			default:
			}
			began := time.Now()
			if _, err := s.Extend(ctx, held, time.Hour); err != nil {
				traffic <- fmt.Errorf("Extend: %w", err)
				return
			}
			lat <- time.Since(began)
			began = time.Now()
			_, err := s.Claim(ctx, fmt.Sprintf("new-%d", i), time.Minute, store.ClaimOptions{})
			if err != nil && !strings.Contains(err.Error(), "lacks the column") {
				traffic <- fmt.Errorf("Claim: %w", err)
				return
			}
			lat <- time.Since(began)
		}
	}()

	// (a) No operation waits long behind the DDL. The first two are
	// awaited with a bound, so that a stall fails the test rather than
	// hanging it; then the transaction ends, or stays open to the end.
	var worst time.Duration
	for range 2 {
		select {
		case d := <-lat:
			worst = max(worst, d)
		case <-time.After(stallBound):
			t.Errorf("an Extend or Claim on another row waited more than %v behind CreateTable's DDL", stallBound)
			endTx()
		}
	}
	var createErr error
	if txEnds {
		endTx()
	}
	select {
	case createErr = <-created:
	case <-time.After(createBound):
		t.Errorf("CreateTable still waiting %v after it began", createBound)
		endTx()
		createErr = <-created
	}
	took := time.Since(start)
	close(stop)
	for d := range lat {
		worst = max(worst, d)
	}
	if err := <-traffic; err != nil {
		t.Error(err)
	}
	endTx()
	t.Logf("CreateTable took %v (%v); the longest Extend or Claim meanwhile took %v", took.Round(time.Millisecond), createErr, worst.Round(time.Millisecond))
	if worst > stallBound {
		t.Errorf("an Extend or Claim waited %v behind CreateTable's DDL, more than %v", worst, stallBound)
	}

	// (b) CreateTable finished once the transaction ended, or gave up
	// with an error that says the table stayed locked.
	switch {
	case txEnds && createErr != nil:
		t.Errorf("CreateTable after the transaction ended: %v", createErr)
	case !txEnds && (createErr == nil || !strings.Contains(createErr.Error(), "stayed locked") || !strings.Contains(createErr.Error(), table)):
		t.Errorf("CreateTable on a table that stayed locked = %v; want an error naming %s and saying it stayed locked", createErr, table)
	}
	if b.dialect == sqlstore.PostgreSQL && missing == "index" && !txEnds {
		// The concurrent builds that timed out left the index INVALID,
		// which the next CreateTable must drop and build again.
		var valid bool
		q := `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = '` + table + `_expires_at'`
		if err := db.QueryRowContext(ctx, q).Scan(&valid); err != nil || valid {
			t.Errorf("the index after CreateTable gave up: valid = %v, %v; want an INVALID index left behind", valid, err)
		}
	}
	// Whatever was left behind, a CreateTable on the idle table completes
	// the schema.
	if err := s.CreateTable(ctx); err != nil {
		t.Fatalf("CreateTable on the idle table: %v", err)
	}
	if ok, err := s.TableExists(ctx); !ok || err != nil {
		t.Fatalf("TableExists after CreateTable = %v, %v", ok, err)
	}
}

// waitForDDL returns once a statement of CreateTable on table waits for a
// lock, as the database's own activity view shows, and fails t if
// CreateTable returns first.
func waitForDDL(t *testing.T, db *sql.DB, d sqlstore.Dialect, table string, created chan error) {
	t.Helper()
	q := `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%` + table + `%' AND (query LIKE 'ALTER%' OR query LIKE 'CREATE INDEX%' OR query LIKE 'DROP INDEX%')`
	if d != sqlstore.PostgreSQL {
		q = `SELECT COUNT(*) FROM information_schema.processlist WHERE state LIKE 'Waiting for table metadata lock%' AND info LIKE 'ALTER TABLE%` + table + `%'`
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	deadline := time.After(createBound)
	for {
		var n int
		if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-created:
			t.Fatalf("CreateTable returned %v before it was seen waiting for a lock", err)
		case <-deadline:
			t.Fatalf("CreateTable was not seen waiting for a lock within %v", createBound)
		case <-poll.C:
		}
	}
}

// TestIndexBuildNotUndone: while another instance builds the missing index
// with CREATE INDEX CONCURRENTLY, the index reads as INVALID. CreateTable
// must wait for that build rather than drop the index, which would undo
// the build once it ends (and the two instances could go on undoing each
// other's). Here the other instance is the test: its build waits for an
// open transaction, as builds do, and ends when the transaction does.
func TestIndexBuildNotUndone(t *testing.T) {
	ctx := t.Context()
	db := postgresBackend.open(t, 4)
	table := uniqueTable()
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table) })
	if _, err := db.ExecContext(ctx, strings.ReplaceAll(strings.Replace(handMadeTable(sqlstore.PostgreSQL, "")[0], "bigserial PRIMARY KEY", "bigserial", 1), "%T", table)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, strings.ReplaceAll(`ALTER TABLE %T ADD PRIMARY KEY (key_hash)`, "%T", table)); err != nil {
		t.Fatal(err)
	}
	oid, endBuild := buildIndexHeld(t, db, table)

	// CreateTable runs on its own pool, whose statements are recorded.
	texts := &textSpy{Connector: postgresConnector(t)}
	s, err := sqlstore.New(openDB(t, texts, 2), sqlstore.PostgreSQL, &sqlstore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() { created <- s.CreateTable(ctx) }()
	// Once CreateTable has looked and acted on what it saw (its second
	// statement), the build ends.
	poll := time.NewTicker(time.Millisecond)
	for len(texts.list()) < 2 {
		select {
		case err := <-created:
			t.Fatalf("CreateTable returned %v before the build ended", err)
		case <-poll.C:
		}
	}
	poll.Stop()
	endBuild()
	if err := <-created; err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	now, valid := expiresIndex(t, db, table)
	for _, q := range texts.list() {
		if strings.HasPrefix(q, "DROP") {
			t.Errorf("CreateTable ran %q while the other instance was building the index", q)
		}
	}
	if now != oid || !valid {
		t.Errorf("the index is %d (valid %v), want the other instance's build %d, valid: CreateTable dropped it and built its own", now, valid, oid)
	}
}

// buildIndexHeld starts, as another instance would, a concurrent build of
// table's index on expires_at that waits for an open transaction which
// wrote to the table, as builds wait for older transactions. It returns
// once the build waits, with the index's oid, and endBuild, which ends the
// transaction and waits for the build.
func buildIndexHeld(t *testing.T, db *sql.DB, table string) (oid int64, endBuild func()) {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (key_hash, key_text, state, fence, token, lease_until, expires_at) VALUES ('\x01', 'busy', 1, 1, 'tok', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	built := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, `CREATE INDEX CONCURRENTLY `+table+`_expires_at ON `+table+` (expires_at)`)
		built <- err
	}()
	waitForDDL(t, db, sqlstore.PostgreSQL, table, built)
	oid, _ = expiresIndex(t, db, table)
	return oid, func() {
		t.Helper()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-built; err != nil {
			t.Fatalf("the other instance's build: %v", err)
		}
	}
}

// expiresIndex returns the oid of table's index on expires_at and whether
// it is valid.
func expiresIndex(t *testing.T, db *sql.DB, table string) (oid int64, valid bool) {
	t.Helper()
	q := `SELECT c.oid, i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = '` + table + `_expires_at'`
	if err := db.QueryRowContext(t.Context(), q).Scan(&oid, &valid); err != nil {
		t.Fatal(err)
	}
	return oid, valid
}

// textSpy records the texts of the statements its connections run.
type textSpy struct {
	driver.Connector
	mu    sync.Mutex
	texts []string
}

func (c *textSpy) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &textConn{Conn: conn, spy: c}, nil
}

func (c *textSpy) record(q string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.texts = append(c.texts, q)
}

func (c *textSpy) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.texts)
}

type textConn struct {
	driver.Conn
	spy *textSpy
}

func (c *textConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.spy.record(q)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c *textConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.spy.record(q)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}
