package pushauth_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/api/idtoken"

	"github.com/idemgate/idemgate/pushauth"
)

// TestValidatorErrorIsRedacted: a validator that quotes the token in its
// error does not get it into the log.
func TestValidatorErrorIsRedacted(t *testing.T) {
	token := mint(t, goodHeader(), goodClaims(), testKeys().google)
	v, logs := newVerifier(t, validatorFunc(func() error { return errors.New("bad token " + token) }))
	got := serve(t, v, []string{"Bearer " + token})
	if got.code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", got.code)
	}
	assertNoToken(t, token, got.body, logs.String())
}

func TestNew(t *testing.T) {
	ctx := context.Background()
	for name, opts := range map[string]pushauth.Options{
		"no audience": {ServiceAccountEmail: testEmail},
		"no email":    {Audience: testAudience},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := pushauth.New(ctx, opts); err == nil || !strings.HasPrefix(err.Error(), "pushauth: ") {
				t.Errorf("New = %v, want a pushauth: error", err)
			}
		})
	}
	// The default validator is built without a request.
	if _, err := pushauth.New(ctx, pushauth.Options{Audience: testAudience, ServiceAccountEmail: testEmail}); err != nil {
		t.Errorf("New with the default validator: %v", err)
	}
}

// FuzzVerify runs arbitrary Authorization headers through the whole of
// Verify, real idtoken validation included: no panic, and nothing but the
// genuine token is accepted.
func FuzzVerify(f *testing.F) {
	good := mint(f, goodHeader(), goodClaims(), testKeys().google)
	for _, seed := range []string{
		"", "Bearer", "Basic abc", "Bearer " + good, "Bearer garbage",
		"Bearer " + mint(f, goodHeader(), goodClaims(), testKeys().impostor),
		"Bearer " + mint(f, with(goodHeader(), map[string]any{"alg": "ES256"}), goodClaims(), nil) + "AAAA",
	} {
		f.Add(seed)
	}
	v, _ := newVerifier(f, validatorFor(f, googleCerts(f)))
	f.Fuzz(func(t *testing.T, header string) {
		p, err := v.Verify(context.Background(), http.Header{"Authorization": {header}})
		if err == nil && (p == nil || !strings.Contains(header, good)) {
			t.Fatalf("Verify accepted %q", header)
		}
	})
}

// validatorFunc is a TokenValidator that fails with err().
type validatorFunc func() error

func (f validatorFunc) Validate(context.Context, string, string) (*idtoken.Payload, error) {
	return nil, f()
}

// A custom validator that answers neither a payload nor an error fails
// closed (issue 22, item 9): 401, the handler never runs, nothing panics.
func TestValidatorWithoutPayloadFailsClosed(t *testing.T) {
	token := mint(t, goodHeader(), goodClaims(), testKeys().google)
	v, _ := newVerifier(t, validatorFunc(func() error { return nil }))
	if _, err := v.Verify(t.Context(), http.Header{"Authorization": {"Bearer " + token}}); !errors.Is(err, pushauth.ErrBadSignature) {
		t.Errorf("Verify = %v, want ErrBadSignature", err)
	}
	if got := serve(t, v, []string{"Bearer " + token}); got.code != http.StatusUnauthorized || got.nextCalled {
		t.Errorf("status %d, handler ran %v; want 401 and no run", got.code, got.nextCalled)
	}
}

// The email is compared byte for byte but for ASCII case: a Unicode case
// fold would take the long s (U+017F) for an "s" (issue 22, item 9).
func TestEmailComparisonIsASCII(t *testing.T) {
	srv := googleCerts(t)
	v, _ := newVerifier(t, validatorFor(t, srv))
	for _, tc := range []struct {
		email string
		ok    bool
	}{
		{testEmail, true},
		{strings.ToUpper(testEmail), true},
		{strings.Replace(testEmail, "s", "\u017f", 1), false},
	} {
		claims := goodClaims()
		claims["email"] = tc.email
		token := mint(t, goodHeader(), claims, testKeys().google)
		_, err := v.Verify(t.Context(), http.Header{"Authorization": {"Bearer " + token}})
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, pushauth.ErrWrongEmail) {
			t.Errorf("email %q: Verify = %v, want ok=%v", tc.email, err, tc.ok)
		}
	}
}
