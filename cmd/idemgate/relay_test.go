package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/internal/testenv"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/datastorestore"
	"github.com/idemgate/idemgate/store/sqlstore"
)

func TestRelayUsage(t *testing.T) {
	t.Setenv("GOOGLE_CLOUD_PROJECT", "")
	path := filepath.Join(t.TempDir(), "records.db")
	if r := idemgate(t, "", "relay", "-store", "sqlite://"+path); r.code != exitUsage || !strings.Contains(r.stderr, "-project") {
		t.Errorf("relay without a project = %d, %q; want usage error naming -project", r.code, r.stderr)
	}
	if r := idemgate(t, "", "relay", "-store", "redis://"+testenv.RedisAddr(t)+"/0", "-project", "p"); r.code != exitUsage || !strings.Contains(r.stderr, "no outbox") {
		t.Errorf("relay on Redis = %d, %q; want usage error: no outbox", r.code, r.stderr)
	}
}

// The relay command publishes what a service committed to its store's
// outbox (SQLite, Datastore), and stops cleanly on interrupt.
func TestRelayCommand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enqueue func(t *testing.T, msg outbox.Message) (url string)
	}{
		{"SQLite", enqueueSQLite},
		{"Datastore", enqueueDatastore},
	} {
		t.Run(tc.name, func(t *testing.T) { testRelayCommand(t, tc.enqueue) })
	}
}

func testRelayCommand(t *testing.T, enqueue func(t *testing.T, msg outbox.Message) string) {
	ctx := t.Context()
	client, project, topic, sub := emulatorTopic(t)

	// The service committed one order with its shipment; a topic ID is
	// resolved in -project.
	url := enqueue(t, outbox.Message{Topic: topic, Data: []byte("ship order-1")})

	got := make(chan *pubsub.Message, 10)
	rctx, stopRecv := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		client.Subscriber(sub).Receive(rctx, func(_ context.Context, m *pubsub.Message) {
			m.Ack()
			got <- m
		})
	})
	defer func() { stopRecv(); wg.Wait() }()

	cctx, interrupt := context.WithCancel(ctx)
	res := make(chan result, 1)
	go func() {
		res <- idemgateCtx(cctx, "", "relay", "-store", url, "-project", project, "-poll", "50ms")
	}()
	select {
	case m := <-got:
		if string(m.Data) != "ship order-1" || m.Attributes[outbox.ChildKeyAttribute] != outbox.ChildKey("order-1", "0") {
			t.Errorf("received %q with child key %q; want the enqueued message with its child key", m.Data, m.Attributes[outbox.ChildKeyAttribute])
		}
	case r := <-res:
		t.Fatalf("relay ended before publishing: %d, %s", r.code, r.stderr)
	case <-time.After(60 * time.Second):
		t.Fatal("the relay command published nothing")
	}
	interrupt()
	r := <-res
	lines := jsonLines(t, r.stderr)
	if r.code != exitOK || len(lines) < 2 || lines[0]["message"] != "relay: started" || lines[len(lines)-1]["message"] != "relay: stopped" {
		t.Errorf("relay = %d, stderr %q; want 0 and its start and stop lines", r.code, r.stderr)
	}
	if lines[0]["severity"] != "INFO" {
		t.Errorf("start line %v: want severity INFO, for Cloud Logging", lines[0])
	}
}

// jsonLines parses each line of log, which must be a JSON object with a
// "severity", as Cloud Logging reads it.
func jsonLines(t testing.TB, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(log) {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if _, ok := l["severity"]; !ok {
			t.Fatalf("log line %q has no severity", line)
		}
		out = append(out, l)
	}
	return out
}

// enqueueSQLite completes order-1 in a SQLite store's transaction with msg
// in its outbox, and returns the store's URL.
func enqueueSQLite(t *testing.T, msg outbox.Message) string {
	return enqueueSQLiteAt(t, filepath.Join(t.TempDir(), "records.db"), msg)
}

// enqueueSQLiteAt does what enqueueSQLite does, with msgs, in the SQLite
// file at path, creating its tables unless they exist.
func enqueueSQLiteAt(t *testing.T, path string, msgs ...outbox.Message) string {
	ctx := t.Context()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{Outbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := st.Claim(ctx, "order-1", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CompleteTx(ctx, tx, c, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return "sqlite://" + path
}

// enqueueDatastore does what enqueueSQLite does on the Datastore emulator,
// in a namespace of its own.
func enqueueDatastore(t *testing.T, msg outbox.Message) string {
	ctx := t.Context()
	t.Setenv("DATASTORE_EMULATOR_HOST", testenv.DatastoreEmulatorHost(t))
	client, err := datastore.NewClient(ctx, "idemgate-test")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ns := unique()
	st, err := datastorestore.New(client, &datastorestore.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Claim(ctx, "order-1", time.Minute, store.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		return st.CompleteTx(tx, c, msg)
	}); err != nil {
		t.Fatal(err)
	}
	return "datastore://idemgate-test?namespace=" + ns
}
