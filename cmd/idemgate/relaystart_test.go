package main

import (
	"context"
	"database/sql"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
)

// logWatch is a log a test can wait on; safe for concurrent use.
type logWatch struct {
	mu   sync.Mutex // guards buf and grew
	buf  strings.Builder
	grew chan struct{} // closed and replaced at each Write
}

func newLogWatch() *logWatch { return &logWatch{grew: make(chan struct{})} }

func (w *logWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.grew)
	w.grew = make(chan struct{})
	return w.buf.Write(p)
}

func (w *logWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// await waits until the log holds want, and fails t if it does not within
// d or if the relay ends first.
func (w *logWatch) await(t testing.TB, want string, d time.Duration, r *relayRun) {
	t.Helper()
	timeout := time.After(d)
	for {
		w.mu.Lock()
		log, grew := w.buf.String(), w.grew
		w.mu.Unlock()
		if strings.Contains(log, want) {
			return
		}
		select {
		case <-grew:
		case <-r.done:
			t.Fatalf("the relay ended (%d) before logging %q:\n%s", r.code, want, log)
		case <-timeout:
			t.Fatalf("the relay did not log %q within %v:\n%s", want, d, log)
		}
	}
}

// relayRun is idemgate relay running in the background.
type relayRun struct {
	log    *logWatch
	cancel context.CancelFunc
	done   chan struct{} // closed when the relay returned code
	code   int
}

// startRelay runs idemgate relay with args in the background, until the
// test ends or interrupt.
func startRelay(t *testing.T, args ...string) *relayRun {
	ctx, cancel := context.WithCancel(t.Context())
	r := &relayRun{log: newLogWatch(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.code = run(ctx, append([]string{"relay"}, args...), strings.NewReader(""), io.Discard, r.log)
	}()
	t.Cleanup(func() { r.interrupt() })
	return r
}

// interrupt stops the relay as SIGINT does, and returns its exit status.
func (r *relayRun) interrupt() int {
	r.cancel()
	<-r.done
	return r.code
}

// emulatorTopic returns a client of the Pub/Sub emulator in a project of
// the test's own, with PUBSUB_EMULATOR_HOST set for the relay, and a new
// topic's ID with a subscription to it.
func emulatorTopic(t *testing.T) (client *pubsub.Client, project, topic, sub string) {
	host := testenv.PubSubEmulatorHost(t)
	t.Setenv("PUBSUB_EMULATOR_HOST", host)
	ctx := t.Context()
	project = testenv.PubSubProject(t)
	client, err := pubsub.NewClient(ctx, project, testenv.PubSubClientOptions(host)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	topic = "shipments-" + unique()
	tp, err := client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: "projects/" + project + "/topics/" + topic})
	if err != nil {
		t.Fatal(err)
	}
	s, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: "projects/" + project + "/subscriptions/" + topic, Topic: tp.Name, AckDeadlineSeconds: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	return client, project, topic, s.Name
}

// A relay started before the service created its tables (the SQLite file
// missing, or there without tables) waits for them, logging why as JSON,
// and relays once they exist.
func TestRelayWaitsForTheOutbox(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, path string)
	}{
		{"no database file", func(*testing.T, string) {}},
		{"no tables", func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE unrelated (x INTEGER)"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, project, topic, sub := emulatorTopic(t)
			path := filepath.Join(t.TempDir(), "records.db")
			tc.before(t, path)
			r := startRelay(t, "-store", "sqlite://"+path, "-project", project, "-poll", "50ms")
			r.log.await(t, "relay: waiting for the store's outbox; trying again", 30*time.Second, r)

			// The service starts: it creates its tables and commits an order.
			enqueueSQLiteAt(t, path, outbox.Message{Topic: topic, Data: []byte("ship order-1")})
			got := make(chan *pubsub.Message, 1)
			rctx, stopRecv := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() {
				client.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
					m.Ack()
					select {
					case got <- m:
					default:
					}
				})
			})
			defer func() { stopRecv(); wg.Wait() }()
			select {
			case m := <-got:
				if string(m.Data) != "ship order-1" {
					t.Errorf("received %q, want the order's shipment", m.Data)
				}
			case <-r.done:
				t.Fatalf("the relay ended (%d) before publishing:\n%s", r.code, r.log)
			case <-time.After(60 * time.Second):
				t.Fatalf("the relay published nothing once the tables existed:\n%s", r.log)
			}
			if code := r.interrupt(); code != exitOK {
				t.Errorf("relay = %d, want 0", code)
			}
			lines := jsonLines(t, r.log.String())
			w := lines[0]
			if w["severity"] != "WARNING" || !strings.Contains(w["reason"].(string), "records.db") || w["retry_in"] == nil {
				t.Errorf("first line %v: want a WARNING saying why (the store), and when it tries again", w)
			}
			if msgs := messages(lines); !strings.Contains(msgs, "relay: started") || !strings.HasSuffix(msgs, "relay: stopped") {
				t.Errorf("log lines %s: want the wait, then started, then stopped", msgs)
			}
		})
	}
}

// messages joins the messages of lines with " | ".
func messages(lines []map[string]any) string {
	var m []string
	for _, l := range lines {
		m = append(m, l["message"].(string))
	}
	return strings.Join(m, " | ")
}

// The wait for the outbox is bounded by -timeout; the relay then exits 1
// with an ERROR line that says why, its log JSON to the last line.
func TestRelayWaitForTheOutboxIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.db")
	r := startRelay(t, "-store", "sqlite://"+path, "-project", "p", "-timeout", "1500ms")
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the relay still waits for its outbox past -timeout:\n%s", r.log)
	}
	lines := jsonLines(t, r.log.String())
	last := lines[len(lines)-1]
	if code := r.code; code != exitProblem || last["severity"] != "ERROR" || last["message"] != "relay: failed" || !strings.Contains(last["error"].(string), "the outbox is not ready") {
		t.Errorf("relay = %d, last line %v; want 1 and an ERROR saying the outbox is not ready", code, last)
	}
	if n := strings.Count(messages(lines), "waiting for the store's outbox"); n < 1 || n > 2 {
		t.Errorf("%d waiting lines in 1.5s, want 1 or 2 (tries 1s apart, then 2s):\n%s", n, r.log)
	}
}

// A missing topic refuses every message: the relay logs one WARNING for
// a round's refusals, counting them, not one per message.
func TestRelayMissingTopicLogsBounded(t *testing.T) {
	_, project, _, _ := emulatorTopic(t)
	const n = 20
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{Topic: "missing", Data: []byte("x")} // a topic that does not exist
	}
	url := enqueueSQLiteAt(t, filepath.Join(t.TempDir(), "records.db"), msgs...)
	r := startRelay(t, "-store", url, "-project", project, "-poll", "50ms", "-min-backoff", "1h", "-max-backoff", "1h")
	r.log.await(t, "relay: Pub/Sub refused a publish", 60*time.Second, r)
	if code := r.interrupt(); code != exitOK {
		t.Errorf("relay = %d, want 0", code)
	}
	var refused []map[string]any
	for _, l := range jsonLines(t, r.log.String()) {
		if strings.HasPrefix(l["message"].(string), "relay: Pub/Sub refused") {
			refused = append(refused, l)
		}
	}
	if len(refused) != 1 || refused[0]["severity"] != "WARNING" || refused[0]["failures"] != float64(n) || refused[0]["topic"] != "missing" {
		t.Errorf("refusal lines %v; want one WARNING for the %d messages of the missing topic", refused, n)
	}
}
