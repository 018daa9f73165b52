// Package example holds what cmd/example-run and cmd/example-function share:
// the business action (send an order to a supplier), Cloud Logging-friendly
// JSON logs, and the configuration read from the environment.
package example

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// Supplier is the business action of the examples: POST the message data to
// URL with the idempotency key in the Idempotency-Key header, so that the
// supplier can absorb the one re-send no lock can prevent (a crash between
// the send and the recording of DONE). With no URL it logs one line per
// execution instead.
type Supplier struct {
	URL    string
	Client *http.Client
	Log    *slog.Logger
}

// NewSupplier returns a Supplier posting to url (empty: log only).
func NewSupplier(url string, log *slog.Logger) *Supplier {
	return &Supplier{URL: url, Client: &http.Client{Timeout: 30 * time.Second}, Log: log}
}

// Send performs the action once. A non-2xx answer is a *SupplierError, so
// the delivery is nacked and retried, and a service can tell the answers
// no retry mends (a 4xx) from the others.
func (s *Supplier) Send(ctx context.Context, key string, data []byte, attrs map[string]string) error {
	if s.URL == "" {
		s.Log.LogAttrs(ctx, slog.LevelInfo, "order sent to supplier",
			slog.String("idempotency_key", key), slog.Int("bytes", len(data)), slog.Any("attributes", attrs))
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	if po := attrs["po_id"]; po != "" {
		req.Header.Set("Po-Id", po)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return fmt.Errorf("supplier: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &SupplierError{Status: resp.StatusCode, Text: resp.Status}
	}
	s.Log.LogAttrs(ctx, slog.LevelInfo, "order sent to supplier", slog.String("idempotency_key", key), slog.Int("status", resp.StatusCode))
	return nil
}

// SupplierError is the error of a Send the supplier answered with a
// status other than 2xx.
type SupplierError struct {
	Status int    // the status code, e.g. 422
	Text   string // the status line's text, e.g. "422 Unprocessable Entity"
}

func (e *SupplierError) Error() string { return "supplier answered " + e.Text }
