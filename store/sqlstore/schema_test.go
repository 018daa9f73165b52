package sqlstore_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestCreateTable checks that CreateTable works with a plain and a
// schema-qualified name, and that once the schema is in place it only looks
// (one statement, no DDL), so that a database user without DDL rights can
// call it.
func TestCreateTable(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, table := range []string{uniqueTable(), schemaOf(t, b) + "." + uniqueTable()} {
				spy := &spyConnector{Connector: b.connector(t)}
				db := openDB(t, spy, 1)
				s := newStore(t, db, b.dialect, &sqlstore.Options{Table: table})
				before := spy.stmts.Load()
				if err := s.CreateTable(t.Context()); err != nil {
					t.Fatalf("second CreateTable(%s): %v", table, err)
				}
				if n := spy.stmts.Load() - before; n != 1 {
					t.Errorf("CreateTable(%s) on an existing schema ran %d statements, want 1 (the lookup)", table, n)
				}
				c, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
				if err != nil || c.Status != store.Won {
					t.Fatalf("Claim on %s = %v, %v; want Won", table, c.Status, err)
				}
				if ok, err := s.Complete(t.Context(), c); !ok || err != nil {
					t.Fatalf("Complete on %s = %v, %v; want true", table, ok, err)
				}
			}
		})
	}
}

// schemaOf names a schema of b's test database that holds its tables.
func schemaOf(t *testing.T, b backend) string {
	switch b.dialect {
	case sqlstore.PostgreSQL:
		return "public"
	case sqlstore.SQLite:
		return "main"
	}
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.DBName
}

// TestRecordInstants reads the instants a record holds: whenever a Claim
// wins, expires_at is exactly lease_until + ttl (one reading of the
// database clock), LeaseUntil reports lease_until, the fence is the
// database clock of the win in microseconds (read to the millisecond), and
// Extend keeps expires_at at least a ttl past the new lease.
func TestRecordInstants(t *testing.T) {
	const ttl = time.Hour
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := b.open(t, 2)
			table := uniqueTable()
			s := newStore(t, db, b.dialect, &sqlstore.Options{Table: table, TTL: ttl})
			param := "?"
			if b.dialect == sqlstore.PostgreSQL {
				param = "$1"
			}
			read := func(key string) (fence, leaseUntil, expiresAt int64) {
				t.Helper()
				q := "SELECT fence, lease_until, expires_at FROM " + table + " WHERE key_text = " + param
				if err := db.QueryRowContext(ctx, q, key).Scan(&fence, &leaseUntil, &expiresAt); err != nil {
					t.Fatal(err)
				}
				return fence, leaseUntil, expiresAt
			}
			check := func(what string, c store.Claim) {
				t.Helper()
				fence, lease, exp := read(c.Key)
				if fence != c.Fence || lease != c.LeaseUntil.UnixMilli() || exp-lease != ttl.Milliseconds() {
					t.Errorf("%s: record fence %d, lease_until %d, expires_at %d; want fence %d, lease_until %d (the claim's), expires_at lease_until + %d",
						what, fence, lease, exp, c.Fence, c.LeaseUntil.UnixMilli(), ttl.Milliseconds())
				}
				// MySQL reads its clock once per expression; the others once.
				if won := lease - time.Minute.Milliseconds(); fence%1000 != 0 || fence/1000 > won || fence/1000 < won-50 {
					t.Errorf("%s: record fence %d, want the clock of the win (%d ms) times 1000", what, fence, won)
				}
			}

			c, err := s.Claim(ctx, "fresh", time.Minute, store.ClaimOptions{})
			if err != nil || c.Status != store.Won {
				t.Fatalf("Claim = %v, %v", c.Status, err)
			}
			check("fresh claim", c)

			if _, err := s.Claim(ctx, "taken", time.Millisecond, store.ClaimOptions{}); err != nil {
				t.Fatal(err)
			}
			var taken store.Claim
			for deadline := time.Now().Add(10 * time.Second); taken.Status != store.Won; {
				if time.Now().After(deadline) {
					t.Fatal("the 1ms lease never lapsed")
				}
				if taken, err = s.Claim(ctx, "taken", time.Minute, store.ClaimOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			check("takeover", taken)

			x, err := s.Extend(ctx, c, 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			fence, lease, exp := read("fresh")
			if fence != c.Fence || lease != x.LeaseUntil.UnixMilli() || exp-lease < ttl.Milliseconds() || !x.LeaseUntil.After(c.LeaseUntil) {
				t.Errorf("after Extend: fence %d, lease_until %d (Extend said %d, was %d), expires_at %d; want the new lease and expires_at at least a ttl later",
					fence, lease, x.LeaseUntil.UnixMilli(), c.LeaseUntil.UnixMilli(), exp)
			}
		})
	}
}

// TestRolloutCreateTable: the instances of a rollout start together, and
// each calls CreateTable on a table that does not exist yet. Every call
// must succeed: DDL that races another instance's is followed by another
// look, not reported (issue 29 item 10). "fresh tables" races eight
// instances round after round. When an instance that found the table
// without its index builds it concurrently, the others must wait for that
// build as for a lock: in "index build held" the build lasts longer than
// the pauses between their tries (it waits for an open transaction, as
// concurrent builds do), and they must neither report the table locked
// meanwhile nor drop the build.
func TestRolloutCreateTable(t *testing.T) {
	const instances = 8
	t.Run("fresh tables", func(t *testing.T) {
		dbs := instancePools(t, instances)
		for round := range 12 {
			table := uniqueTable()
			t.Cleanup(func() { dbs[0].Exec("DROP TABLE IF EXISTS " + table) })
			results := rollout(t, dbs, table)
			for range instances {
				if r := <-results; r.err != nil {
					t.Errorf("round %d: instance %d's CreateTable failed after %v: %v", round, r.instance, r.took.Round(time.Millisecond), r.err)
				}
			}
		}
	})
	t.Run("index build held", func(t *testing.T) {
		ctx := t.Context()
		db := postgresBackend.open(t, 4)
		dbs := instancePools(t, instances)
		table := uniqueTable()
		t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + table) })
		// The table as an instance's CREATE TABLE left it, before the index.
		first, err := sqlstore.New(db, sqlstore.PostgreSQL, &sqlstore.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		if err := first.CreateTable(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `DROP INDEX `+table+`_expires_at`); err != nil {
			t.Fatal(err)
		}
		oid, endBuild := buildIndexHeld(t, db, table)

		results := rollout(t, dbs, table)
		left := instances
		for held := time.After(buildHeld); held != nil; {
			select {
			case r := <-results:
				left--
				t.Errorf("instance %d's CreateTable returned after %v while another session was still building the index: %v; want it to wait for the build", r.instance, r.took.Round(time.Millisecond), r.err)
			case <-held:
				held = nil
			}
		}
		endBuild()
		for ; left > 0; left-- {
			select {
			case r := <-results:
				if r.err != nil {
					t.Errorf("instance %d's CreateTable after the build ended: %v", r.instance, r.err)
				}
			case <-time.After(createBound):
				t.Fatalf("%d CreateTable calls still waiting %v after the build ended", left, createBound)
			}
		}
		if now, valid := expiresIndex(t, db, table); now != oid || !valid {
			t.Errorf("the index is %d (valid %v), want the other instance's build %d, valid: an instance dropped it and built its own", now, valid, oid)
		}
	})
}

// instancePools returns n pools on the PostgreSQL test database, one per
// instance of a rollout.
func instancePools(t *testing.T, n int) []*sql.DB {
	t.Helper()
	dbs := make([]*sql.DB, n)
	for i := range dbs {
		dbs[i] = postgresBackend.open(t, 2)
	}
	return dbs
}

// rolloutResult is how one instance's CreateTable ended.
type rolloutResult struct {
	instance int
	took     time.Duration
	err      error
}

// rollout starts, all at once, CreateTable on table in a store on each of
// dbs, and returns the channel that receives each call's result.
func rollout(t *testing.T, dbs []*sql.DB, table string) <-chan rolloutResult {
	t.Helper()
	results := make(chan rolloutResult, len(dbs))
	start := make(chan struct{})
	for i, db := range dbs {
		s, err := sqlstore.New(db, sqlstore.PostgreSQL, &sqlstore.Options{Table: table})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			<-start
			began := time.Now()
			err := s.CreateTable(t.Context())
			results <- rolloutResult{instance: i, took: time.Since(began), err: err}
		}()
	}
	close(start)
	return results
}
