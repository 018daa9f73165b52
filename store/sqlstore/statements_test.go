package sqlstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// TestStatementsPerMessage counts, at the driver, the statements each
// operation sends: a fresh message (Claim, Complete) is two and a duplicate
// one (a failed message too: Claim, Fail; and a duplicate of it one), except on MySQL, where a Claim reads its answer back with a second
// statement, and on SQLite, where a Claim that does not find the record
// DONE runs the upsert after its read (in process, both prepared). The Claims carry a payload fingerprint, which travels in the
// same statements. With the driver's server-side prepared statements (no
// interpolateParams), MySQL and MariaDB also prepare each statement: the
// test reports those, which are round trips too.
func TestStatementsPerMessage(t *testing.T) {
	more := []backend{{name: "MariaDB-prepared", dialect: sqlstore.MariaDB, connector: mysqlConnector("")}, pgNoWriteBackend}
	for _, b := range append(backends, more...) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			spy := &spyConnector{Connector: b.connector(t)}
			s := b.store(t, openDB(t, spy, 1), nil)
			ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: []byte("payload")}
			// claimStmts is a Claim's count, dupStmts a duplicate's.
			claimStmts, dupStmts := int64(1), int64(1)
			switch b.dialect {
			case sqlstore.MySQL:
				claimStmts, dupStmts = 2, 2
			case sqlstore.SQLite:
				claimStmts = 2
			}
			// Warm up: pgx prepares each statement on its first use on a
			// connection, which is not what this test measures.
			c, err := s.Claim(ctx, "warm-up", time.Minute, opts)
			if err == nil {
				_, err = s.Complete(ctx, c)
			}
			if err != nil {
				t.Fatal(err)
			}

			count := func(name string, want int64, f func() error) {
				t.Helper()
				stmts, prepares := spy.stmts.Load(), spy.prepares.Load()
				if err := f(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				stmts, prepares = spy.stmts.Load()-stmts, spy.prepares.Load()-prepares
				t.Logf("%s, %-20s %d statements, %d prepared", b.name, name+":", stmts, prepares)
				if stmts != want {
					t.Errorf("%s: %d statements, want %d", name, stmts, want)
				}
			}
			count("fresh message", claimStmts+1, func() error {
				c, err := s.Claim(ctx, "m1", time.Minute, opts)
				if err != nil {
					return err
				}
				if c.Status != store.Won || string(c.Fingerprint) != "payload" {
					return fmt.Errorf("fresh Claim = %v with fingerprint %q, want Won with the caller's", c.Status, c.Fingerprint)
				}
				_, err = s.Complete(ctx, c)
				return err
			})
			count("duplicate message", dupStmts, func() error {
				c, err := s.Claim(ctx, "m1", time.Minute, opts)
				if err == nil && c.Status != store.AlreadyDone {
					err = errors.New("duplicate Claim did not report AlreadyDone")
				}
				return err
			})
			held, err := s.Claim(ctx, "m2", time.Minute, opts)
			if err != nil {
				t.Fatal(err)
			}
			count("claim of a held key", claimStmts, func() error {
				c, err := s.Claim(ctx, "m2", time.Minute, opts)
				if err == nil && c.Status != store.HeldByOther {
					err = errors.New("Claim of a held key did not report HeldByOther")
				}
				return err
			})
			count("extend", 1, func() error { _, err := s.Extend(ctx, held, time.Minute); return err })
			count("release", 1, func() error { return s.Release(ctx, held) })
			count("failed message", claimStmts+1, func() error {
				c, err := s.Claim(ctx, "m3", time.Minute, opts)
				if err != nil {
					return err
				}
				_, _, err = s.Fail(ctx, c, store.Failure{Reason: "bad", Final: true})
				return err
			})
			count("claim of a FAILED key", dupStmts, func() error {
				c, err := s.Claim(ctx, "m3", time.Minute, opts)
				if err == nil && (c.Status != store.AlreadyFailed || c.Attempts != 1 || c.Reason != "bad") {
					err = fmt.Errorf("Claim of a FAILED key = %+v, want AlreadyFailed with 1 attempt and its reason", c)
				}
				return err
			})
			count("retry", 1, func() error { _, err := s.Retry(ctx, "m3"); return err })
		})
	}
}

// TestLostClaimReplyReaffirms loses the reply of a Claim that committed, as
// a dropped connection would, and retries it with the same token: the
// retry must re-affirm the claim (Won, same fence) rather than report the
// caller's own claim as held by another.
func TestLostClaimReplyReaffirms(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			spy := &spyConnector{Connector: b.connector(t)}
			s := newStore(t, openDB(t, spy, 2), b.dialect, nil)
			fp := []byte("payload")
			ctx, opts := t.Context(), store.ClaimOptions{Fingerprint: fp, Token: "t"}

			spy.loseNext.Store(true)
			if _, err := s.Claim(ctx, "k", time.Minute, opts); !errors.Is(err, errLostReply) {
				t.Fatalf("Claim whose reply was lost = %v, want the lost-reply error", err)
			}
			a, err := s.Claim(ctx, "k", time.Minute, opts)
			if err != nil || a.Status != store.Won || a.Fence <= 0 || a.Token != "t" || string(a.Fingerprint) != string(fp) {
				t.Fatalf("retried Claim = %+v, %v; want Won with token t and fingerprint %q (re-affirm)", a, err, fp)
			}
			// A retry that carries another fingerprint re-affirms the claim
			// and reports the one the record kept.
			b, err := s.Claim(ctx, "k", time.Minute, store.ClaimOptions{Fingerprint: []byte("other"), Token: opts.Token})
			if err != nil || b.Status != store.Won || b.Fence != a.Fence || !b.LeaseUntil.Equal(a.LeaseUntil) || string(b.Fingerprint) != string(fp) {
				t.Fatalf("second retry = %+v, %v; want the same claim %+v", b, err, a)
			}
			other, err := s.Claim(t.Context(), "k", time.Minute, store.ClaimOptions{})
			if err != nil || other.Status != store.HeldByOther || other.Fence != a.Fence || string(other.Fingerprint) != string(fp) {
				t.Fatalf("Claim with another token = %+v, %v; want HeldByOther at fence %d with fingerprint %q", other, err, a.Fence, fp)
			}
			if ok, err := s.Complete(t.Context(), a); !ok || err != nil {
				t.Fatalf("Complete of the re-affirmed claim = %v, %v; want true", ok, err)
			}
		})
	}
}
