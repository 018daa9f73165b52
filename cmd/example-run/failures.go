package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/example"
)

// failureConfig is how the service treats work that fails, read from the
// environment by failureConfigFromEnv. The zero value is the gateway's
// default: every failure is only released, and a copy that meets a live
// holder answers 503 at once.
type failureConfig struct {
	// MaxAttempts is IDEMGATE_MAX_ATTEMPTS: each key's attempt budget
	// (gateway.Options.MaxAttempts); 0, none.
	MaxAttempts int
	// WaitForHolder is IDEMGATE_WAIT_FOR_HOLDER: how long a copy waits
	// for a live holder to settle (gateway.Options.WaitForHolder); 0, no
	// wait.
	WaitForHolder time.Duration
	// SupplierRefusalIsFinal is IDEMGATE_TERMINAL=supplier-4xx: a 4xx
	// answer of the supplier makes the key FAILED at once.
	SupplierRefusalIsFinal bool
}

// failureConfigFromEnv reads the failureConfig with getenv.
func failureConfigFromEnv(getenv func(string) string) (failureConfig, error) {
	var c failureConfig
	var errs []error
	if v := getenv("IDEMGATE_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("IDEMGATE_MAX_ATTEMPTS=%q: want a whole number of attempts like 3 (0: no budget)", v))
		}
		c.MaxAttempts = n
	}
	if v := getenv("IDEMGATE_WAIT_FOR_HOLDER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("IDEMGATE_WAIT_FOR_HOLDER=%q: want a duration like 5s (0: no wait)", v))
		}
		c.WaitForHolder = d
	}
	switch v := getenv("IDEMGATE_TERMINAL"); v {
	case "":
	case "supplier-4xx":
		c.SupplierRefusalIsFinal = true
	default:
		errs = append(errs, fmt.Errorf("IDEMGATE_TERMINAL=%q: want supplier-4xx (or nothing)", v))
	}
	return c, errors.Join(errs...)
}

// apply sets c's options on o, the Options every route inherits.
func (c failureConfig) apply(o *gateway.Options) {
	o.MaxAttempts = c.MaxAttempts
	o.WaitForHolder = c.WaitForHolder
	if c.SupplierRefusalIsFinal {
		o.Terminal = supplierRefused
	}
}

// supplierRefused reports whether err is the supplier's 4xx: it refused
// the order itself (an unknown customer, an invalid item), and sending it
// again cannot succeed until someone fixes the cause. A 408 or 429 is the
// supplier's own trouble, retried like a 5xx.
func supplierRefused(err error) bool {
	se, ok := errors.AsType[*example.SupplierError](err)
	return ok && se.Status >= 400 && se.Status < 500 && se.Status != 408 && se.Status != 429
}
