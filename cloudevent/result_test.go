package cloudevent

import (
	"errors"
	"net/http"
	"testing"

	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

func TestAcknowledged(t *testing.T) {
	// The SDK answers a *cehttp.Result with its code when 100 < code < 600
	// and 200 otherwise; other results 200 when they are ACK receipts.
	tests := []struct {
		name   string
		result error
		want   bool
	}{
		{"nil", nil, true},
		{"200", cehttp.NewResult(200, "ok"), true},
		{"204", cehttp.NewResult(204, ""), true},
		{"code 0 answers 200", cehttp.NewResult(0, ""), true},
		{"code 600 answers 200", cehttp.NewResult(600, ""), true},
		{"299, the last 2xx", cehttp.NewResult(299, ""), true},
		{"300", cehttp.NewResult(300, ""), false},
		{"302", cehttp.NewResult(302, ""), false},
		{"599", cehttp.NewResult(599, ""), false},
		{"429", cehttp.NewResult(429, "slow down"), false},
		{"503", cehttp.NewResult(503, ""), false},
		{"ACK receipt", protocol.ResultACK, true},
		{"NACK receipt", protocol.ResultNACK, false},
		{"plain error", errors.New("boom"), false},
		{"wrapped 204", errors.Join(errors.New("note"), cehttp.NewResult(204, "")), true},
	}
	for _, tt := range tests {
		if got := acknowledged(tt.result); got != tt.want {
			t.Errorf("%s: acknowledged = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestStatusError(t *testing.T) {
	cause := errors.New(`claim "secret-key": connection refused`)
	err := withStatus(http.StatusServiceUnavailable, "idemgate: store unavailable", cause)
	var res *cehttp.Result
	if !errors.As(err, &res) || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("errors.As(*cehttp.Result) = %v, want code 503", res)
	}
	if !errors.Is(err, cause) {
		t.Error("the cause is not reachable with errors.Is")
	}
	if got, want := err.Error(), "503: idemgate: store unavailable"; got != want {
		t.Errorf("Error() = %q, want %q (without the cause, which may name the key)", got, want)
	}
}
