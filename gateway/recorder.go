package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// recorder holds the wrapped handler's answer back until the delivery's
// outcome is settled, because the status is the ack. Headers go to the
// real writer's map at once. Unwrap lets http.ResponseController reach the
// real writer; it finds Flush and Hijack here first. There is no ReadFrom
// or WriteString, so io.Copy and io.WriteString come through Write.
type recorder struct {
	http.ResponseWriter
	status    int    // the status h answered (see WriteHeader); 0 until it does
	after     int    // the 2xx a failure replaced, or 0
	body      []byte // the first maxHeldBody bytes h wrote
	failedAt  int    // where in body h's failure status began: 0, or past a 2xx's bytes
	discarded int64  // how many it wrote past them
}

// maxHeldBody is how much of a wrapped handler's body is held and sent;
// the rest is counted and dropped (Pub/Sub reads only the status).
const maxHeldBody = 4 << 10

// WriteHeader holds code as the answer if it is h's first status, or a
// failure after a 2xx (h found that its work failed after all). A code
// outside 100–999 panics, as on net/http's own writer.
func (rw *recorder) WriteHeader(code int) {
	switch {
	case code < 100 || code > 999:
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http's own writer does
	case code < 200:
		// An interim answer: dropped, since Pub/Sub takes 102 for a success.
	case rw.status == 0:
		rw.status = code
	case is2xx(rw.status) && !is2xx(code):
		rw.status, rw.after = code, rw.status // a failure after progress is the verdict
		rw.failedAt = len(rw.body)
	}
}

// is2xx reports whether code is a 2xx, an ack.
func is2xx(code int) bool { return code >= 200 && code <= 299 }

func (rw *recorder) Write(b []byte) (int, error) {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	keep := min(len(b), maxHeldBody-len(rw.body))
	rw.body = append(rw.body, b[:keep]...)
	rw.discarded += int64(len(b) - keep)
	return len(b), nil
}

// Flush keeps handlers that assert http.Flusher working. There is nothing
// to flush while the answer is held.
func (rw *recorder) Flush() {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
}

// send writes the held answer, if h gave one, to the client.
func (rw *recorder) send() {
	if rw.status != 0 {
		if rw.discarded > 0 {
			rw.ResponseWriter.Header().Del("Content-Length") // h's no longer holds
		}
		rw.ResponseWriter.WriteHeader(rw.status)
		rw.ResponseWriter.Write(rw.body) // a client that is gone cannot hear it; Pub/Sub retries
	}
}

// errHijack is what Hijack answers on a guarded route.
var errHijack = errors.New("idemgate: a guarded push handler cannot hijack the connection")

// Hijack refuses: a handler that took the connection could answer Pub/Sub
// behind the hold. http.ResponseController finds it before it unwraps to
// the real writer's.
func (rw *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, errHijack }

func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }
