package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that stores accept.
const MaxKeyLen = 64 << 10

// ErrInvalidKey is wrapped by the error of [CheckKey].
var ErrInvalidKey = errors.New("store: invalid key")

// CheckKey reports whether key is usable: non-empty, valid UTF-8, without NUL
// bytes and at most MaxKeyLen bytes. The error wraps ErrInvalidKey.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalidKey)
	}
	return nil
}

// QuoteKey is how every store of this module names key in an error: %q,
// cut after its first 64 bytes with its length, as in
// "customer:alice@example.com/…"…(200 bytes), so that a long key does not
// fill a log line and a caller hiding keys (HideKeys) can find and replace it.
func QuoteKey(key string) string {
	const max = 64
	if len(key) <= max {
		return strconv.Quote(key)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return strconv.Quote(key[:cut]) + "…(" + strconv.Itoa(len(key)) + " bytes)"
}
