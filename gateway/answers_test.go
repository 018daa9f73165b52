package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/answertable"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store/memstore"
)

// pushForm builds a push request of one form: wrapped or unwrapped.
type pushForm func(id, data string, attrs map[string]string) *http.Request

func wrapped(id, data string, attrs map[string]string) *http.Request {
	return httptest.NewRequest(http.MethodPost, "/", strings.NewReader(push(id, attrs, data)))
}

// answerCase produces one row of docs/design.md's table of answers through
// the HTTP middleware, in a form, and returns the status Pub/Sub saw.
type answerCase struct {
	row     string
	produce func(t *testing.T, form pushForm) int
}

// status serves r with h and returns the status.
func status(h http.Handler, r *http.Request) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code
}

func succeed(context.Context, *pushenvelope.Message) error { return nil }

// byOrder keys on the order_id attribute and fingerprints the payload.
func byOrder(accept bool) gateway.Options {
	return gateway.Options{Key: gateway.KeyFromAttribute("order_id"), Fingerprint: gateway.FingerprintPayload, AcceptConflicts: accept}
}

func conflicting(accept bool) func(t *testing.T, form pushForm) int {
	return func(t *testing.T, form pushForm) int {
		h := newFixture(t, byOrder(accept)).g.Push(succeed)
		order := map[string]string{"order_id": "o-1"}
		if c := status(h, form("m-1", "x", order)); c != http.StatusOK {
			t.Fatalf("the first order answered %d, want 200", c)
		}
		return status(h, form("m-2", "y", order))
	}
}

// poisoned answers the second delivery of a message whose work failed for
// good the first time (gateway.Permanent), and checks that it did not run
// the work again.
func poisoned(ack bool) func(t *testing.T, form pushForm) int {
	return func(t *testing.T, form pushForm) int {
		runs := 0
		h := newFixture(t, gateway.Options{AckFailed: ack}).g.Push(func(context.Context, *pushenvelope.Message) error {
			runs++
			return gateway.Permanent(errors.New("customer gone"))
		})
		status(h, form("m-1", "x", nil))
		code := status(h, form("m-1", "x", nil))
		if runs != 1 {
			t.Errorf("the work ran %d times, want once: a FAILED key is not run again", runs)
		}
		return code
	}
}

// waited answers a copy that met a live holder and waited for it
// (WaitForHolder) until the holder completed.
func waited(t *testing.T, form pushForm) int {
	st, g := waitingGateway(t)
	runs := 0
	started, release := make(chan struct{}), make(chan struct{})
	h := g.Push(func(context.Context, *pushenvelope.Message) error {
		if runs++; runs == 1 {
			close(started)
			<-release
		}
		return nil
	})
	first := make(chan int, 1)
	go func() { first <- status(h, form("m-1", "x", nil)) }()
	<-started
	copied := make(chan int, 1)
	go func() { copied <- status(h, form("m-1", "x", nil)) }()
	<-st.Held() // the copy met the holder, and waits
	close(release)
	if c := <-first; c != http.StatusOK {
		t.Errorf("the holder answered %d, want 200", c)
	}
	code := <-copied
	if runs != 1 {
		t.Errorf("the work ran %d times, want once", runs)
	}
	return code
}

var answerCases = []answerCase{
	{"won", func(t *testing.T, form pushForm) int {
		return status(newFixture(t, gateway.Options{}).g.Push(succeed), form("m-1", "x", nil))
	}},
	{"duplicate", func(t *testing.T, form pushForm) int {
		h := newFixture(t, gateway.Options{}).g.Push(succeed)
		status(h, form("m-1", "x", nil))
		return status(h, form("m-1", "x", nil))
	}},
	{"in_progress", func(t *testing.T, form pushForm) int {
		started, release := make(chan struct{}), make(chan struct{})
		h := newFixture(t, gateway.Options{}).g.Push(func(ctx context.Context, m *pushenvelope.Message) error {
			close(started)
			<-release
			return nil
		})
		first := make(chan int, 1)
		go func() { first <- status(h, form("m-1", "x", nil)) }()
		<-started
		code := status(h, form("m-1", "x", nil))
		close(release)
		if c := <-first; c != http.StatusOK {
			t.Errorf("the holder answered %d, want 200", c)
		}
		return code
	}},
	{"failed", func(t *testing.T, form pushForm) int {
		h := newFixture(t, gateway.Options{}).g.Push(func(context.Context, *pushenvelope.Message) error { return errors.New("supplier down") })
		return status(h, form("m-1", "x", nil))
	}},
	{"panic", func(t *testing.T, form pushForm) int {
		h := newFixture(t, gateway.Options{}).g.Push(func(context.Context, *pushenvelope.Message) error { panic("bug in the handler") })
		return status(h, form("m-1", "x", nil))
	}},
	{"abandoned", func(t *testing.T, form pushForm) int {
		h := newFixture(t, gateway.Options{}).g.Push(func(context.Context, *pushenvelope.Message) error {
			return gateway.Permanent(errors.New("customer gone"))
		})
		return status(h, form("m-1", "x", nil))
	}},
	{"already_failed", poisoned(false)},
	{"failed_acked", poisoned(true)},
	{"waited", waited},
	{"conflict", conflicting(false)},
	{"conflict_accepted", conflicting(true)},
	{"no_key", func(t *testing.T, form pushForm) int {
		return status(newFixture(t, byOrder(false)).g.Push(succeed), form("m-1", "x", nil))
	}},
	{"rejected", func(t *testing.T, form pushForm) int {
		h := newFixture(t, gateway.Options{MaxBodyBytes: 1024}).g.Push(succeed)
		r := form("m-1", strings.Repeat("x", 2048), nil)
		if _, isWrapped := r.Header["X-Goog-Pubsub-Message-Id"]; !isWrapped {
			// A wrapped body that is no envelope; an unwrapped one is taken
			// as it comes, and is refused only when it is too large.
			r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader("not json"))
		}
		return status(h, r)
	}},
	{"store_error", func(t *testing.T, form pushForm) int {
		st, err := memstore.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		fs := &faulty{Store: st}
		fs.failClaim.Store(true)
		g, err := gateway.New(fs, &gateway.Options{Logger: (&logs{}).logger()})
		if err != nil {
			t.Fatal(err)
		}
		return status(g.Push(succeed), form("m-1", "x", nil))
	}},
	{"cancelled", func(t *testing.T, form pushForm) int {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		return status(newFixture(t, gateway.Options{}).g.Push(succeed), form("m-1", "x", nil).WithContext(ctx))
	}},
}

// TestAnswerTable holds the push columns of docs/design.md's table of
// answers: each row, produced through the middleware in each form,
// answers the status the table says, and the table has a row for each
// case.
func TestAnswerTable(t *testing.T) {
	table, err := answertable.Read("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	for col, form := range map[string]pushForm{"Push, wrapped": wrapped, "Push, unwrapped": unwrapped} {
		got := map[string]string{}
		for _, c := range answerCases {
			t.Run(col+"/"+c.row, func(t *testing.T) { got[c.row] = strconv.Itoa(c.produce(t, form)) })
		}
		if diff := cmp.Diff(table.Column(col), got); diff != "" {
			t.Errorf("column %q of docs/design.md's table (-doc +middleware):\n%s", col, diff)
		}
	}
}
