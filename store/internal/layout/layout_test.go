package layout

import (
	"reflect"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store/internal/outboxq"
	"github.com/idemgate/idemgate/store/internal/record"
)

// roundTrip encodes t in fs and decodes it into a new T.
func roundTrip[T any](t *testing.T, fs Fields[T], in *T) (T, map[string]bool) {
	t.Helper()
	var out T
	indexed := map[string]bool{}
	fs.Encode(in, func(f *Field[T], v any) {
		indexed[f.Name] = f.Indexed
		if err := fs.Decode(&out, f.Name, v, "field"); err != nil {
			t.Fatal(err)
		}
	})
	return out, indexed
}

func TestRecord(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := record.Record{State: record.StateFailed, Fence: 7, LeaseUntil: t0, ExpiresAt: t0, Key: "k", Fingerprint: []byte{1}, Origin: "push/1", Attempts: 3, Reason: "boom", FirstFailure: t0}
	out, stored := roundTrip(t, Record, &in)
	if !reflect.DeepEqual(out, in) {
		t.Errorf("round trip = %+v, want %+v", out, in)
	}
	for name, indexed := range stored {
		if indexed {
			t.Errorf("record field %q is indexed; no record field may be", name)
		}
	}
	short := record.Record{State: record.StateDone}
	if _, stored := roundTrip(t, Record, &short); len(stored) != 5 {
		t.Errorf("a record without the optional fields stores %d fields, want 5", len(stored))
	}
	if err := Record.Decode(&out, "fence", "1", "field"); err == nil {
		t.Error("Decode of a fence held as a string must fail")
	}
	if err := Record.Decode(&out, "note", "an operator's", "field"); err != nil {
		t.Errorf("Decode of an unknown field = %v, want it ignored", err)
	}
	if err := CheckRecord(&record.Record{State: "MAYBE"}, "field"); err == nil {
		t.Error("CheckRecord must refuse an unknown state")
	}
}

func TestMessage(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in := outboxq.Stored{Name: "n", Topic: "t", Data: []byte("d"), Attributes: map[string]string{"a": "b"}, OrderKey: "k", Seq: 2, Version: "v", Enqueued: t0, Due: outboxq.Never, Died: t0, Holds: true}
	out, stored := roundTrip(t, Message, &in)
	if !reflect.DeepEqual(out, in) {
		t.Errorf("round trip = %+v, want %+v", out, in)
	}
	want := map[string]bool{OrderKey: true, Seq: true, Enqueued: true, Due: true, Died: true}
	for name, indexed := range stored {
		if indexed != want[name] {
			t.Errorf("message field %q indexed = %v, want %v: the relay's queries need exactly orderKey, seq, enqueued, due and died", name, indexed, want[name])
		}
	}
	live := outboxq.Stored{Topic: "t"}
	if _, stored := roundTrip(t, Message, &live); stored[Died] || stored[Holds] {
		t.Error("a live message stores died or holds; only dead ones may have them")
	}
	if err := CheckMessage(&outboxq.Stored{}, "field"); err == nil {
		t.Error("CheckMessage must refuse a message without a topic")
	}
}
