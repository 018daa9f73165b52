package pushauth

import (
	"errors"
	"net/http"
)

// The reasons Verify rejects a request. Each error Verify returns wraps
// exactly one of them; the Middleware answers with the status noted.
var (
	// ErrNoToken: no Authorization header with the Bearer scheme. 401.
	ErrNoToken = errors.New("pushauth: no bearer token")
	// ErrMalformedToken: not a JWT signed with RS256 (Google's only). 401.
	ErrMalformedToken = errors.New("pushauth: malformed token")
	// ErrExpiredToken: the token has reached its expiry (exp). 401.
	ErrExpiredToken = errors.New("pushauth: token expired")
	// ErrBadSignature: not signed by one of Google's current keys. 401.
	ErrBadSignature = errors.New("pushauth: token signature not valid")
	// ErrWrongIssuer: a valid token not issued by Google's accounts service. 403.
	ErrWrongIssuer = errors.New("pushauth: token issuer not accepted")
	// ErrWrongAudience: a valid token minted for another audience. 403.
	ErrWrongAudience = errors.New("pushauth: token audience not accepted")
	// ErrWrongEmail: a valid token not of the subscription's service account. 403.
	ErrWrongEmail = errors.New("pushauth: token email not accepted")
	// ErrEmailNotVerified: a valid token whose email Google does not vouch for. 403.
	ErrEmailNotVerified = errors.New("pushauth: token email not verified")
	// ErrKeysUnavailable: Google's keys could not be fetched. 503, which
	// Pub/Sub retries; a custom TokenValidator wraps it for the same.
	ErrKeysUnavailable = errors.New("pushauth: cannot verify tokens now: Google's signing keys are unavailable")
)

// status is the HTTP status the Middleware answers for an error of Verify.
func status(err error) int {
	switch {
	case errors.Is(err, ErrKeysUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrWrongIssuer), errors.Is(err, ErrWrongAudience),
		errors.Is(err, ErrWrongEmail), errors.Is(err, ErrEmailNotVerified):
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}
