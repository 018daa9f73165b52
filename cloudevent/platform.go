package cloudevent

import (
	"errors"
	"net/http"
	"strconv"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// Platform names what delivers the events to the function, where the
// answers that end a delivery differ from one platform to another.
type Platform int

const (
	// Eventarc is an Eventarc standard trigger (Cloud Run functions among
	// its destinations), the default: every answer but a 2xx is a nack,
	// retried when the trigger has retries on, dropped when not.
	Eventarc Platform = iota

	// EventarcAdvanced is an Eventarc Advanced pipeline, which ends a
	// delivery at once on a status it does not retry (it retries 408, 409,
	// 429, 500, 502, 503 and 504): Wrap answers a conflict and a missing
	// key, which no retry mends, 422 there instead of 409 and 500.
	EventarcAdvanced
)

// String names p as the docs do.
func (p Platform) String() string {
	switch p {
	case Eventarc:
		return "Eventarc"
	case EventarcAdvanced:
		return "EventarcAdvanced"
	}
	return "Platform(" + strconv.Itoa(int(p)) + ")"
}

// permanent is the status of a failure that a retry of the same event
// cannot mend, on p: code where every failure is retried alike, and 422,
// a code Eventarc Advanced does not retry, there.
func (p Platform) permanent(code int) int {
	if p == EventarcAdvanced {
		return http.StatusUnprocessableEntity
	}
	return code
}

// ends reports whether p ends the delivery at once when fn's result r is
// answered: on Eventarc Advanced, a status it does not retry (a plain error
// is answered 500, which it retries); never on Eventarc.
func (p Platform) ends(r error) bool {
	res, ok := errors.AsType[*cehttp.Result](r)
	if p != EventarcAdvanced || !ok || acknowledged(r) {
		return false
	}
	switch res.StatusCode {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return false
	}
	return true
}
