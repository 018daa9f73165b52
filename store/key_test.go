package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/store"
)

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"m-1", true},
		{"ünï/cödé 🔑", true},
		{strings.Repeat("k", store.MaxKeyLen), true},
		{"", false},
		{strings.Repeat("k", store.MaxKeyLen+1), false},
		{"a\x00b", false},
		{"\xff", false},
	} {
		err := store.CheckKey(tc.key)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, store.ErrInvalidKey)) {
			t.Errorf("CheckKey(%.20q) = %v, want ok=%v (errors wrapping ErrInvalidKey)", tc.key, err, tc.ok)
		}
	}
}

func TestStatusString(t *testing.T) {
	for s, want := range map[store.Status]string{store.Won: "won", store.AlreadyDone: "already_done", store.HeldByOther: "held_by_other", 0: "invalid"} {
		if s.String() != want {
			t.Errorf("Status(%d).String() = %q, want %q", s, s.String(), want)
		}
	}
}

func TestQuoteKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"k", `"k"`},
		{strings.Repeat("a", 64), `"` + strings.Repeat("a", 64) + `"`},
		{strings.Repeat("a", 65), `"` + strings.Repeat("a", 64) + `"…(65 bytes)`},
		// A cut never splits a rune: é is two bytes, the 64th and 65th.
		{strings.Repeat("a", 63) + "é", `"` + strings.Repeat("a", 63) + `"…(65 bytes)`},
		// Bytes that never start a rune (not UTF-8) leave nothing to show.
		{strings.Repeat("\x80", 70), `""…(70 bytes)`},
	} {
		if got := store.QuoteKey(tc.key); got != tc.want {
			t.Errorf("QuoteKey(%d bytes) = %s, want %s", len(tc.key), got, tc.want)
		}
	}
}
