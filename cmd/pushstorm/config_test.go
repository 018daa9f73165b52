package main

import (
	"errors"
	"flag"
	"io"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig([]string{"-url", "http://127.0.0.1:8080/"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		URL: "http://127.0.0.1:8080/", N: 100, Concurrency: 16, Dup: 0.2, Concurrent: 0.1, Republish: 0.1,
		MaxAttempts: 10, BackoffMin: 100 * time.Millisecond, BackoffMax: 2 * time.Second, Timeout: 10 * time.Second,
		Form: formWrapped, Subscription: "projects/demo/subscriptions/orders", OrderPrefix: "o-", ExpectKeys: expectAuto, Path: "/",
	}
	if len(c.Attrs) != 0 {
		t.Errorf("attrs = %v, want none", c.Attrs)
	}
	c.Attrs = nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestParseConfigFlags(t *testing.T) {
	c, err := parseConfig([]string{
		"-url", "https://push.example/", "-ack-deadline", "3s", "-attr", "env=test", "-attr", "team=x",
		"-form", "unwrapped", "-seed", "7", "-order-prefix", "run2-", "-max-attempts", "0", "-supplier", ":0", "-expect-once", "-expect-keys", "12",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 3*time.Second {
		t.Errorf("-ack-deadline 3s gave timeout %v; it is an alias of -timeout", c.Timeout)
	}
	if want := map[string]string{"env": "test", "team": "x"}; !maps.Equal(c.Attrs, want) {
		t.Errorf("attrs = %v, want %v", c.Attrs, want)
	}
	if c.Form != formUnwrapped || c.Seed != 7 || c.OrderPrefix != "run2-" || c.MaxAttempts != 0 || !c.ExpectOnce || c.ExpectKeys != "12" {
		t.Errorf("flags not applied: %+v", c)
	}
}

func TestParseConfigSelfTest(t *testing.T) {
	c, err := parseConfig([]string{"-self-test"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.ExpectOnce {
		t.Error("-self-test must imply -expect-once")
	}
	if c.supplierOnly() {
		t.Error("-self-test is not a supplier-only run")
	}
	c, _ = parseConfig([]string{"-supplier", "127.0.0.1:0"}, io.Discard)
	if !c.supplierOnly() {
		t.Error("-supplier without -url must serve the supplier only")
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no target", nil, "-url is required"},
		{"url and self-test", []string{"-self-test", "-url", "http://x/"}, "exclusive"},
		{"not http", []string{"-url", "ftp://x/"}, "not an http(s) URL"},
		{"no host", []string{"-url", "http:///path"}, "not an http(s) URL"},
		{"n", []string{"-url", "http://x/", "-n", "0"}, "-n must be positive"},
		{"concurrency", []string{"-url", "http://x/", "-concurrency", "-1"}, "-concurrency must be positive"},
		{"dup", []string{"-url", "http://x/", "-dup", "-0.1"}, "-dup is a probability"},
		{"concurrent", []string{"-url", "http://x/", "-concurrent", "2"}, "-concurrent is a probability"},
		{"republish", []string{"-url", "http://x/", "-republish", "1.01"}, "-republish is a probability"},
		{"max attempts", []string{"-url", "http://x/", "-max-attempts", "-1"}, "-max-attempts"},
		{"backoff order", []string{"-url", "http://x/", "-backoff-min", "3s", "-backoff-max", "1s"}, "below -backoff-min"},
		{"timeout", []string{"-url", "http://x/", "-timeout", "0s"}, "-timeout must be positive"},
		{"form", []string{"-url", "http://x/", "-form", "json"}, "-form must be"},
		{"subscription", []string{"-url", "http://x/", "-subscription", ""}, "-subscription"},
		{"fail first", []string{"-url", "http://x/", "-supplier", ":0", "-supplier-fail-first", "-2"}, "-supplier-fail-first"},
		{"expect without supplier", []string{"-url", "http://x/", "-expect-once"}, "needs -supplier"},
		{"expect keys", []string{"-url", "http://x/", "-expect-keys", "some"}, "-expect-keys must be"},
		{"attr shape", []string{"-url", "http://x/", "-attr", "novalue"}, "want key=value"},
		{"attr overwrite", []string{"-url", "http://x/", "-attr", "order_id=1"}, "overwrite a generated attribute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := parseConfig(tc.args, &stderr)
			if err == nil {
				t.Fatalf("parseConfig(%q) succeeded, want an error about %q", tc.args, tc.want)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr does not explain %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}

func TestParseConfigReportsEveryProblem(t *testing.T) {
	var stderr strings.Builder
	parseConfig([]string{"-url", "http://x/", "-n", "0", "-dup", "3"}, &stderr)
	for _, want := range []string{"pushstorm: -n must be positive", "pushstorm: -dup is a probability"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks line %q:\n%s", want, stderr.String())
		}
	}
}

func TestParseConfigHelp(t *testing.T) {
	var stderr strings.Builder
	if _, err := parseConfig([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h gave %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"102, 200, 201, 202", "emulator nacks 202", "Exit status", "-supplier-fail-first"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestExpectedKeys(t *testing.T) {
	for _, tc := range []struct {
		url, flag string
		self      bool
		want      int
		unit      string
	}{
		{"http://h/orders", expectAuto, false, 10, "orders"},
		{"http://h/orders/", expectAuto, false, 10, "orders"},
		{"http://h/v1/orders?x=1", expectAuto, false, 10, "orders"},
		{"http://h/", expectAuto, false, 13, "messages"},
		{"http://h/po-updates", expectAuto, false, 13, "messages"},
		{"", expectAuto, true, 10, "orders"},
		{"http://h/", expectOrders, false, 10, "orders"},
		{"http://h/orders", expectMessages, false, 13, "messages"},
		{"http://h/orders", "7", false, 7, "keys"},
	} {
		c := config{URL: tc.url, ExpectKeys: tc.flag, SelfTest: tc.self}
		if got := c.expectedKeys(10, 13); got.Keys != tc.want || got.Unit != tc.unit || got.Why == "" {
			t.Errorf("expectedKeys(url %q, -expect-keys %s) = %+v, want %d %s with a reason", tc.url, tc.flag, got, tc.want, tc.unit)
		}
	}
}
