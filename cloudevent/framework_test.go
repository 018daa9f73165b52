package cloudevent_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"go.uber.org/goleak"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/pushenvelope"
)

// The tests drive wrapped functions through the real functions-framework-go
// HTTP stack: its legacy-push conversion, the CloudEvents SDK's decoding and
// validation, and the statuses they answer. The framework serves only what
// was registered before it started, from a process-wide registry; it hands
// out no http.Handler and cannot be stopped. So TestMain registers a pool of
// slots at /slot0/, /slot1/, … and starts the framework once, on a free
// loopback port, for the whole process; each test borrows a slot with
// serveFunction and plugs its own wrapped function in.

const slotCount = 8

// slot is one registered path; fn is the function of the test that holds it.
type slot struct {
	fn atomic.Pointer[func(context.Context, event.Event) error]
}

func (s *slot) serve(ctx context.Context, e event.Event) error {
	fn := s.fn.Load()
	if fn == nil {
		return cehttp.NewResult(http.StatusNotFound, "no function in this slot")
	}
	return (*fn)(ctx, e)
}

var (
	frameworkURL string
	slots        [slotCount]slot
	freeSlots    = make(chan int, slotCount)
	// client is the tests' HTTP client; TestMain closes its idle
	// connections before checking for leaked goroutines.
	client = &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
)

func TestMain(m *testing.M) {
	// With FUNCTION_TARGET unset the framework serves each registration at
	// its own path instead of one function at "/".
	os.Unsetenv("FUNCTION_TARGET")
	for i := range slots {
		path := fmt.Sprintf("/slot%d/", i) // a subtree: legacy pushes append projects/P/topics/T
		if err := funcframework.RegisterCloudEventFunctionContext(context.Background(), path, slots[i].serve); err != nil {
			fmt.Fprintln(os.Stderr, "register:", err)
			os.Exit(1)
		}
		freeSlots <- i
	}
	url, err := startFramework()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	frameworkURL = url
	ignore := goleak.IgnoreCurrent() // the framework's server, which never stops

	code := m.Run()
	client.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(ignore); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startFramework starts functions-framework on a free loopback port. It takes
// a port, not a listener, so the port comes from listening on port 0 and
// closing; should another process take it in between, StartHostPort fails
// and another port is tried.
func startFramework() (string, error) {
	var err error
	for range 5 {
		var p int
		if p, err = testenv.FreePort(); err != nil {
			return "", err
		}
		port := strconv.Itoa(p)
		addr := net.JoinHostPort("127.0.0.1", port)
		errc := make(chan error, 1)
		go func() { errc <- funcframework.StartHostPort("127.0.0.1", port) }()
		if err = testenv.AwaitListening(addr, 10*time.Second, errc); err == nil {
			return "http://" + addr, nil
		}
	}
	return "", fmt.Errorf("starting functions-framework: %w", err)
}

// serveFunction plugs fn into a free slot of the framework for the rest of
// the test and returns the slot's base URL, without a trailing slash.
func serveFunction(t *testing.T, fn func(context.Context, event.Event) error) string {
	t.Helper()
	var i int
	select {
	case i = <-freeSlots:
	case <-t.Context().Done():
		t.Fatal("no free framework slot")
	}
	slots[i].fn.Store(&fn)
	t.Cleanup(func() {
		slots[i].fn.Store(nil)
		freeSlots <- i
	})
	return fmt.Sprintf("%s/slot%d", frameworkURL, i)
}

// Where the test messages come from.
const (
	testSource       = "//pubsub.googleapis.com/projects/acme/topics/orders"
	testSubscription = "projects/acme/subscriptions/eventarc-us-central1-orders-sub-042"
	testPublishTime  = "2026-03-01T10:15:00.25Z"
)

// message is a Pub/Sub message as a test publishes it.
type message struct {
	id    string // "" leaves the id out everywhere
	data  string
	attrs map[string]string
}

// published is the message as MessagePublishedData JSON, the data of a
// messagePublished CloudEvent.
func (msg message) published(subscription string) map[string]any {
	m := map[string]any{
		"data":        base64.StdEncoding.EncodeToString([]byte(msg.data)),
		"publishTime": testPublishTime,
	}
	if msg.id != "" {
		m["messageId"] = msg.id
	}
	if msg.attrs != nil {
		m["attributes"] = msg.attrs
	}
	return map[string]any{"message": m, "subscription": subscription}
}

// A form is one way a Pub/Sub message reaches a function.
type form struct {
	name    string
	request func(base string, msg message) *http.Request
	// subscription is what the function sees in Message.Subscription.
	subscription string
}

var forms = []form{
	{"eventarc-binary", binaryRequest, testSubscription},
	{"structured", structuredRequest, testSubscription},
	// functions-framework rebuilds a CloudEvent from a push body; the
	// subscription name is lost on the way.
	{"legacy-push", func(base string, msg message) *http.Request {
		return legacyPushRequest(base+"/projects/acme/topics/orders", msg)
	}, ""},
}

// binaryRequest is what Eventarc sends: attributes in ce-* headers, the
// MessagePublishedData as the body.
func binaryRequest(base string, msg message) *http.Request {
	r := newPost(base+"/", "application/json", msg.published(testSubscription))
	if msg.id != "" {
		r.Header.Set("Ce-Id", msg.id)
	}
	r.Header.Set("Ce-Specversion", "1.0")
	r.Header.Set("Ce-Type", pushenvelope.MessagePublishedType)
	r.Header.Set("Ce-Source", testSource)
	r.Header.Set("Ce-Time", testPublishTime)
	return r
}

// structuredRequest is the same event as one application/cloudevents+json document.
func structuredRequest(base string, msg message) *http.Request {
	ev := map[string]any{
		"specversion":     "1.0",
		"type":            pushenvelope.MessagePublishedType,
		"source":          testSource,
		"time":            testPublishTime,
		"datacontenttype": "application/json",
		"data":            msg.published(testSubscription),
	}
	if msg.id != "" {
		ev["id"] = msg.id
	}
	return newPost(base+"/", "application/cloudevents+json; charset=utf-8", ev)
}

// legacyPushRequest is a plain Pub/Sub push, which Pub/Sub writes with both
// spellings of the message id, to url.
func legacyPushRequest(url string, msg message) *http.Request {
	body := msg.published("projects/acme/subscriptions/orders-push")
	if msg.id != "" {
		body["message"].(map[string]any)["message_id"] = msg.id
	}
	return newPost(url, "application/json", body)
}

func newPost(url, contentType string, body any) *http.Request {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	r, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(b)))
	if err != nil {
		panic(err)
	}
	r.Header.Set("Content-Type", contentType)
	return r
}

// send sends r and returns the status Pub/Sub would see, and the body.
func send(ctx context.Context, r *http.Request) (int, string, error) {
	resp, err := client.Do(r.WithContext(ctx))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// deliver is send for the test's own goroutine: it fails the test on a
// transport error.
func deliver(t *testing.T, r *http.Request) (int, string) {
	t.Helper()
	code, body, err := send(t.Context(), r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	return code, body
}

// expect delivers r and fails the test unless the status is want.
func expect(t *testing.T, r *http.Request, want int, why string) {
	t.Helper()
	if got, body := deliver(t, r); got != want {
		t.Fatalf("%s: status %d (%q), want %d", why, got, strings.TrimSpace(body), want)
	}
}
