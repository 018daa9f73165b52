package record

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/store"
)

// EncodeCursor makes an opaque list cursor of parts, which must hold no
// NUL byte (keys never do).
func EncodeCursor(parts ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(parts, "\x00")))
}

// DecodeCursor returns the n parts of a cursor made by EncodeCursor, or an
// error wrapping store.ErrInvalidCursor.
func DecodeCursor(c string, n int) ([]string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	parts := strings.Split(string(b), "\x00")
	if err != nil || len(parts) != n {
		return nil, fmt.Errorf("%w %.40q", store.ErrInvalidCursor, c)
	}
	return parts, nil
}
