package pushenvelope

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
)

// DefaultMaxBytes is the body size limit used when Decode is given 0 (or less).
const DefaultMaxBytes = 16 << 20

// preallocMax caps the buffer Decode sizes from Content-Length before any
// byte has arrived, so that a request announcing a large body it never sends
// cannot make each connection hold the whole limit.
const preallocMax = 1 << 20

// Decode reads r's body (at most maxBytes; 0 or less means DefaultMaxBytes),
// decodes it into a Message and restores r.Body so the next handler can read
// the same bytes. Errors wrap ErrNotPush, or are a *TooLargeError, or come from
// reading the body.
func Decode(r *http.Request, maxBytes int64) (*Message, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	maxBytes = min(maxBytes, math.MaxInt64-1) // readBody reads maxBytes+1
	// A declared length over the limit fails before reading anything.
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

// restoredBody is the body Decode puts back: the bytes it read, readable
// again from the start (one allocation where io.NopCloser(bytes.NewReader)
// takes two).
type restoredBody struct {
	bytes.Reader
	data []byte
}

// Close does nothing: the bytes are in memory.
func (*restoredBody) Close() error { return nil }

// again is the request's GetBody: a fresh reader over the same bytes.
func (b *restoredBody) again() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.data)), nil
}

// readBody reads all of rd, failing with *TooLargeError past limit bytes.
// It reads at most limit+1 bytes, the one extra telling "exactly limit" from
// "more". hint is the Content-Length (-1 when unknown).
func readBody(rd io.Reader, limit, hint int64) ([]byte, error) {
	size := int64(512)
	if hint >= 0 {
		// +1 leaves room for the read that reports EOF, so a body whose
		// length was announced is read without growing the buffer.
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
			// An http.MaxBytesReader put in front by the caller is a limit too.
			if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return nil, &TooLargeError{Limit: mbe.Limit}
			}
			return nil, fmt.Errorf("pushenvelope: read body: %w", err)
		}
	}
}

// The headers and media type that select a form (canonical header names,
// as net/http stores them).
const (
	// headerMessageID is Pub/Sub's write-metadata header on an unwrapped push.
	headerMessageID = "X-Goog-Pubsub-Message-Id"
	// headerSpecVersion marks a binary-mode CloudEvent.
	headerSpecVersion = "Ce-Specversion"
	// structuredMediaType is the Content-Type of a structured-mode CloudEvent.
	structuredMediaType = "application/cloudevents+json"
)

// Parse decodes a delivery from its headers and body. It never panics.
// The returned Message's Data may share memory with body.
//
// The form is chosen from the headers first and the body second; the package
// documentation lists the rules. Errors wrap ErrNotPush and say in one line
// why the request is not a delivery.
func Parse(h http.Header, body []byte) (*Message, error) {
	// The one place the form is decided; each form's file (wrapped.go,
	// unwrapped.go, cloudevent.go) then decodes it. The numbers are the
	// rules of the package documentation, which says why they come in this
	// order.
	// 1. Unwrapped push: Pub/Sub's message id header, even next to
	// CloudEvents headers (attributes of an unwrapped message); its body is
	// the raw data, unless it is the wrapped envelope of that very message.
	if ids, ok := h[headerMessageID]; ok {
		id := ""
		if len(ids) > 0 {
			id = ids[0]
		}
		if m := wrappedEnvelope(body, id); m != nil {
			return m, nil
		}
		return parseUnwrapped(h, id, body)
	}
	// 2. Binary CloudEvent: its attributes travel as ce-* headers.
	if _, ok := h[headerSpecVersion]; ok {
		return parseBinaryEvent(h, body)
	}
	// 3. Structured CloudEvent: its media type, parameters ignored.
	ct := h.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if strings.EqualFold(strings.TrimSpace(ct), structuredMediaType) {
		return parseStructuredEvent(body)
	}
	// 4. Wrapped push: a JSON object with a message object.
	return parseWrapped(body)
}
