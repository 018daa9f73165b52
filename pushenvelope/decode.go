package pushenvelope

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
)

// DefaultMaxBytes is the body size limit used when Decode is given 0 (or less).
const DefaultMaxBytes = 16 << 20

// preallocMax caps the buffer sized from Content-Length, so a request
// announcing a body it never sends holds no more.
const preallocMax = 1 << 20

// Decode reads r's body (at most maxBytes; 0 or less means DefaultMaxBytes),
// decodes it with Parse and restores r.Body so the next handler reads the
// same bytes. Errors wrap ErrNotPush, are a *TooLargeError (also for an
// http.MaxBytesReader in front), or come from reading the body.
func Decode(r *http.Request, maxBytes int64) (*Message, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	maxBytes = min(maxBytes, math.MaxInt64-1) // readBody reads maxBytes+1
	if r.ContentLength > maxBytes {
		return nil, &TooLargeError{Limit: maxBytes}
	}
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = readBody(r.Body, maxBytes, r.ContentLength); err != nil {
			return nil, err
		}
	}
	rb := &restoredBody{data: body}
	rb.Reset(body)
	r.Body, r.GetBody = rb, rb.again
	r.ContentLength = int64(len(body))
	return Parse(r.Header, body)
}

// restoredBody is the body Decode puts back, in one allocation.
type restoredBody struct {
	bytes.Reader
	data []byte
}

func (*restoredBody) Close() error { return nil }

func (b *restoredBody) again() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.data)), nil
}

// readBody reads all of rd, failing with *TooLargeError past limit bytes
// (it reads limit+1 to tell). hint is the Content-Length, -1 if unknown.
func readBody(rd io.Reader, limit, hint int64) ([]byte, error) {
	size := int64(512)
	if hint >= 0 {
		// +1 for the read that reports EOF, so the buffer never grows.
		size = min(hint+1, limit+1, preallocMax)
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := min(int64(cap(buf)-len(buf)), limit+1-int64(len(buf)))
		n, err := rd.Read(buf[len(buf) : len(buf)+int(room)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &TooLargeError{Limit: limit}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return nil, &TooLargeError{Limit: mbe.Limit}
			}
			return nil, fmt.Errorf("pushenvelope: read body: %w", err)
		}
	}
}

// The headers and media type that select a form, in canonical form.
const (
	headerMessageID     = "X-Goog-Pubsub-Message-Id" // an unwrapped push
	headerSpecVersion   = "Ce-Specversion"           // a binary CloudEvent
	structuredMediaType = "application/cloudevents+json"
)

// Parse decodes a delivery from its headers and body, choosing the form by
// the package's rules. It never panics; Data may share memory with body.
// Errors wrap ErrNotPush.
func Parse(h http.Header, body []byte) (*Message, error) {
	switch formOf(h) {
	case Unwrapped:
		id := h.Get(headerMessageID)
		if m := wrappedEnvelope(body, id); m != nil {
			return m, nil
		}
		return parseUnwrapped(h, id, body)
	case CloudEventBinary:
		return parseBinaryEvent(h, body)
	case CloudEventStructured:
		return parseStructuredEvent(body)
	}
	return parseWrapped(body)
}
