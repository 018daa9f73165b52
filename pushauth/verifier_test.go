package pushauth_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
	assertNoToken(t, token, got.body, logs.Records().String())
}

func TestNew(t *testing.T) {
	for name, opts := range map[string]*pushauth.Options{
		"nil options": nil,
		"no audience": {ServiceAccountEmail: testEmail},
		"no email":    {Audience: testAudience},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := pushauth.New(opts); err == nil || !strings.HasPrefix(err.Error(), "pushauth: ") || !strings.Contains(err.Error(), "is required") {
				t.Errorf("New = %v, want a pushauth: error naming the required field", err)
			}
		})
	}
	// The default validator is built without a request.
	if _, err := pushauth.New(&pushauth.Options{Audience: testAudience, ServiceAccountEmail: testEmail}); err != nil {
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
	const zone = "push@zone-az.iam.gserviceaccount.com"
	for _, tc := range []struct {
		configured, presented string
		ok                    bool
	}{
		{testEmail, testEmail, true},
		{testEmail, strings.ToUpper(testEmail), true},
		{zone, strings.ToUpper(zone), true}, // Z, the last letter folded
		{testEmail, strings.Replace(testEmail, "s", "\u017f", 1), false},
		{testEmail, strings.Replace(testEmail, ".com", ".con", 1), false}, // same length
		{zone, strings.Replace(zone, "z", "[", 1), false},                 // 'Z'+1 is no letter
		{zone, strings.Replace(zone, "a", "@", 1), false},                 // 'A'-1 is no letter
	} {
		v, err := pushauth.New(&pushauth.Options{
			Audience: testAudience, ServiceAccountEmail: tc.configured, Validator: validatorFor(t, srv),
		})
		if err != nil {
			t.Fatal(err)
		}
		claims := goodClaims()
		claims["email"] = tc.presented
		token := mint(t, goodHeader(), claims, testKeys().google)
		_, err = v.Verify(t.Context(), http.Header{"Authorization": {"Bearer " + token}})
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, pushauth.ErrWrongEmail) {
			t.Errorf("email %q for %q: Verify = %v, want ok=%v", tc.presented, tc.configured, err, tc.ok)
		}
	}
}

// payloadValidator accepts every token with its payload p, as a validator
// does once the signature holds.
type payloadValidator struct{ p *idtoken.Payload }

func (v payloadValidator) Validate(context.Context, string, string) (*idtoken.Payload, error) {
	return v.p, nil
}

// A token is refused from the second of its exp on: RFC 7519 (4.1.4) says
// the current time must be before exp. The bubble's clock stands still, so
// the check reads exactly the second the token was minted against.
func TestExpiredFromExp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now().Unix()
		for _, tc := range []struct {
			exp int64
			ok  bool
		}{{now - 1, false}, {now, false}, {now + 1, true}} {
			claims := with(goodClaims(), map[string]any{"exp": tc.exp})
			token := mint(t, goodHeader(), claims, testKeys().google)
			v, _ := newVerifier(t, payloadValidator{&idtoken.Payload{
				Issuer: "https://accounts.google.com", Audience: testAudience, Expires: tc.exp,
				Claims: map[string]any{"email": testEmail, "email_verified": true},
			}})
			_, err := v.Verify(t.Context(), http.Header{"Authorization": {"Bearer " + token}})
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, pushauth.ErrExpiredToken) {
				t.Errorf("exp %+d s from now: Verify = %v, want ok=%v", tc.exp-now, err, tc.ok)
			}
		}
	})
}

// A signature short enough to be an ordinary word stays in the validator's
// error text, which is then classified by its words: a token signed
// "expired" that the validator finds expired is ErrExpiredToken, not a bad
// signature. A longer signature quoted alone is redacted.
func TestShortSignatureNotRedacted(t *testing.T) {
	for _, tc := range []struct {
		sig  string
		want error
	}{
		{"expired", pushauth.ErrExpiredToken},
		{"expiredX", pushauth.ErrBadSignature}, // redacted: "token [signature]"
	} {
		token := mint(t, goodHeader(), goodClaims(), nil) + tc.sig
		v, logs := newVerifier(t, validatorFunc(func() error {
			return errors.New("idtoken: token " + tc.sig + ": now=1, expires=0")
		}))
		_, err := v.Verify(t.Context(), http.Header{"Authorization": {"Bearer " + token}})
		if !errors.Is(err, tc.want) {
			t.Errorf("signature %q: Verify = %v, want %v", tc.sig, err, tc.want)
		}
		if len(tc.sig) >= 8 && strings.Contains(err.Error(), tc.sig) {
			t.Errorf("signature %q: the error quotes it: %v", tc.sig, err)
		}
		if recs := logs.Records(); len(recs) != 0 {
			t.Errorf("Verify logged; only the Middleware logs:\n%s", recs)
		}
	}
}
