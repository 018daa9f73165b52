package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/example"
)

func TestFailureConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	got, err := failureConfigFromEnv(env(nil))
	if err != nil || got != (failureConfig{}) {
		t.Errorf("no variables: %+v, %v; want the defaults (off)", got, err)
	}
	got, err = failureConfigFromEnv(env(map[string]string{"IDEMGATE_MAX_ATTEMPTS": "3", "IDEMGATE_WAIT_FOR_HOLDER": "5s", "IDEMGATE_TERMINAL": "supplier-4xx"}))
	if want := (failureConfig{MaxAttempts: 3, WaitForHolder: 5 * time.Second, SupplierRefusalIsFinal: true}); err != nil || got != want {
		t.Errorf("all set: %+v, %v; want %+v", got, err, want)
	}
	for _, kv := range []map[string]string{{"IDEMGATE_MAX_ATTEMPTS": "-1"}, {"IDEMGATE_MAX_ATTEMPTS": "x"},
		{"IDEMGATE_WAIT_FOR_HOLDER": "5"}, {"IDEMGATE_TERMINAL": "all"}} {
		if _, err := failureConfigFromEnv(env(kv)); err == nil {
			t.Errorf("%v: no error", kv)
		}
	}
}

// TestSupplierRefused: the supplier's 4xx is terminal, but for the two
// that say "try later"; a 5xx and a network error are retried.
func TestSupplierRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"422", &example.SupplierError{Status: 422}, true},
		{"400, wrapped", fmt.Errorf("send: %w", &example.SupplierError{Status: 400}), true},
		{"408", &example.SupplierError{Status: 408}, false},
		{"429", &example.SupplierError{Status: 429}, false},
		{"500", &example.SupplierError{Status: 500}, false},
		{"network error", errors.New("supplier: connection refused"), false},
	} {
		if got := supplierRefused(tc.err); got != tc.want {
			t.Errorf("supplierRefused(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
