package pushenvelope_test

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/pushenvelope"
)

// fixtureDir holds one delivery per file, shared with the gateway's tests.
const fixtureDir = "../testdata/push"

// A fixture is a delivery stored as an .http file: a request line, header
// lines, a blank line, then the body exactly as sent, minus the one newline
// that ends the file.
type fixture struct {
	name   string
	method string
	target string
	head   string // the header lines, as written
	header http.Header
	body   []byte
}

func readFixture(tb testing.TB, name string) fixture {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if err != nil {
		tb.Fatal(err)
	}
	head, body, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		tb.Fatalf("%s: no blank line after the headers", name)
	}
	requestLine, headerLines, _ := strings.Cut(string(head), "\n")
	method, target, _ := strings.Cut(requestLine, " ")
	target, _, _ = strings.Cut(target, " ")
	mime, err := textproto.NewReader(bufio.NewReader(strings.NewReader(headerLines + "\n\n"))).ReadMIMEHeader()
	if err != nil {
		tb.Fatalf("%s: headers: %v", name, err)
	}
	return fixture{
		name:   name,
		method: method,
		target: target,
		head:   headerLines,
		header: http.Header(mime),
		body:   bytes.TrimSuffix(body, []byte("\n")),
	}
}

// allFixtures reads every fixture, in directory order.
func allFixtures(tb testing.TB) []fixture {
	tb.Helper()
	entries, err := os.ReadDir(fixtureDir)
	if err != nil {
		tb.Fatal(err)
	}
	var out []fixture
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".http") {
			out = append(out, readFixture(tb, e.Name()))
		}
	}
	if len(out) == 0 {
		tb.Fatalf("no fixtures in %s", fixtureDir)
	}
	return out
}

// request builds the request a server would hand to a handler: Host moves
// out of the header map, as net/http does.
func (f fixture) request() *http.Request {
	r := httptest.NewRequest(f.method, f.target, bytes.NewReader(f.body))
	r.Header = f.header.Clone()
	if host := r.Header.Get("Host"); host != "" {
		r.Host = host
		r.Header.Del("Host")
	}
	return r
}

// checkInvariants states what holds for any input: an error wraps ErrNotPush
// and reads as one line; a Message has its Form and non-nil Attributes.
func checkInvariants(t *testing.T, m *pushenvelope.Message, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, pushenvelope.ErrNotPush) {
			t.Fatalf("Parse error %v does not wrap ErrNotPush", err)
		}
		if strings.ContainsAny(err.Error(), "\r\n") {
			t.Fatalf("Parse error must be one line, got %q", err)
		}
		if m != nil {
			t.Fatalf("Parse returned a Message with error %v", err)
		}
		return
	}
	switch {
	case m == nil:
		t.Fatal("Parse returned neither a Message nor an error")
	case m.Attributes == nil:
		t.Fatal("Message.Attributes must never be nil")
	case m.Form < pushenvelope.Wrapped || m.Form > pushenvelope.CloudEventStructured:
		t.Fatalf("Message.Form %d is not a known form", m.Form)
	case m.DeliveryAttempt < 0:
		t.Fatalf("Message.DeliveryAttempt %d is negative", m.DeliveryAttempt)
	case m.Data != nil && len(m.Data) == 0:
		t.Fatal("Message.Data must be nil when empty")
	}
}

// parseHeaderBlock turns "Name: value" lines into a header, skipping lines
// without a colon, so a fuzzer can write any header set.
func parseHeaderBlock(block string) http.Header {
	h := http.Header{}
	for line := range strings.SplitSeq(block, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) != "" {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return h
}
