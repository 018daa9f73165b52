package idemgate_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	_ "modernc.org/sqlite"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/fakepubsub"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/relay"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/memstore"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// The Cloud Monitoring dashboard and alert policies under docs/monitoring
// name metrics as the OpenTelemetry Collector's googlemanagedprometheus
// exporter writes them (docs/monitoring.md). These tests hold every name
// they use to an instrument the code registers, with its unit and kind, as
// an in-memory OpenTelemetry reader sees it when the gateway and the relay
// really run, and check that each is aggregated as its kind allows.

// instrument is one metric as the SDK exports it.
type instrument struct {
	name, unit string
	kind       string // "counter" (monotonic sum), "updowncounter", "gauge" or "histogram"
}

// emitted runs the gateway and the relay under a ManualReader until every
// name in want has been exported or a deadline passes, and returns all the
// instruments seen by OpenTelemetry name.
func emitted(t *testing.T, want func(map[string]instrument) bool) map[string]instrument {
	t.Helper()
	ctx := t.Context()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })

	// The gateway: a win, a duplicate and a failure record the outcome
	// counter and the store latencies.
	mem, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(mem, &gateway.Options{MeterProvider: mp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context) error { return nil }
	g.Lock(ctx, "won", ok)
	g.Lock(ctx, "won", ok)
	g.Lock(ctx, "failed", func(context.Context) error { return errors.New("boom") })
	g.Lock(ctx, "poison", func(context.Context) error { return gateway.Permanent(errors.New("customer gone")) })
	g.Lock(ctx, "poison", ok) // already_failed

	// The relay, over a SQLite outbox and an in-process Pub/Sub server:
	// one message is published (lag), one goes to a missing topic and is
	// given up on its first failure (failures, dead); the backlog gauge is
	// read on each collection while it runs.
	_, client := fakepubsub.New(t) // topic projects/p/topics/out
	st := outboxStore(t)
	c, err := st.Claim(ctx, "order-1", time.Minute, store.ClaimOptions{})
	if err != nil || c.Status != store.Won {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CompleteTx(ctx, tx, c,
		outbox.Message{Name: "sent", Topic: "projects/p/topics/out", Data: []byte("a")},
		outbox.Message{Name: "dead", Topic: "projects/p/topics/missing", Data: []byte("b")}); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(st.Outbox(), client, &relay.Options{PollInterval: 10 * time.Millisecond, MaxAttempts: 1,
		MeterProvider: mp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("relay Run = %v, want context.Canceled", err)
		}
	}()

	got := map[string]instrument{}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				got[m.Name] = instrument{name: m.Name, unit: m.Unit, kind: kindOf(m.Data)}
			}
		}
		if want(got) || time.Now().After(deadline) {
			return got
		}
		select { // a collection is a reading, not a wait for an event: poll
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func outboxStore(t *testing.T) *sqlstore.Store {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "outbox.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	st, err := sqlstore.New(db, sqlstore.SQLite, &sqlstore.Options{Outbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTable(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

func kindOf(d metricdata.Aggregation) string {
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		return map[bool]string{true: "counter", false: "updowncounter"}[d.IsMonotonic]
	case metricdata.Sum[float64]:
		return map[bool]string{true: "counter", false: "updowncounter"}[d.IsMonotonic]
	case metricdata.Gauge[int64], metricdata.Gauge[float64]:
		return "gauge"
	case metricdata.Histogram[int64], metricdata.Histogram[float64]:
		return "histogram"
	}
	return fmt.Sprintf("%T", d)
}

// series is one Prometheus series name an instrument is exported as.
type series struct {
	inst instrument
	role string // "counter", "gauge", "bucket", "count" or "sum"
}

// promUnits are the unit suffixes of the exporter's naming: an annotation
// in braces ("{delivery}") adds none. A unit not listed here fails the
// test, to be decided when an instrument first uses it.
var promUnits = map[string]string{"": "", "s": "seconds", "ms": "milliseconds", "By": "bytes", "1": "ratio"}

// exportName is the Prometheus name of inst under the googlemanagedprometheus
// exporter's default naming (add_metric_suffixes): characters outside
// [a-zA-Z0-9_:] become '_', the unit's suffix follows, and a counter ends
// in _total. Its Cloud Monitoring metric type is
// prometheus.googleapis.com/NAME/KIND.
func exportName(inst instrument) (string, error) {
	name := regexp.MustCompile(`_+`).ReplaceAllString(regexp.MustCompile(`[^a-zA-Z0-9_:]`).ReplaceAllString(inst.name, "_"), "_")
	unit := inst.unit
	if strings.HasPrefix(unit, "{") && strings.HasSuffix(unit, "}") {
		unit = ""
	}
	suffix, ok := promUnits[unit]
	if !ok {
		return "", fmt.Errorf("%s: unit %q has no Prometheus suffix in promUnits", inst.name, inst.unit)
	}
	if suffix != "" && !strings.HasSuffix(name, "_"+suffix) {
		name += "_" + suffix
	}
	if inst.kind == "counter" {
		name += "_total"
	}
	return name, nil
}

// catalog maps every series name the instruments are queried by to its
// instrument, and lists their Cloud Monitoring metric types; errs are the
// instruments it has no naming rule for.
func catalog(insts map[string]instrument) (names map[string]series, types map[string]bool, errs []error) {
	names, types = map[string]series{}, map[string]bool{}
	for _, inst := range insts {
		base, err := exportName(inst)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		kind := inst.kind
		switch kind {
		case "counter", "gauge":
			names[base] = series{inst, kind}
		case "updowncounter": // written as a gauge
			kind = "gauge"
			names[base] = series{inst, kind}
		case "histogram":
			for _, role := range []string{"bucket", "count", "sum"} {
				names[base+"_"+role] = series{inst, role}
			}
		default:
			errs = append(errs, fmt.Errorf("%s: kind %s has no naming rule", inst.name, kind))
			continue
		}
		types["prometheus.googleapis.com/"+base+"/"+kind] = true
	}
	return names, types, errs
}

// metricName finds the metric names in a PromQL query: identifiers (and
// dotted OpenTelemetry names, which the exporter never writes) of idemgate.
var metricName = regexp.MustCompile(`idemgate[A-Za-z0-9_.:]*`)

// checkQuery returns what is wrong with query: a name no instrument is
// exported as, an aggregation its kind does not allow, or (for a chart,
// unit not "-") a unit other than the result's.
func checkQuery(query, unit string, names map[string]series) []string {
	var errs []string
	units := map[string]bool{}
	locs := metricName.FindAllStringIndex(query, -1)
	if len(locs) == 0 {
		return []string{"names no idemgate metric"}
	}
	for _, loc := range locs {
		name := query[loc[0]:loc[1]]
		s, ok := names[name]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s is no series the code exports (exported: %s)", name, strings.Join(slices.Sorted(maps.Keys(names)), ", ")))
			continue
		}
		fn := enclosing(query[:loc[0]])
		ranged := regexp.MustCompile(`^(\{[^}]*\})?\s*\[`).MatchString(query[loc[1]:])
		switch s.role {
		case "counter", "count", "sum":
			if fn != "rate" && fn != "irate" && fn != "increase" || !ranged {
				errs = append(errs, fmt.Sprintf("%s is a counter: query it as rate(…[w]) or increase(…[w]), not under %q", name, fn))
			} else if fn == "increase" {
				units["1"] = true
			} else {
				units["1/s"] = true
			}
		case "bucket":
			if fn != "rate" || !ranged || !strings.Contains(query, "histogram_quantile(") || !regexp.MustCompile(`by \([^)]*\ble\b`).MatchString(query) {
				errs = append(errs, fmt.Sprintf("%s is a histogram's buckets: query it as histogram_quantile(q, sum by (le, …) (rate(…[w])))", name))
			} else {
				units[map[string]string{"s": "s", "ms": "ms"}[s.inst.unit]] = true
			}
		case "gauge":
			if fn == "rate" || fn == "irate" || fn == "increase" || ranged {
				errs = append(errs, fmt.Sprintf("%s is a gauge: a rate or increase of it means nothing", name))
			}
			if u := s.inst.unit; u == "s" || u == "ms" {
				units[u] = true // a gauge of a duration charts in its unit
			} else {
				units["1"] = true
			}
		}
	}
	if unit != "-" && len(errs) == 0 {
		if len(units) != 1 || !units[unit] {
			errs = append(errs, fmt.Sprintf("unitOverride %q, want %v for what the query computes", unit, slices.Sorted(maps.Keys(units))))
		}
	}
	return errs
}

// enclosing is the function whose call is open at the end of prefix.
func enclosing(prefix string) string {
	m := regexp.MustCompile(`([a-z_]+)\(\s*$`).FindStringSubmatch(prefix)
	if m == nil {
		return ""
	}
	return m[1]
}

// The documents' schemas: the fields of Cloud Monitoring's Dashboard (v1)
// and AlertPolicy (v3) REST resources that the files use, decoded with
// unknown fields refused, so that a misspelled field fails here rather
// than at import.
type (
	dashboard struct {
		DisplayName  string `json:"displayName"`
		MosaicLayout struct {
			Columns int    `json:"columns"`
			Tiles   []tile `json:"tiles"`
		} `json:"mosaicLayout"`
	}
	tile struct {
		XPos   int    `json:"xPos"`
		YPos   int    `json:"yPos"`
		Width  int    `json:"width"`
		Height int    `json:"height"`
		Widget widget `json:"widget"`
	}
	widget struct {
		Title string `json:"title"`
		Text  *struct {
			Content string `json:"content"`
			Format  string `json:"format"`
		} `json:"text"`
		XYChart *struct {
			ChartOptions struct {
				Mode string `json:"mode"`
			} `json:"chartOptions"`
			DataSets []struct {
				PlotType        string `json:"plotType"`
				TargetAxis      string `json:"targetAxis"`
				TimeSeriesQuery struct {
					PrometheusQuery string `json:"prometheusQuery"`
					UnitOverride    string `json:"unitOverride"`
				} `json:"timeSeriesQuery"`
			} `json:"dataSets"`
			YAxis struct {
				Label string `json:"label"`
				Scale string `json:"scale"`
			} `json:"yAxis"`
		} `json:"xyChart"`
	}
	alertPolicy struct {
		DisplayName   string `json:"displayName"`
		Documentation struct {
			Content  string `json:"content"`
			MimeType string `json:"mimeType"`
		} `json:"documentation"`
		Combiner   string `json:"combiner"`
		Severity   string `json:"severity"`
		Conditions []struct {
			DisplayName string `json:"displayName"`
			PromQL      *struct {
				Query              string `json:"query"`
				Duration           string `json:"duration"`
				EvaluationInterval string `json:"evaluationInterval"`
			} `json:"conditionPrometheusQueryLanguage"`
		} `json:"conditions"`
		AlertStrategy struct {
			AutoClose string `json:"autoClose"`
		} `json:"alertStrategy"`
	}
)

// decodeStrict decodes the JSON file at path into v, refusing unknown
// fields and trailing data.
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if dec.More() {
		t.Fatalf("%s: data after the document", path)
	}
}

// query is one PromQL query of the documents, where it is and the unit
// it is charted in ("-" for an alert's).
type query struct{ where, promql, unit string }

// monitoringQueries reads the dashboard and the alert policies, checks
// their shape, and returns their queries.
func monitoringQueries(t *testing.T) []query {
	t.Helper()
	var qs []query
	var d dashboard
	decodeStrict(t, "docs/monitoring/dashboard.json", &d)
	cols := d.MosaicLayout.Columns
	if d.DisplayName == "" || cols != 12 && cols != 48 {
		t.Errorf("dashboard: displayName %q, columns %d; want a name and 12 or 48 columns", d.DisplayName, cols)
	}
	var cells = map[[2]int]string{}
	for i, tl := range d.MosaicLayout.Tiles {
		w := tl.Widget
		where := fmt.Sprintf("dashboard tile %d %q", i, w.Title)
		if tl.XPos < 0 || tl.YPos < 0 || tl.Width <= 0 || tl.Height <= 0 || tl.XPos+tl.Width > cols {
			t.Errorf("%s: at (%d,%d) %dx%d, outside the %d columns", where, tl.XPos, tl.YPos, tl.Width, tl.Height, cols)
		}
		for x := tl.XPos; x < tl.XPos+tl.Width; x++ {
			for y := tl.YPos; y < tl.YPos+tl.Height; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Fatalf("%s overlaps %s", where, other)
				}
				cells[[2]int{x, y}] = where
			}
		}
		if (w.Text == nil) == (w.XYChart == nil) || w.Title == "" {
			t.Errorf("%s: want a title and exactly one of text and xyChart", where)
			continue
		}
		if w.Text != nil {
			continue
		}
		c := w.XYChart
		if !slices.Contains([]string{"COLOR", "X_RAY", "STATS"}, c.ChartOptions.Mode) || !slices.Contains([]string{"LINEAR", "LOG10"}, c.YAxis.Scale) || len(c.DataSets) == 0 {
			t.Errorf("%s: chart mode %q, y scale %q, %d data sets", where, c.ChartOptions.Mode, c.YAxis.Scale, len(c.DataSets))
		}
		for _, ds := range c.DataSets {
			if !slices.Contains([]string{"LINE", "STACKED_AREA", "STACKED_BAR"}, ds.PlotType) || ds.TargetAxis != "Y1" {
				t.Errorf("%s: plotType %q, targetAxis %q", where, ds.PlotType, ds.TargetAxis)
			}
			qs = append(qs, query{where, ds.TimeSeriesQuery.PrometheusQuery, ds.TimeSeriesQuery.UnitOverride})
		}
	}
	alerts, err := filepath.Glob("docs/monitoring/alerts/*.json")
	if err != nil || len(alerts) == 0 {
		t.Fatalf("no alert policies: %v", err)
	}
	for _, path := range alerts {
		var p alertPolicy
		decodeStrict(t, path, &p)
		if p.DisplayName == "" || p.Documentation.Content == "" || p.Documentation.MimeType != "text/markdown" ||
			!slices.Contains([]string{"OR", "AND"}, p.Combiner) || !slices.Contains([]string{"CRITICAL", "ERROR", "WARNING"}, p.Severity) || len(p.Conditions) == 0 {
			t.Errorf("%s: want a displayName, markdown documentation, a combiner, a severity and conditions", path)
		}
		for _, c := range p.Conditions {
			if c.PromQL == nil || c.DisplayName == "" {
				t.Errorf("%s: want named PromQL conditions", path)
				continue
			}
			for _, dur := range []string{c.PromQL.Duration, c.PromQL.EvaluationInterval, p.AlertStrategy.AutoClose} {
				if _, err := time.ParseDuration(dur); err != nil || !strings.HasSuffix(dur, "s") {
					t.Errorf("%s: duration %q, want seconds such as \"600s\"", path, dur)
				}
			}
			qs = append(qs, query{filepath.Base(path), c.PromQL.Query, "-"})
		}
	}
	return qs
}

// TestMonitoringNamesRealInstruments holds the dashboard and the alert
// policies to the code: each metric they query is one the gateway or the
// relay really exports, under the name the documented export path gives
// it, aggregated as its kind allows and charted in the unit of the result;
// each outcome they select is one the gateway counts; and docs/monitoring.md
// lists exactly those metric types and explains every chart and policy.
func TestMonitoringNamesRealInstruments(t *testing.T) {
	qs := monitoringQueries(t)
	want := func(got map[string]instrument) bool {
		names, _, _ := catalog(got)
		for _, q := range qs {
			for _, n := range metricName.FindAllString(q.promql, -1) {
				if _, ok := names[n]; !ok {
					return false
				}
			}
		}
		return true
	}
	names, types, errs := catalog(emitted(t, want))
	for _, err := range errs {
		t.Error(err)
	}
	for _, q := range qs {
		for _, err := range checkQuery(q.promql, q.unit, names) {
			t.Errorf("%s: %s\n\tquery: %s", q.where, err, q.promql)
		}
		for _, m := range regexp.MustCompile(`outcome=~?"([^"]*)"`).FindAllStringSubmatch(q.promql, -1) {
			for _, o := range strings.Split(m[1], "|") {
				if !slices.Contains(outcomes, gateway.Outcome(o)) {
					t.Errorf("%s: outcome %q is none the gateway counts", q.where, o)
				}
			}
		}
	}

	doc, err := os.ReadFile("docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, q := range qs {
		for _, n := range metricName.FindAllString(q.promql, -1) {
			if s, ok := names[n]; ok {
				base, _ := exportName(s.inst)
				used[base] = true
			}
		}
	}
	for _, typ := range regexp.MustCompile(`prometheus\.googleapis\.com/[A-Za-z0-9_:]+/[a-z:]+`).FindAllString(string(doc), -1) {
		if !types[typ] {
			t.Errorf("docs/monitoring.md names %s, which no instrument is exported as (types: %v)", typ, slices.Sorted(maps.Keys(types)))
		}
	}
	for typ := range types {
		base := strings.TrimPrefix(typ[:strings.LastIndexByte(typ, '/')], "prometheus.googleapis.com/")
		if used[base] && !strings.Contains(string(doc), typ) {
			t.Errorf("docs/monitoring.md does not list %s, which the dashboard or an alert queries", typ)
		}
	}
	var d dashboard
	decodeStrict(t, "docs/monitoring/dashboard.json", &d)
	for _, tl := range d.MosaicLayout.Tiles {
		if tl.Widget.XYChart != nil && !strings.Contains(string(doc), tl.Widget.Title) {
			t.Errorf("docs/monitoring.md does not explain the chart %q", tl.Widget.Title)
		}
	}
	alerts, _ := filepath.Glob("docs/monitoring/alerts/*.json")
	for _, path := range alerts {
		if !strings.Contains(string(doc), "alerts/"+filepath.Base(path)) {
			t.Errorf("docs/monitoring.md does not explain %s", path)
		}
	}
}

// outcomes are the gateway's outcomes, the values of the outcome label.
var outcomes = []gateway.Outcome{
	gateway.OutcomeWon, gateway.OutcomeDuplicate, gateway.OutcomeInProgress, gateway.OutcomeFailed,
	gateway.OutcomeFencedOut, gateway.OutcomeCompleteError, gateway.OutcomeStoreError, gateway.OutcomeUnguarded,
	gateway.OutcomeNoKey, gateway.OutcomeRejected, gateway.OutcomeConflict, gateway.OutcomeCancelled,
	gateway.OutcomeAbandoned, gateway.OutcomeAlreadyFailed,
}

// TestMonitoringQueryChecks shows that checkQuery catches each mistake it
// is there for, on instruments of each kind.
func TestMonitoringQueryChecks(t *testing.T) {
	names, _, _ := catalog(map[string]instrument{
		"idemgate.deliveries": {name: "idemgate.deliveries", unit: "{delivery}", kind: "counter"},
		"idemgate.backlog":    {name: "idemgate.backlog", unit: "{message}", kind: "gauge"},
		"idemgate.lag":        {name: "idemgate.lag", unit: "s", kind: "histogram"},
	})
	for _, tc := range []struct {
		name, query, unit string
		ok                bool
	}{
		{"counter rate", `sum by (outcome) (rate(idemgate_deliveries_total{outcome="x"}[5m]))`, "1/s", true},
		{"counter increase", `sum(increase(idemgate_deliveries_total[1h]))`, "1", true},
		{"gauge", `max(idemgate_backlog)`, "1", true},
		{"quantile", `histogram_quantile(0.99, sum by (le) (rate(idemgate_lag_seconds_bucket[5m])))`, "s", true},
		{"histogram count rate", `sum(rate(idemgate_lag_seconds_count[5m])) > 0`, "-", true},
		{"raw counter", `sum(idemgate_deliveries_total)`, "1", false},
		{"rate of a gauge", `sum(rate(idemgate_backlog[5m]))`, "1/s", false},
		{"buckets without quantile", `sum(rate(idemgate_lag_seconds_bucket[5m]))`, "1/s", false},
		{"quantile without le", `histogram_quantile(0.99, sum(rate(idemgate_lag_seconds_bucket[5m])))`, "s", false},
		{"OpenTelemetry name", `sum(rate({"idemgate.deliveries"}[5m]))`, "1/s", false},
		{"unit suffix missing", `histogram_quantile(0.5, sum by (le) (rate(idemgate_lag_bucket[5m])))`, "s", false},
		{"_total missing", `sum(rate(idemgate_deliveries[5m]))`, "1/s", false},
		{"rate charted as a count", `sum(rate(idemgate_deliveries_total[5m]))`, "1", false},
		{"latency charted as a rate", `histogram_quantile(0.99, sum by (le) (rate(idemgate_lag_seconds_bucket[5m])))`, "1/s", false},
		{"no idemgate metric", `sum(rate(http_requests_total[5m]))`, "1/s", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := checkQuery(tc.query, tc.unit, names)
			if tc.ok != (len(errs) == 0) {
				t.Errorf("checkQuery(%s, %q) = %q; want ok %v", tc.query, tc.unit, errs, tc.ok)
			}
		})
	}
	if _, err := exportName(instrument{name: "x.size", unit: "KiBy", kind: "gauge"}); err == nil {
		t.Error("exportName accepted a unit it has no suffix for")
	}
}
