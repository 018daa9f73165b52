package store_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/store"
)

func TestClaimOptionsClaimToken(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := store.ClaimOptions{}.ClaimToken()
		if len(tok) != 32 || seen[tok] {
			t.Fatalf("ClaimToken = %q: want 32 hex characters, never repeated", tok)
		}
		seen[tok] = true
	}
	if got := (store.ClaimOptions{Token: "fixed"}).ClaimToken(); got != "fixed" {
		t.Fatalf("ClaimToken with Token = %q, want the given token", got)
	}
}

func TestClaimOptionsChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts store.ClaimOptions
		want error
	}{
		{"zero", store.ClaimOptions{}, nil},
		{"longest fingerprint and origin", store.ClaimOptions{Fingerprint: make([]byte, store.MaxFingerprintLen), Origin: strings.Repeat("o", store.MaxOriginLen)}, nil},
		{"long fingerprint", store.ClaimOptions{Fingerprint: make([]byte, store.MaxFingerprintLen+1)}, store.ErrInvalidFingerprint},
		{"long origin", store.ClaimOptions{Origin: strings.Repeat("o", store.MaxOriginLen+1)}, store.ErrInvalidOrigin},
		{"control character in origin", store.ClaimOptions{Origin: "push/\n"}, store.ErrInvalidOrigin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.opts.Checked()
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Checked() error = %v, want %v", err, tc.want)
			}
			if err == nil && (!bytes.Equal(got.Fingerprint, tc.opts.Fingerprint) || got.Origin != tc.opts.Origin) {
				t.Fatalf("Checked() = %+v, want the options unchanged", got)
			}
		})
	}
	got, err := store.ClaimOptions{Fingerprint: []byte{}, Token: "t"}.Checked()
	if err != nil || got.Fingerprint != nil || got.Token != "t" {
		t.Fatalf("Checked() of an empty fingerprint = %+v, %v; want a nil fingerprint, the token kept", got, err)
	}
}
