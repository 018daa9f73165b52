package record

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// The skew margin moves Forget's and View's idea of "expired" as it moves
// every other operation's.
func TestForgetAndViewHonourTheMargin(t *testing.T) {
	p := Rules{TTL: time.Hour, Skew: 2 * time.Second}
	done := &Record{State: StateDone, Fence: 3, Token: "a", LeaseUntil: t0, ExpiresAt: t0.Add(time.Hour), Origin: "push/m-1"}
	within := t0.Add(time.Hour + time.Second)
	next, write := p.Forget(done, within)
	if !write || next.State != StateClaimed || next.Fence != within.UnixMicro() || next.Token != "" || !next.LeaseUntil.Equal(within) || !next.ExpiresAt.Equal(within.Add(p.TTL)) {
		t.Fatalf("Forget within the margin = %+v, want a released claim at fence %d (now in microseconds), expiring a ttl from now", next, within.UnixMicro())
	}
	if next.Origin != done.Origin {
		t.Fatalf("Forget = %+v, want the origin %q kept (the last holder's)", next, done.Origin)
	}
	if next, write := p.Forget(done, t0.Add(time.Hour+2*time.Second)); write {
		t.Fatalf("Forget past the margin wrote %+v, want nothing", next)
	}
	r, ok := p.View(done, "k", within)
	if !ok || r.State != store.Done || r.Token != "" || !r.CompletedAt.Equal(t0) || !r.ReadAt.Equal(within) || r.Origin != done.Origin {
		t.Fatalf("View within the margin = %+v, %v; want DONE completed at %v", r, ok, t0)
	}
	if _, ok := p.View(done, "k", t0.Add(time.Hour+2*time.Second)); ok {
		t.Fatal("View past the margin must report no record")
	}
	if _, ok := p.View(nil, "k", t0); ok {
		t.Fatal("View of an absent record must report no record")
	}
}
