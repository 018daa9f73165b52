package logtest_test

import (
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/logtest"
)

func TestSinkFlattensAttrs(t *testing.T) {
	s := &logtest.Sink{}
	log := s.Logger().With("svc", "orders").WithGroup("delivery").With("form", "pull")
	log.Warn("held", "message_id", "m-1", slog.Group("g", "n", 3), "outcome", "in_progress", slog.Attr{})
	recs := s.Records()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	want := map[string]string{
		"svc":                 "orders",
		"delivery.form":       "pull",
		"delivery.message_id": "m-1",
		"delivery.g.n":        "3",
		"delivery.outcome":    "in_progress",
	}
	if diff := cmp.Diff(want, recs[0].Attrs); diff != "" {
		t.Errorf("attrs (-want +got):\n%s", diff)
	}
	if recs[0].Level != slog.LevelWarn || recs[0].Message != "held" {
		t.Errorf("record = %v, want WARN held", recs[0])
	}
	m, err := recs[0].JSON()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := m["delivery"].(map[string]any)
	if m["svc"] != "orders" || m["msg"] != "held" || m["level"] != "WARN" || d["form"] != "pull" || d["g"].(map[string]any)["n"] != 3.0 {
		t.Errorf("JSON = %v, want the record as slog.JSONHandler writes it", m)
	}
}

func TestRecordsFilters(t *testing.T) {
	s := &logtest.Sink{}
	log := s.Logger()
	log.Debug("idemgate: delivery processed", "outcome", "won", "id", "a")
	log.Error("idemgate: store failed", "outcome", "store_error", "id", "b")
	log.Error("idemgate: work done but not recorded", "outcome", "complete_error", "id", "a")
	recs := s.Records()
	for _, tc := range []struct {
		name string
		got  logtest.Records
		want []string
	}{
		{"Level", recs.Level(slog.LevelError), []string{"store_error", "complete_error"}},
		{"Outcome", recs.Outcome(gateway.OutcomeWon), []string{"won"}},
		{"With", recs.With("id", "a"), []string{"won", "complete_error"}},
		{"Containing", recs.Containing("store"), []string{"store_error"}},
		{"chained", recs.Level(slog.LevelError).With("id", "a"), []string{"complete_error"}},
		{"none", recs.Outcome(gateway.OutcomeDuplicate), nil},
	} {
		var got []string
		for _, r := range tc.got {
			got = append(got, r.Outcome())
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: outcomes (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestSinkTake(t *testing.T) {
	s := &logtest.Sink{}
	s.Logger().Info("one")
	if got := s.Take(); len(got) != 1 || got[0].Message != "one" {
		t.Fatalf("first Take = %v, want one", got)
	}
	s.Logger().Info("two")
	if got := s.Take(); len(got) != 1 || got[0].Message != "two" {
		t.Fatalf("second Take = %v, want only two", got)
	}
	if got := s.Take(); len(got) != 0 {
		t.Fatalf("Take with nothing new = %v, want none", got)
	}
	if n := len(s.Records()); n != 2 {
		t.Fatalf("Records after Takes = %d, want all 2", n)
	}
}

// TestSinkWait logs from many goroutines while a test waits for them all;
// run with -race, it also shows the Sink is safe for concurrent use.
func TestSinkWait(t *testing.T) {
	s := &logtest.Sink{}
	const n = 50
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			s.Logger().Info("done", "i", i)
		})
	}
	close(start)
	s.Wait(t, time.Minute, "line from every goroutine", func(recs logtest.Records) bool { return len(recs) == n })
	wg.Wait()
}

func TestSinkWaitFails(t *testing.T) {
	s := &logtest.Sink{}
	s.Logger().Info("only")
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Wait(ft, time.Millisecond, "second line", func(recs logtest.Records) bool { return len(recs) == 2 })
	}()
	<-done
	if !ft.failed {
		t.Fatal("Wait for a record that never comes must fail the test")
	}
}

// fatalRecorder notes a Fatalf and ends the goroutine, as testing.T does.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(string, ...any) {
	f.failed = true
	runtime.Goexit()
}
