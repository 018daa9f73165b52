package pushauth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/api/idtoken"
)

// maxTokenLen bounds the bearer tokens looked at (Google's are about 1 KiB).
const maxTokenLen = 16 << 10

// bearerToken returns the token of the one Authorization header in values,
// which must use the Bearer scheme (any case, RFC 6750).
func bearerToken(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrNoToken
	case 1:
	default:
		return "", fmt.Errorf("%w: more than one Authorization header", ErrMalformedToken)
	}
	scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrNoToken
	}
	token = strings.TrimSpace(token)
	switch {
	case token == "":
		return "", fmt.Errorf("%w: empty bearer token", ErrMalformedToken)
	case len(token) > maxTokenLen:
		return "", fmt.Errorf("%w: longer than %d bytes", ErrMalformedToken, maxTokenLen)
	}
	return token, nil
}

// inspect checks a JWT's shape before its signature: three base64url
// parts, a header naming RS256 (so "none", HS256 and ES256 never reach the
// validator) and a key. It returns the unverified payload.
func inspect(token string) (*idtoken.Payload, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not three dot-separated parts", ErrMalformedToken)
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodePart(parts[0], &h); err != nil {
		return nil, fmt.Errorf("%w: header %s", ErrMalformedToken, err)
	}
	if h.Alg != "RS256" {
		return nil, fmt.Errorf("%w: signing algorithm is not RS256", ErrMalformedToken)
	}
	if h.Kid == "" {
		return nil, fmt.Errorf("%w: no key ID", ErrMalformedToken)
	}
	var p idtoken.Payload
	if err := decodePart(parts[1], &p); err != nil {
		return nil, fmt.Errorf("%w: payload %s", ErrMalformedToken, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) == 0 {
		return nil, fmt.Errorf("%w: signature is not base64url", ErrMalformedToken)
	}
	return &p, nil
}

// decodePart decodes a base64url JSON part of a JWT into v, with errors
// that do not quote it.
func decodePart(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return errors.New("is not base64url")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("is not a JSON object of the expected types")
	}
	return nil
}
