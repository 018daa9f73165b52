package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// quietPeriod is how long nothing may arrive at a door for the emulator to
// count as having nothing left to deliver. The emulator redelivers a
// nacked message after about a second, so a pending redelivery shows up
// well within it.
const quietPeriod = 2500 * time.Millisecond

// delivery is what a door decoded from one push.
type delivery struct {
	ID    string            // the messageId
	Attrs map[string]string // the attributes
}

// doorConfig configures a door.
type doorConfig struct {
	// Route is the path the door forwards to: "/", "/orders" or
	// "/po-updates", which also tells the door the key example-run uses.
	Route string
	// Pick returns the base URL of the example-run process to forward a
	// delivery to, or "" when none is up (the door answers 503, as Cloud
	// Run does without a ready instance).
	Pick func() string
	// Supplier is checked at every ack: the work of an acknowledged
	// message must have been done before its ack.
	Supplier *supplier
	// Gate, if set, runs before a delivery is forwarded and may hold it.
	Gate func(ctx context.Context, d delivery)
}

// door is the push endpoint the emulator delivers one subscription to.
// It stands where Cloud Run's front end stands: it forwards each push to a
// process and relays the answer, and on the way it records every delivery
// and the status the emulator got, so a test can tell what was acked,
// what was nacked and whether anything is still being redelivered. It is
// safe for concurrent use.
type door struct {
	cfg    doorConfig
	URL    string // give this to the emulator as the push endpoint
	client *http.Client

	born time.Time // when the door opened, the origin of timeline

	mu        sync.Mutex
	answers   map[string][]int    // by messageId, the status of each delivery; guarded by mu
	timeline  map[string][]string // by messageId, "status@arrived-answered" of each delivery; guarded by mu
	byStatus  map[int]int         // how many answers had each status; guarded by mu
	inFlight  int                 // deliveries being forwarded; guarded by mu
	lastEvent time.Time           // when a delivery last arrived or was answered; guarded by mu
	broken    []string            // acks that came before the work was done; guarded by mu
}

// newDoor starts a door for t, closed when t ends.
func newDoor(t testing.TB, cfg doorConfig) *door {
	d := &door{
		cfg:       cfg,
		client:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}},
		answers:   map[string][]int{},
		timeline:  map[string][]string{},
		born:      time.Now(),
		byStatus:  map[int]int{},
		lastEvent: time.Now(),
	}
	srv := httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(func() {
		srv.Close()
		d.client.CloseIdleConnections()
	})
	d.URL = srv.URL + cfg.Route
	return d
}

// acked reports whether the emulator treats status as an acknowledgement.
// The real service's list differs (it acks 202, for one); the example
// answers none of the codes where the two disagree.
func acked(status int) bool {
	return status == 200 || status == 201 || status == 203 || status == 204
}

func (d *door) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var push struct {
		Message struct {
			MessageID  string            `json:"messageId"`
			Attributes map[string]string `json:"attributes"`
		} `json:"message"`
	}
	if err == nil {
		err = json.Unmarshal(body, &push)
	}
	if err != nil || push.Message.MessageID == "" {
		http.Error(w, fmt.Sprintf("door: not a push delivery: %v", err), http.StatusBadRequest)
		return
	}
	dl := delivery{ID: push.Message.MessageID, Attrs: push.Message.Attributes}

	arrived := time.Now()
	d.mu.Lock()
	d.inFlight++
	d.lastEvent = arrived
	d.mu.Unlock()

	if d.cfg.Gate != nil {
		d.cfg.Gate(r.Context(), dl)
	}
	status, answer := d.forward(r, body)

	d.mu.Lock()
	d.inFlight--
	d.lastEvent = time.Now()
	d.answers[dl.ID] = append(d.answers[dl.ID], status)
	d.timeline[dl.ID] = append(d.timeline[dl.ID], fmt.Sprintf("%d@%.1fs-%.1fs", status, arrived.Sub(d.born).Seconds(), time.Since(d.born).Seconds()))
	d.byStatus[status]++
	if acked(status) && d.cfg.Supplier != nil {
		if key := d.key(dl); d.cfg.Supplier.accepted(key) == 0 {
			d.broken = append(d.broken, fmt.Sprintf("message %s (key %s) answered %d before the supplier did its work", dl.ID, key, status))
		}
	}
	d.mu.Unlock()

	w.WriteHeader(status)
	w.Write(answer)
}

// forward relays the push to a process and returns its answer: 502 when
// the process could not be reached or died before answering.
func (d *door) forward(r *http.Request, body []byte) (int, []byte) {
	base := d.cfg.Pick()
	if base == "" {
		return http.StatusServiceUnavailable, []byte("door: no instance is up\n")
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, base+d.cfg.Route, bytes.NewReader(body))
	if err != nil {
		return http.StatusInternalServerError, []byte(err.Error())
	}
	req.Header = r.Header.Clone()
	req.Header.Del("Connection")
	resp, err := d.client.Do(req)
	if err != nil {
		return http.StatusBadGateway, []byte("door: " + err.Error() + "\n")
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, answer
}

// key is the idempotency key example-run uses for dl on the door's route.
func (d *door) key(dl delivery) string {
	switch d.cfg.Route {
	case "/orders":
		return "order_id:" + dl.Attrs["order_id"]
	case "/po-updates":
		return "po-update:" + dl.ID
	case "/pipeline/shipments":
		return shipmentKey(dl)
	default:
		return "msg:" + dl.ID
	}
}

// history returns the status of each delivery of message id, in order.
func (d *door) history(id string) []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.answers[id])
}

// story returns the status and the arrival and answer times (seconds
// since the door opened) of each delivery of message id.
func (d *door) story(id string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.timeline[id])
}

// count returns how many deliveries were answered with status.
func (d *door) count(status int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byStatus[status]
}

// deliveries returns how many deliveries were answered in all.
func (d *door) deliveries() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.byStatus {
		n += c
	}
	return n
}

// nacks returns how many deliveries were answered with a nack.
func (d *door) nacks() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for status, c := range d.byStatus {
		if !acked(status) {
			n += c
		}
	}
	return n
}

// unacked returns those of ids whose latest delivery was not acked (or
// that never arrived): the emulator still owes a delivery of each.
func (d *door) unacked(ids []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, id := range ids {
		if a := d.answers[id]; len(a) == 0 || !acked(a[len(a)-1]) {
			out = append(out, id)
		}
	}
	return out
}

// quiet reports how long the door has had no delivery in flight and none
// arriving.
func (d *door) quiet() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inFlight > 0 {
		return 0
	}
	return time.Since(d.lastEvent)
}

// waiting returns how many deliveries are being forwarded right now.
func (d *door) waiting() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inFlight
}

// violations returns the acks that came before their work was done.
func (d *door) violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.broken)
}

// settle waits until the emulator has nothing left to deliver through
// doors: every one of ids is acked at every door, and then no delivery
// arrives for quietPeriod. It fails t if any door acked a message before
// the supplier had done its work.
func settle(t testing.TB, within time.Duration, ids []string, doors ...*door) {
	t.Helper()
	eventually(t, within, func() error {
		for i, d := range doors {
			if u := d.unacked(ids); len(u) > 0 {
				return fmt.Errorf("door %d: %d of %d messages not acked yet, e.g. %q (answers %v)",
					i, len(u), len(ids), u[0], d.history(u[0]))
			}
			if q := d.quiet(); q < quietPeriod {
				return fmt.Errorf("door %d: still delivering (quiet for %v of %v)", i, q.Round(time.Millisecond), quietPeriod)
			}
		}
		return nil
	})
	for i, d := range doors {
		for _, v := range d.violations() {
			t.Errorf("door %d: acknowledged unprocessed: %s", i, v)
		}
	}
}
