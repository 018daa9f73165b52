package pushauth

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"google.golang.org/api/idtoken"
)

// Middleware returns a handler that passes a request to next only when
// Verify accepts its token; next finds the payload with FromContext. A
// rejected request gets a one-line reason without the token, is logged
// (WARN, ERROR for 503), and is answered 401 with WWW-Authenticate for an
// invalid token, 403 for a valid token not from the subscription, 503 when
// Google's keys are unavailable. Pub/Sub retries each of them, so a
// misconfigured verifier delays messages but loses none.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := v.Verify(r.Context(), r.Header)
		if err != nil {
			v.reject(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}

func (v *Verifier) reject(w http.ResponseWriter, r *http.Request, err error) {
	code := status(err)
	level := slog.LevelWarn
	switch {
	case code == http.StatusServiceUnavailable:
		level = slog.LevelError
	case errors.Is(err, ErrNoToken):
		w.Header().Set("WWW-Authenticate", "Bearer")
	case code == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	v.log.LogAttrs(r.Context(), level, "pushauth: push request rejected",
		slog.Int("status", code), slog.String("path", r.URL.Path),
		slog.String("user_agent", r.UserAgent()), slog.String("error", err.Error()))
	http.Error(w, reason(err), code)
}

// reason is the one line a rejected caller reads: the sentinel's text, with
// detail only for malformed tokens (never quoting the token).
func reason(err error) string {
	for _, s := range []error{ErrNoToken, ErrExpiredToken, ErrBadSignature, ErrWrongIssuer,
		ErrWrongAudience, ErrWrongEmail, ErrEmailNotVerified, ErrKeysUnavailable} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return err.Error()
}

type ctxKey struct{}

// NewContext returns a context that carries the verified payload p.
func NewContext(ctx context.Context, p *idtoken.Payload) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the payload the Middleware verified: the caller's
// identity (Claims["email"]), the audience, the expiry.
func FromContext(ctx context.Context) (*idtoken.Payload, bool) {
	p, ok := ctx.Value(ctxKey{}).(*idtoken.Payload)
	return p, ok
}
