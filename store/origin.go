package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxOriginLen is the longest origin, in bytes, that stores keep.
const MaxOriginLen = 128

// ErrInvalidOrigin is wrapped by the error of [CheckOrigin].
var ErrInvalidOrigin = errors.New("store: invalid origin")

// CheckOrigin reports whether origin can be stored: at most [MaxOriginLen]
// bytes of UTF-8 without control characters, so that it prints as one line
// wherever it is shown. Stores return its error unchanged from Claim.
func CheckOrigin(origin string) error {
	return checkLine(ErrInvalidOrigin, origin, MaxOriginLen)
}

// checkLine reports, wrapping kind, whether s is at most limit bytes of
// UTF-8 without control characters.
func checkLine(kind error, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%w: %d bytes, longer than %d", kind, len(s), limit)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %q is not UTF-8", kind, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %q holds a control character", kind, s)
		}
	}
	return nil
}

// MakeOrigin joins surface and id into an origin that [CheckOrigin]
// accepts, as "surface/id": an id too long is cut short (on a character
// boundary, marked with "…"), bytes that are not UTF-8 and control
// characters become U+FFFD. An empty id gives surface alone; an empty
// surface, id alone.
func MakeOrigin(surface, id string) string {
	if len(surface)+1+len(id) <= MaxOriginLen && surface != "" && id != "" && printableASCII(surface) && printableASCII(id) {
		return surface + "/" + id // the common case: one allocation
	}
	o := id
	if surface != "" {
		o = surface
		if id != "" {
			o += "/" + id
		}
	}
	return printable(o, MaxOriginLen)
}

// printable returns s as one printable line of at most limit bytes: bytes
// that are not UTF-8 and control characters become U+FFFD, and a longer
// text is cut short on a character boundary, marked with "…".
func printable(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// printableASCII reports whether s is all printable ASCII.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
