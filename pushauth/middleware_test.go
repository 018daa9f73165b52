package pushauth_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/pushauth"
)

func TestMiddleware(t *testing.T) {
	keys := testKeys()
	good := goodClaims()
	sign := func(claims map[string]any) string { return mint(t, goodHeader(), claims, keys.google) }
	past := time.Now().Add(-time.Hour).Unix()

	tests := []struct {
		name     string
		auth     []string // Authorization header values
		status   int
		reason   error  // the sentinel the body names; nil for 200
		wwwAuth  string // the WWW-Authenticate header
		logLevel string
	}{
		{name: "good token", auth: []string{"Bearer " + sign(good)}, status: 200},
		{name: "issuer without scheme", auth: []string{"Bearer " + sign(with(good, map[string]any{"iss": "accounts.google.com"}))}, status: 200},
		{name: "email in other case", auth: []string{"Bearer " + sign(with(good, map[string]any{"email": strings.ToUpper(testEmail)}))}, status: 200},
		{name: "email_verified as string", auth: []string{"Bearer " + sign(with(good, map[string]any{"email_verified": "true"}))}, status: 200},
		{name: "scheme in lower case", auth: []string{"bearer " + sign(good)}, status: 200},

		{name: "missing header", status: 401, reason: pushauth.ErrNoToken, wwwAuth: "Bearer", logLevel: "WARN"},
		{name: "Basic scheme", auth: []string{"Basic cHVic3ViOnNlY3JldA=="}, status: 401, reason: pushauth.ErrNoToken, wwwAuth: "Bearer", logLevel: "WARN"},
		{name: "Bearer without token", auth: []string{"Bearer"}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "two headers", auth: []string{"Bearer " + sign(good), "Bearer " + sign(good)}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "garbage", auth: []string{"Bearer garbage"}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "garbage in three parts", auth: []string{"Bearer a.b.c"}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "too long", auth: []string{"Bearer " + strings.Repeat("a", 20<<10)}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "alg none", auth: []string{"Bearer " + mint(t, with(goodHeader(), map[string]any{"alg": "none"}), good, nil)}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "alg HS256", auth: []string{"Bearer " + mint(t, with(goodHeader(), map[string]any{"alg": "HS256"}), good, keys.google)}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		// idtoken would index a short ES256 signature out of range.
		{name: "alg ES256 with a short signature", auth: []string{"Bearer " + strings.TrimSuffix(mint(t, with(goodHeader(), map[string]any{"alg": "ES256"}), good, nil), ".") + ".AAAA"}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "no key ID", auth: []string{"Bearer " + mint(t, with(goodHeader(), map[string]any{"kid": nil}), good, keys.google)}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "exp not a number", auth: []string{"Bearer " + sign(with(good, map[string]any{"exp": "tomorrow"}))}, status: 401, reason: pushauth.ErrMalformedToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "expired", auth: []string{"Bearer " + sign(with(good, map[string]any{"exp": past}))}, status: 401, reason: pushauth.ErrExpiredToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "no expiry", auth: []string{"Bearer " + sign(with(good, map[string]any{"exp": nil}))}, status: 401, reason: pushauth.ErrExpiredToken, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "signed by another key with the same kid", auth: []string{"Bearer " + mint(t, goodHeader(), good, keys.impostor)}, status: 401, reason: pushauth.ErrBadSignature, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "unknown kid", auth: []string{"Bearer " + mint(t, with(goodHeader(), map[string]any{"kid": "k2"}), good, keys.google)}, status: 401, reason: pushauth.ErrBadSignature, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		{name: "claims changed after signing", auth: []string{"Bearer " + swapPayload(t, sign(good), with(good, map[string]any{"email": "attacker@example.com"}))}, status: 401, reason: pushauth.ErrBadSignature, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},
		// An impostor's token with a wrong audience is a signature problem
		// first: the audience of an unverified token means nothing.
		{name: "bad signature and wrong audience", auth: []string{"Bearer " + mint(t, goodHeader(), with(good, map[string]any{"aud": "https://other/"}), keys.impostor)}, status: 401, reason: pushauth.ErrBadSignature, wwwAuth: `Bearer error="invalid_token"`, logLevel: "WARN"},

		{name: "wrong audience", auth: []string{"Bearer " + sign(with(good, map[string]any{"aud": "https://other-service.run.app/"}))}, status: 403, reason: pushauth.ErrWrongAudience, logLevel: "WARN"},
		{name: "audience without trailing slash", auth: []string{"Bearer " + sign(with(good, map[string]any{"aud": strings.TrimSuffix(testAudience, "/")}))}, status: 403, reason: pushauth.ErrWrongAudience, logLevel: "WARN"},
		{name: "wrong issuer", auth: []string{"Bearer " + sign(with(good, map[string]any{"iss": "https://securetoken.google.com/my-project"}))}, status: 403, reason: pushauth.ErrWrongIssuer, logLevel: "WARN"},
		{name: "wrong email", auth: []string{"Bearer " + sign(with(good, map[string]any{"email": "someone-else@my-project.iam.gserviceaccount.com"}))}, status: 403, reason: pushauth.ErrWrongEmail, logLevel: "WARN"},
		{name: "no email", auth: []string{"Bearer " + sign(with(good, map[string]any{"email": nil}))}, status: 403, reason: pushauth.ErrWrongEmail, logLevel: "WARN"},
		{name: "unverified email", auth: []string{"Bearer " + sign(with(good, map[string]any{"email_verified": false}))}, status: 403, reason: pushauth.ErrEmailNotVerified, logLevel: "WARN"},
		{name: "no email_verified", auth: []string{"Bearer " + sign(with(good, map[string]any{"email_verified": nil}))}, status: 403, reason: pushauth.ErrEmailNotVerified, logLevel: "WARN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, logs := newVerifier(t, validatorFor(t, googleCerts(t)))
			got := serve(t, v, tt.auth)
			if got.code != tt.status {
				t.Fatalf("status %d, want %d (body %q)", got.code, tt.status, got.body)
			}
			if tt.status == 200 {
				if !strings.EqualFold(got.email, testEmail) {
					t.Errorf("next saw payload email %q, want the verified payload in the context", got.email)
				}
				if recs := logs.Records(); len(recs) != 0 {
					t.Errorf("an accepted request logged:\n%s", recs)
				}
				return
			}
			if got.nextCalled {
				t.Error("next ran for a rejected request")
			}
			if want := tt.reason.Error(); !strings.HasPrefix(got.body, want) || strings.Count(got.body, "\n") != 1 {
				t.Errorf("body %q, want one line starting %q", got.body, want)
			}
			if got.wwwAuth != tt.wwwAuth {
				t.Errorf("WWW-Authenticate %q, want %q", got.wwwAuth, tt.wwwAuth)
			}
			recs := logs.Records()
			if len(recs) != 1 || recs[0].Level.String() != tt.logLevel {
				t.Errorf("want one %s log line, got:\n%s", tt.logLevel, recs)
			}
			line := recs.String()
			for _, a := range tt.auth {
				assertNoToken(t, a, got.body, line)
			}
		})
	}
}

// TestKeysUnavailable: when Google's keys cannot be fetched the token could
// not be checked, which is not the caller's fault: 503, logged at ERROR.
func TestKeysUnavailable(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "backend error", http.StatusInternalServerError)
	}))
	defer failing.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedValidator := validatorFor(t, closed)
	closed.Close()
	notJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }))
	defer notJSON.Close()

	token := mint(t, goodHeader(), goodClaims(), testKeys().google)
	for name, val := range map[string]pushauth.TokenValidator{
		"certs answer 500":      validatorFor(t, failing),
		"certs unreachable":     closedValidator,
		"certs not JSON":        validatorFor(t, notJSON),
		"custom validator says": validatorFunc(func() error { return pushauth.ErrKeysUnavailable }),
	} {
		t.Run(name, func(t *testing.T) {
			v, logs := newVerifier(t, val)
			got := serve(t, v, []string{"Bearer " + token})
			if got.code != http.StatusServiceUnavailable || got.body != pushauth.ErrKeysUnavailable.Error()+"\n" {
				t.Errorf("got %d %q, want 503 %q", got.code, got.body, pushauth.ErrKeysUnavailable)
			}
			if len(logs.Records().Level(slog.LevelError)) != 1 {
				t.Errorf("want an ERROR line, got:\n%s", logs.Records())
			}
			assertNoToken(t, token, got.body, logs.Records().String())
		})
	}
}

type served struct {
	code       int
	body       string
	wwwAuth    string
	nextCalled bool
	email      string // of the payload next found in its context
}

func serve(t *testing.T, v *pushauth.Verifier, auth []string) served {
	t.Helper()
	var s served
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.nextCalled = true
		if p, ok := pushauth.FromContext(r.Context()); ok {
			s.email, _ = p.Claims["email"].(string)
		}
		w.WriteHeader(http.StatusOK)
	}))
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"message":{}}`))
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	s.code, s.body, s.wwwAuth = rec.Code, rec.Body.String(), rec.Header().Get("WWW-Authenticate")
	return s
}

// assertNoToken fails t if the token in an Authorization value, or its
// signature, appears in any of texts.
func assertNoToken(t *testing.T, auth string, texts ...string) {
	t.Helper()
	_, token, _ := strings.Cut(auth, " ")
	secrets := []string{token}
	if i := strings.LastIndexByte(token, '.'); i >= 0 && len(token)-i > 8 {
		secrets = append(secrets, token[i+1:])
	}
	for _, text := range texts {
		for _, s := range secrets {
			if len(s) >= 16 && strings.Contains(text, s) {
				t.Errorf("the token leaked into %q", text)
			}
		}
	}
}

// swapPayload replaces the payload of a signed token, keeping header and
// signature.
func swapPayload(t *testing.T, token string, claims map[string]any) string {
	parts := strings.Split(token, ".")
	other := strings.Split(mint(t, goodHeader(), claims, nil), ".")
	return parts[0] + "." + other[1] + "." + parts[2]
}
