package cloudevent

import (
	"errors"

	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// statusError is what Wrap returns when it, not fn, decides the answer. The
// CloudEvents SDK finds the *cehttp.Result in it (errors.As) and answers its
// status with its message as the body; callers find the cause with
// errors.Is and errors.As. Its text is the result's alone, because
// functions-framework prints every returned error to stderr and the cause
// may name the key.
type statusError struct {
	result error // a *cehttp.Result
	cause  error
}

func withStatus(code int, msg string, cause error) error {
	return &statusError{result: cehttp.NewResult(code, "%s", msg), cause: cause}
}

func (e *statusError) Error() string { return e.result.Error() }

func (e *statusError) Unwrap() []error { return []error{e.result, e.cause} }

// acknowledged reports whether the CloudEvents SDK answers r with a status
// that acknowledges a push (below 300). It mirrors the SDK's HTTP protocol:
// a *cehttp.Result answers its own code when that lies in 101–599 and 200
// otherwise; any other result answers 200 when it is an ACK receipt.
func acknowledged(r error) bool {
	if r == nil {
		return true
	}
	var res *cehttp.Result
	if errors.As(r, &res) {
		return res.StatusCode < 300 || res.StatusCode >= 600
	}
	return protocol.IsACK(r)
}
