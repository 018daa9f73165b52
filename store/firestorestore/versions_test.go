package firestorestore

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/store/internal/record"
)

// TestVersionsKeepOnlyLiveClaims: the memory keeps a live claim the store
// wrote, and nothing that could only spare a Claim its read.
func TestVersionsKeepOnlyLiveClaims(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	live := record.Record{State: record.StateClaimed, Fence: 1, Token: "t"}
	released := live
	released.Token = ""
	done := live
	done.State = record.StateDone
	for _, tc := range []struct {
		name string
		rec  *record.Record
		want bool
	}{
		{"live claim", &live, true},
		{"released claim", &released, false},
		{"done", &done, false},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v versions
			v.put("k", &live, at)
			v.put("k", tc.rec, at.Add(time.Second))
			if _, got := v.get("k"); got != tc.want {
				t.Errorf("remembered after writing it = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVersionsSeen: a read that finds the remembered version keeps it for
// the holder's next write; a read of anything else forgets it.
func TestVersionsSeen(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	live := record.Record{State: record.StateClaimed, Fence: 1, Token: "t"}
	for _, tc := range []struct {
		name string
		read time.Time
		want bool
	}{
		{"same version", at, true},
		{"changed since", at.Add(time.Microsecond), false},
		{"deleted since", time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v versions
			v.put("k", &live, at)
			v.seen("k", tc.read)
			if _, got := v.get("k"); got != tc.want {
				t.Errorf("remembered after a read = %v, want %v", got, tc.want)
			}
		})
	}
}
