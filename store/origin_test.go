package store_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgate/idemgate/store"
)

func TestCheckOrigin(t *testing.T) {
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"push/17049283746151234", true},
		{strings.Repeat("é", store.MaxOriginLen/2), true},
		{strings.Repeat("x", store.MaxOriginLen+1), false},
		{"push/a\nb", false},
		{"push/\x00", false},
		{"push/\u0085", false}, // a C1 control
		{"push/\xff", false},
	} {
		err := store.CheckOrigin(tc.origin)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, store.ErrInvalidOrigin) {
			t.Errorf("CheckOrigin(%.20q…, %d bytes) = %v, want ok %v", tc.origin, len(tc.origin), err, tc.ok)
		}
	}
}

// MakeOrigin always makes an origin CheckOrigin accepts, whatever the id.
func TestMakeOrigin(t *testing.T) {
	long := strings.Repeat("7", 200)
	for _, tc := range []struct{ surface, id, want string }{
		{"push", "4711", "push/4711"},
		{"push", "", "push"},
		{"", "4711", "4711"},
		{"pull", "a\nb\xffc", "pull/a\uFFFDb\uFFFDc"},
		{"push", long, "push/" + long[:store.MaxOriginLen-len("push/")-len("…")] + "…"},
		{"push", strings.Repeat("é", 100), "push/" + strings.Repeat("é", 60) + "…"},
	} {
		got := store.MakeOrigin(tc.surface, tc.id)
		if got != tc.want {
			t.Errorf("MakeOrigin(%q, %.20q…) = %q, want %q", tc.surface, tc.id, got, tc.want)
		}
		if err := store.CheckOrigin(got); err != nil || !utf8.ValidString(got) {
			t.Errorf("MakeOrigin(%q, %.20q…) = %q, which CheckOrigin refuses: %v", tc.surface, tc.id, got, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = store.MakeOrigin("push", "17049283746151234") }); n > 1 {
		t.Errorf("MakeOrigin of a message id allocates %v times, want at most 1", n)
	}
}
