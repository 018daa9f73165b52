package pushauth_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/api/idtoken"

	"github.com/idemgate/idemgate/internal/logtest"
	"github.com/idemgate/idemgate/pushauth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testAudience = "https://orders-abc123-ew.a.run.app/"
	testEmail    = "pubsub-push@my-project.iam.gserviceaccount.com"
	testKID      = "k1"
)

// testKeys are Google's signing key (the JWKS serves it) and an impostor's.
var testKeys = sync.OnceValue(func() (keys struct{ google, impostor *rsa.PrivateKey }) {
	var err error
	if keys.google, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	if keys.impostor, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	return keys
})

// googleCerts serves a JWKS with the test signing key under testKID, the
// way https://www.googleapis.com/oauth2/v3/certs serves Google's.
func googleCerts(t testing.TB) *httptest.Server {
	t.Helper()
	pub := testKeys().google.PublicKey
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": testKID,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth2/v3/certs" {
			t.Errorf("the validator fetched %s, want Google's RS256 certs", r.URL)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(jwks)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// validatorFor returns a real idtoken validator whose requests for
// Google's keys go to srv instead.
func validatorFor(t testing.TB, srv *httptest.Server) *idtoken.Validator {
	t.Helper()
	target, _ := url.Parse(srv.URL)
	client := &http.Client{Transport: rewrite{target: target, base: srv.Client().Transport}}
	v, err := idtoken.NewValidator(context.Background(), idtoken.WithHTTPClient(client))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rewrite sends every request to target's scheme and host.
type rewrite struct {
	target *url.URL
	base   http.RoundTripper
}

func (rt rewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = rt.target.Scheme, rt.target.Host, ""
	return rt.base.RoundTrip(r)
}

// newVerifier returns a Verifier for testAudience and testEmail over
// validator, logging into the returned sink.
func newVerifier(t testing.TB, validator pushauth.TokenValidator) (*pushauth.Verifier, *logtest.Sink) {
	t.Helper()
	logs := &logtest.Sink{}
	v, err := pushauth.New(&pushauth.Options{
		Audience:            testAudience,
		ServiceAccountEmail: testEmail,
		Validator:           validator,
		Logger:              logs.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return v, logs
}

// goodClaims are the claims of a token Pub/Sub sends, as the push
// subscription of the tests would.
func goodClaims() map[string]any {
	now := time.Now()
	return map[string]any{
		"iss":            "https://accounts.google.com",
		"aud":            testAudience,
		"azp":            "1122334455",
		"sub":            "1122334455",
		"email":          testEmail,
		"email_verified": true,
		"iat":            now.Unix(),
		"exp":            now.Add(time.Hour).Unix(),
	}
}

func goodHeader() map[string]any { return map[string]any{"alg": "RS256", "kid": testKID, "typ": "JWT"} }

// mint builds a JWT with header and claims, signed with RS256 by key (nil:
// no signature).
func mint(t testing.TB, header, claims map[string]any, key *rsa.PrivateKey) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := b64(h) + "." + b64(p)
	if key == nil {
		return signed + "."
	}
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + b64(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// with returns a copy of m with the given changes; a nil value deletes.
func with(m map[string]any, changes map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}
