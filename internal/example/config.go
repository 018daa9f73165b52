package example

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Config is what the examples read from the environment.
type Config struct {
	Port        string        // PORT, default 8080
	StoreURL    string        // IDEMGATE_STORE, default memory://
	SupplierURL string        // SUPPLIER_URL; empty logs instead
	Lease       time.Duration // IDEMGATE_LEASE (e.g. 30s); 0 = the gateway's default
	LogLevel    slog.Level    // LOG_LEVEL: debug, info (default), warn, error
	Metrics     string        // IDEMGATE_METRICS: stdout (JSON to stderr every minute) or empty
	// OrdersFingerprint is IDEMGATE_ORDERS_FINGERPRINT: "reject" or
	// "accept" fingerprints the payloads of /orders, so that an order_id
	// reused for another order is a conflict (refused with 409, or
	// acknowledged as a duplicate); empty: no fingerprint.
	OrdersFingerprint string
}

// ConfigFromEnv reads the Config with getenv (os.Getenv in main).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{Port: getenv("PORT"), StoreURL: getenv("IDEMGATE_STORE"), SupplierURL: getenv("SUPPLIER_URL"), Metrics: getenv("IDEMGATE_METRICS")}
	if c.Port == "" {
		c.Port = "8080"
	}
	if v := getenv("IDEMGATE_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("IDEMGATE_LEASE=%q: want a positive duration like 30s", v)
		}
		c.Lease = d
	}
	switch c.OrdersFingerprint = getenv("IDEMGATE_ORDERS_FINGERPRINT"); c.OrdersFingerprint {
	case "", "reject", "accept":
	default:
		return c, fmt.Errorf("IDEMGATE_ORDERS_FINGERPRINT=%q: want reject or accept", c.OrdersFingerprint)
	}
	if v := getenv("LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(strings.ToUpper(v))); err != nil {
			return c, fmt.Errorf("LOG_LEVEL=%q: %w", v, err)
		}
	}
	return c, nil
}
