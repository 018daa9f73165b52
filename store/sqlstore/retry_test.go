package sqlstore

import (
	"context"
	"errors"
	"testing"
)

var (
	errBusy   = errors.New("busy")
	errSyntax = errors.New("syntax error")
)

func retryStore() *Store {
	return &Store{spec: spec{transient: func(err error) bool { return errors.Is(err, errBusy) }}}
}

func TestRetry(t *testing.T) {
	tests := []struct {
		name     string
		errs     []error // what successive attempts return; then nil
		want     error
		attempts int
	}{
		{"success", nil, nil, 1},
		{"transient then success", []error{errBusy, errBusy}, nil, 3},
		{"snapshot race then success", []error{errSnapshotRace}, nil, 2},
		{"permanent error", []error{errSyntax}, errSyntax, 1},
		{"transient until the attempts run out", repeat(errBusy, maxAttempts+5), errBusy, maxAttempts},
		{"snapshot race until the attempts run out", repeat(errSnapshotRace, maxAttempts+5), errSnapshotRace, maxAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			err := retryStore().retry(t.Context(), func() error {
				n++
				if n <= len(tt.errs) {
					return tt.errs[n-1]
				}
				return nil
			})
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("retry = %v, want %v", err, tt.want)
			}
			if n != tt.attempts {
				t.Errorf("%d attempts, want %d", n, tt.attempts)
			}
		})
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err := retryStore().retry(ctx, func() error {
		n++
		cancel() // the context ends during the first pause
		return errBusy
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errBusy) || n != 1 {
		t.Errorf("retry with a cancelled context = %v after %d attempts, want context.Canceled joined with the last error after 1", err, n)
	}
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
