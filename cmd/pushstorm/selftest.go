package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// selfTarget is the endpoint -self-test pushes to: a deliberately small
// idempotent consumer, keyed on the order_id attribute, whose business action
// is a POST to the supplier. It exists to check pushstorm itself (chaos in,
// exactly-once out) without any other program; it is not a model of idemgate.
// It is safe for concurrent use.
//
// Per order_id: done → 204 (duplicate, ack); running elsewhere → 503 (nack,
// retried later); otherwise run the action: 2xx from the supplier → done and
// 200, anything else → forget the key and 500, so the redelivery runs again.
type selfTarget struct {
	supplierURL string
	client      *http.Client

	mu   sync.Mutex
	done map[string]bool // order_id → true once done, false while running; guarded by mu
}

func newSelfTarget(supplierURL string, client *http.Client) *selfTarget {
	return &selfTarget{supplierURL: supplierURL, client: client, done: map[string]bool{}}
}

func (t *selfTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, attrs, err := readPush(r)
	if err != nil {
		http.Error(w, "self-test: "+err.Error(), http.StatusBadRequest)
		return
	}
	key := attrs["order_id"]
	if key == "" {
		http.Error(w, "self-test: no order_id attribute", http.StatusBadRequest)
		return
	}

	t.mu.Lock()
	isDone, seen := t.done[key]
	if !seen {
		t.done[key] = false
	}
	t.mu.Unlock()
	switch {
	case isDone:
		w.WriteHeader(http.StatusNoContent)
		return
	case seen:
		http.Error(w, "self-test: order in progress elsewhere", http.StatusServiceUnavailable)
		return
	}

	err = t.act(r, key, attrs["po_id"], data)
	t.mu.Lock()
	if err == nil {
		t.done[key] = true
	} else {
		delete(t.done, key)
	}
	t.mu.Unlock()
	if err != nil {
		http.Error(w, "self-test: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// act is the business action: hand the order to the supplier.
func (t *selfTarget) act(r *http.Request, key, po string, data []byte) error {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, t.supplierURL, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if po != "" {
		req.Header.Set("Po-Id", po)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("supplier answered %s", resp.Status)
	}
	return nil
}

// readPush decodes a push delivery in either form pushstorm sends.
func readPush(r *http.Request) (data []byte, attrs map[string]string, err error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return nil, nil, err
	}
	if r.Header.Get(hdrMessageID) != "" { // unwrapped, attributes are headers
		attrs = map[string]string{}
		for _, name := range []string{"order_id", "po_id"} {
			attrs[name] = r.Header.Get(name)
		}
		return body, attrs, nil
	}
	var pb pushBody
	if err := json.Unmarshal(body, &pb); err != nil {
		return nil, nil, fmt.Errorf("not a wrapped push body: %w", err)
	}
	return pb.Message.Data, pb.Message.Attributes, nil
}
