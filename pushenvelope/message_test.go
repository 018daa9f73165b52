package pushenvelope_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/pushenvelope"
)

func TestContextRoundTrip(t *testing.T) {
	if m, ok := pushenvelope.FromContext(t.Context()); ok || m != nil {
		t.Fatalf("FromContext of a bare context = %v, %v; want nil, false", m, ok)
	}
	want := &pushenvelope.Message{ID: "1", Attributes: map[string]string{}, Form: pushenvelope.Wrapped}
	ctx := pushenvelope.NewContext(t.Context(), want)
	ctx = context.WithValue(ctx, struct{ other int }{}, "unrelated")
	got, ok := pushenvelope.FromContext(ctx)
	if !ok || got != want {
		t.Fatalf("FromContext = %p, %v; want the Message stored by NewContext (%p)", got, ok, want)
	}
}

func TestFormString(t *testing.T) {
	for f, want := range map[pushenvelope.Form]string{
		pushenvelope.Wrapped:              "wrapped",
		pushenvelope.Unwrapped:            "unwrapped",
		pushenvelope.CloudEventBinary:     "cloudevent-binary",
		pushenvelope.CloudEventStructured: "cloudevent-structured",
		0:                                 "unknown",
	} {
		if got := f.String(); got != want {
			t.Errorf("Form(%d).String() = %q, want %q", f, got, want)
		}
	}
}
