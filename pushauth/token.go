package pushauth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/api/idtoken"
)

// maxTokenLen bounds the bearer tokens looked at. Google's ID tokens are
// about a kilobyte.
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

// jwtHeader is the part of a JWT header that is checked before the
// signature.
type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// inspect checks the shape of a JWT before its signature is verified: three
// base64url parts, a header naming RS256 and a key, a payload that decodes
// the way the validator decodes it, a signature. Only RS256 passes: Google
// signs ID tokens with it, and refusing every other algorithm here keeps
// tokens that claim "none", HS256 or ES256 away from the validator. It
// returns the unverified payload, for its expiry. Error details never quote
// the token.
func inspect(token string) (*idtoken.Payload, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not three dot-separated parts", ErrMalformedToken)
	}
	var h jwtHeader
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

// decodePart decodes one base64url JSON part of a JWT into v. Its errors
// say what was wrong without quoting the input.
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
