package pushauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/api/idtoken"
)

// TokenValidator checks a Google-signed ID token's signature, expiry, and
// aud claim when audience is not empty; *idtoken.Validator is one. An
// error wrapping ErrKeysUnavailable means it could not check (503); any
// other, that the token is not valid (401).
type TokenValidator interface {
	Validate(ctx context.Context, token, audience string) (*idtoken.Payload, error)
}

var _ TokenValidator = (*idtoken.Validator)(nil)

// Options configures a Verifier. Audience and ServiceAccountEmail are
// required; the other fields have defaults.
type Options struct {
	// Audience is the aud claim the push subscription puts in its tokens:
	// its --push-auth-token-audience, or, when it sets none, the push
	// endpoint URL exactly as configured. Compared exactly.
	Audience string

	// ServiceAccountEmail is the service account the push subscription
	// signs its tokens as (--push-auth-service-account), compared without
	// regard to ASCII case. Required: the audience alone proves nothing.
	ServiceAccountEmail string

	// Validator checks signatures and expiry. Default idtoken.NewValidator's.
	Validator TokenValidator

	// Logger receives one line per rejected request, without the token.
	// Default slog.Default().
	Logger *slog.Logger
}

// Verifier checks the OIDC tokens Pub/Sub push subscriptions send. It is
// safe for concurrent use.
type Verifier struct {
	audience  string
	email     string
	validator TokenValidator
	log       *slog.Logger
}

// New returns a Verifier for opts. It fails when opts is nil or Audience
// or ServiceAccountEmail is empty. It makes no request: the default
// validator fetches Google's keys when the first token arrives.
func New(opts *Options) (*Verifier, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Audience == "" {
		return nil, errors.New("pushauth: Audience is required: the push subscription's token audience, or its endpoint URL")
	}
	if o.ServiceAccountEmail == "" {
		return nil, errors.New("pushauth: ServiceAccountEmail is required: the service account the push subscription signs tokens as")
	}
	v := &Verifier{audience: o.Audience, email: o.ServiceAccountEmail, validator: o.Validator, log: o.Logger}
	if v.validator == nil {
		// Building it reads no credentials and makes no request.
		val, err := idtoken.NewValidator(context.Background())
		if err != nil {
			return nil, fmt.Errorf("pushauth: %w", err)
		}
		v.validator = val
	}
	if v.log == nil {
		v.log = slog.Default()
	}
	return v, nil
}

// Verify checks the bearer token in header and returns its verified
// payload. It checks, in this order, so that no claim is read before the
// signature holds: one Bearer Authorization header (ErrNoToken,
// ErrMalformedToken); an RS256 JWT with a key ID (ErrMalformedToken), not
// expired (ErrExpiredToken); Google's signature (ErrBadSignature,
// ErrKeysUnavailable); issuer (ErrWrongIssuer); Options.Audience
// (ErrWrongAudience); Options.ServiceAccountEmail (ErrWrongEmail) with
// email_verified (ErrEmailNotVerified). Errors never contain the token.
func (v *Verifier) Verify(ctx context.Context, header http.Header) (*idtoken.Payload, error) {
	token, err := bearerToken(header.Values("Authorization"))
	if err != nil {
		return nil, err
	}
	unverified, err := inspect(token)
	if err != nil {
		return nil, err
	}
	if time.Now().Unix() >= unverified.Expires { // RFC 7519: now must be before exp
		return nil, ErrExpiredToken
	}
	// "": the audience is checked below, after the signature.
	p, err := v.validator.Validate(ctx, token, "")
	if err != nil {
		return nil, classify(err, token)
	}
	if p == nil { // a validator's bug: fail closed
		return nil, fmt.Errorf("%w: the token validator returned no payload and no error", ErrBadSignature)
	}
	if p.Issuer != "accounts.google.com" && p.Issuer != "https://accounts.google.com" {
		return nil, fmt.Errorf("%w: iss is %q", ErrWrongIssuer, p.Issuer)
	}
	if p.Audience != v.audience {
		return nil, fmt.Errorf("%w: aud is %q, want %q", ErrWrongAudience, p.Audience, v.audience)
	}
	email, _ := p.Claims["email"].(string)
	if !asciiEqualFold(email, v.email) {
		return nil, fmt.Errorf("%w: email is %q, want %q", ErrWrongEmail, email, v.email)
	}
	if !isTrue(p.Claims["email_verified"]) {
		return nil, fmt.Errorf("%w: email_verified is %v", ErrEmailNotVerified, p.Claims["email_verified"])
	}
	return p, nil
}

// classify turns a validator's error into one of this package's, the token
// scrubbed from its text.
func classify(err error, token string) error {
	var (
		urlErr    *url.Error
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	text := redact(err.Error(), token)
	switch {
	// Fetching or decoding Google's keys failed (idtoken returns its own
	// status error as text).
	case errors.Is(err, ErrKeysUnavailable), errors.As(err, &urlErr),
		errors.As(err, &syntaxErr), errors.As(err, &typeErr), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		strings.HasPrefix(text, "idtoken: unable to retrieve cert"):
		return fmt.Errorf("%w: %s", ErrKeysUnavailable, text)
	case strings.Contains(text, "token expired"): // expired since inspect looked
		return fmt.Errorf("%w: %s", ErrExpiredToken, text)
	}
	return fmt.Errorf("%w: %s", ErrBadSignature, text)
}

// isTrue reports whether an email_verified claim says yes. Google's tokens
// carry a JSON boolean; some older ones carried the string "true".
func isTrue(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return v == "true"
	}
	return false
}

// redact removes token, and its signature on its own, from s.
func redact(s, token string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "[token]")
	if i := strings.LastIndexByte(token, '.'); i >= 0 && len(token)-i > 8 {
		s = strings.ReplaceAll(s, token[i+1:], "[signature]")
	}
	return s
}

// asciiEqualFold reports whether a and b are equal but for ASCII case.
// strings.EqualFold would take the long s (U+017F) for an "s".
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
