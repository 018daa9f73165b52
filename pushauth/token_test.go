package pushauth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		name    string
		values  []string
		want    string
		wantErr error
	}{
		{"bearer", []string{"Bearer a.b.c"}, "a.b.c", nil},
		{"any case", []string{"bEaReR a.b.c"}, "a.b.c", nil},
		{"extra spaces", []string{"  Bearer   a.b.c  "}, "a.b.c", nil},
		{"none", nil, "", ErrNoToken},
		{"empty", []string{""}, "", ErrNoToken},
		{"basic", []string{"Basic dXNlcjpwYXNz"}, "", ErrNoToken},
		{"scheme only", []string{"Bearer"}, "", ErrMalformedToken},
		{"scheme and spaces", []string{"Bearer    "}, "", ErrMalformedToken},
		{"token only", []string{"a.b.c"}, "", ErrNoToken},
		{"two headers", []string{"Bearer a.b.c", "Bearer a.b.c"}, "", ErrMalformedToken},
		{"longest", []string{"Bearer " + strings.Repeat("a", maxTokenLen)}, strings.Repeat("a", maxTokenLen), nil},
		{"too long", []string{"Bearer " + strings.Repeat("a", maxTokenLen+1)}, "", ErrMalformedToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bearerToken(tt.values)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tt.values, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestInspect(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	hdr := enc(`{"alg":"RS256","kid":"k1","typ":"JWT"}`)
	payload := enc(`{"iss":"https://accounts.google.com","exp":1700000000}`)
	sig := enc("signature")
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"well formed", hdr + "." + payload + "." + sig, true},
		{"two parts", hdr + "." + payload, false},
		{"four parts", hdr + "." + payload + "." + sig + "." + sig, false},
		{"padded header", base64.URLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"k1"}`)) + "." + payload + "." + sig, false},
		{"header not JSON", enc("RS256") + "." + payload + "." + sig, false},
		{"header an array", enc(`["RS256"]`) + "." + payload + "." + sig, false},
		{"alg none", enc(`{"alg":"none","kid":"k1"}`) + "." + payload + "." + sig, false},
		{"alg lower case", enc(`{"alg":"rs256","kid":"k1"}`) + "." + payload + "." + sig, false},
		{"no kid", enc(`{"alg":"RS256"}`) + "." + payload + "." + sig, false},
		{"payload not JSON", hdr + "." + enc("{") + "." + sig, false},
		{"exp a string", hdr + "." + enc(`{"exp":"soon"}`) + "." + sig, false},
		{"aud a list", hdr + "." + enc(`{"aud":["a","b"],"exp":1}`) + "." + sig, false},
		{"no signature", hdr + "." + payload + ".", false},
		{"signature not base64url", hdr + "." + payload + ".a+b/", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := inspect(tt.token)
			if tt.ok != (err == nil) {
				t.Fatalf("inspect = %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrMalformedToken) {
					t.Errorf("error %v does not wrap ErrMalformedToken", err)
				}
				return
			}
			if p.Expires != 1700000000 {
				t.Errorf("exp = %d, want the payload's", p.Expires)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	token := "aGVhZGVy.cGF5bG9hZA.c2lnbmF0dXJlLWJ5dGVz"
	for _, s := range []string{
		"bad token " + token,
		"bad signature c2lnbmF0dXJlLWJ5dGVz",
	} {
		if got := redact(s, token); strings.Contains(got, "c2lnbmF0dXJlLWJ5dGVz") {
			t.Errorf("redact(%q) = %q, still has the signature", s, got)
		}
	}
}

// FuzzAuthorization feeds arbitrary Authorization headers to the parsing
// that runs before any signature check: it must never panic, and what it
// accepts must be a well-formed RS256 JWT.
func FuzzAuthorization(f *testing.F) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	good := enc(`{"alg":"RS256","kid":"k1"}`) + "." + enc(`{"exp":1,"aud":"x","email":"a@b"}`) + "." + enc("sig")
	for _, seed := range []string{
		"", "Bearer", "Bearer ", "Basic abc", "Bearer " + good, "bearer  " + good + " ",
		"Bearer " + enc(`{"alg":"none"}`) + "." + enc(`{}`) + ".",
		"Bearer " + enc(`{"alg":"ES256","kid":"k"}`) + "." + enc(`{}`) + ".AA",
		"Bearer ...", "Bearer a.b.c", "Bearer \x00.\xff.\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		token, err := bearerToken([]string{header})
		if err != nil {
			if !errors.Is(err, ErrNoToken) && !errors.Is(err, ErrMalformedToken) {
				t.Fatalf("bearerToken error %v wraps neither ErrNoToken nor ErrMalformedToken", err)
			}
			return
		}
		if token == "" || len(token) > maxTokenLen || strings.TrimSpace(token) != token {
			t.Fatalf("bearerToken accepted %q", token)
		}
		p, err := inspect(token)
		if err != nil {
			if !errors.Is(err, ErrMalformedToken) {
				t.Fatalf("inspect error %v does not wrap ErrMalformedToken", err)
			}
			// (Error texts have no dots, so a token with one cannot match
			// them by chance.)
			if strings.Contains(token, ".") && strings.Contains(err.Error(), token) {
				t.Fatalf("inspect error quotes the token: %v", err)
			}
			return
		}
		if p == nil || strings.Count(token, ".") != 2 {
			t.Fatalf("inspect accepted %q", token)
		}
	})
}
