package main

import (
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// settle on every real store: a lapsed claim is taken over and recorded
// done, so its crashed holder is fenced out and its redeliveries are
// duplicates; a released or absent key is recorded done; a held, DONE or
// unconfirmed one is not, and the command says so.
func TestSettle(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url := b.url(t)
			s := seed(t, url)
			crashed, err := s.st.Claim(t.Context(), "lapsed", 50*time.Millisecond, store.ClaimOptions{Origin: "push/m-lapsed"})
			if err != nil || crashed.Status != store.Won {
				t.Fatalf("Claim(lapsed) = %v, %v", crashed.Status, err)
			}
			// The holder crashes: its lease runs out on the store's clock.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if r := idemgate(t, "", "inspect", "-store", url, "lapsed"); strings.Contains(r.stdout, "lapsed:") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the 50ms claim did not lapse within 10s")
				}
			}

			if r := idemgate(t, "n\n", "settle", "-store", url, "lapsed"); r.code != exitProblem || !strings.Contains(r.stderr, "not confirmed") {
				t.Errorf("settle, not confirmed = %d:\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			r := idemgate(t, "", "settle", "-store", url, "-yes", "lapsed", "released", "absent", "held", "done")
			for _, want := range []string{`"lapsed": settled: done at fence`, `"released": settled`, `"absent": settled`,
				`"held": not settled: a holder is working on it now`, `"done": already done; unchanged`} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("settle printed no %q:\n%s", want, r.stdout)
				}
			}
			if r.code != exitProblem || !strings.Contains(r.stderr, "2 of 5 keys not settled") {
				t.Errorf("settle = %d, stderr %q; want 1 and the two keys not settled", r.code, r.stderr)
			}
			if ok, err := s.st.Complete(t.Context(), crashed); ok || err != nil {
				t.Errorf("the crashed holder's Complete after settle = %v, %v; want false (fenced out)", ok, err)
			}
			for _, key := range []string{"lapsed", "released", "absent"} {
				if c, err := s.st.Claim(t.Context(), key, time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.AlreadyDone {
					t.Errorf("Claim(%q) after settle = %v, %v; want AlreadyDone: its redelivery is a duplicate", key, c.Status, err)
				}
			}
			if c, err := s.st.Claim(t.Context(), "held", time.Minute, store.ClaimOptions{}); err != nil || c.Status != store.HeldByOther {
				t.Errorf("Claim(held) after settle = %v, %v; want HeldByOther: settle leaves a live holder alone", c.Status, err)
			}
			if j := inspectJSON(t, url, "lapsed")["lapsed"]; !strings.HasPrefix(j.Origin, "settle/") {
				t.Errorf("inspect lapsed after settle: origin %q, want settle/HOST", j.Origin)
			}
		})
	}
}
