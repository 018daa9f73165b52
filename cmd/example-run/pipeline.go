package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/internal/example"
	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/pushenvelope"
	"github.com/idemgate/idemgate/store"
	"github.com/idemgate/idemgate/store/sqlstore"
)

// pipelineConfig is what the pipeline stage reads from the environment.
type pipelineConfig struct {
	table   string // IDEMGATE_PIPELINE_TABLE: the stage's records; default example_pipeline
	topic   string // PIPELINE_TOPIC: where shipments go; default shipments
	direct  bool   // PIPELINE_PUBLISH=direct: publish from the body (the anti-pattern)
	project string // GOOGLE_CLOUD_PROJECT, for direct publishing
}

func pipelineConfigFromEnv(getenv func(string) string) (pipelineConfig, error) {
	c := pipelineConfig{table: getenv("IDEMGATE_PIPELINE_TABLE"), topic: getenv("PIPELINE_TOPIC"), project: getenv("GOOGLE_CLOUD_PROJECT")}
	if c.table == "" {
		c.table = "example_pipeline"
	}
	if c.topic == "" {
		c.topic = "shipments"
	}
	switch v := getenv("PIPELINE_PUBLISH"); v {
	case "", "outbox":
	case "direct":
		if c.project == "" {
			return c, errors.New("PIPELINE_PUBLISH=direct needs GOOGLE_CLOUD_PROJECT")
		}
		c.direct = true
	default:
		return c, fmt.Errorf("PIPELINE_PUBLISH=%q: want outbox or direct", v)
	}
	return c, nil
}

// pipeline is the first stage of a two-stage pipeline: POST
// /pipeline/orders books each order and hands a shipment to the next stage
// through the outbox of a store of its own, beside st's records in the same
// database (tables <table>, <table>_outbox and <table>_orders). A relay
// (cmd/idemgate relay, or relay.Run) publishes the shipments; POST
// /pipeline/shipments is the next stage.
type pipeline struct {
	st     *sqlstore.Store
	insert string // order_id, amount
	topic  string
	direct *pubsub.Publisher // publish from the body instead; nil: the outbox
	log    *slog.Logger
}

// newPipeline creates the stage's tables unless they exist. It returns nil,
// and does nothing, when st is not a SQL store.
func newPipeline(ctx context.Context, st store.Store, cfg pipelineConfig, log *slog.Logger) (*pipeline, error) {
	base, ok := st.(*sqlstore.Store)
	if !ok {
		return nil, nil
	}
	ps, err := sqlstore.New(base.DB(), base.Dialect(), &sqlstore.Options{Table: cfg.table, Outbox: true})
	if err != nil {
		return nil, fmt.Errorf("IDEMGATE_PIPELINE_TABLE: %w", err)
	}
	orders := cfg.table + "_orders"
	p := &pipeline{st: ps, topic: cfg.topic, log: log, insert: "INSERT INTO " + orders + " (order_id, amount) VALUES (?, ?)"}
	ddl := "CREATE TABLE IF NOT EXISTS " + orders + " (order_id VARCHAR(255) NOT NULL, amount BIGINT NOT NULL)"
	if ps.Dialect() == sqlstore.PostgreSQL {
		p.insert = "INSERT INTO " + orders + " (order_id, amount) VALUES ($1, $2)"
	}
	// Instances that start together race on the DDL; the next attempt
	// finds the tables.
	for range 3 {
		if err = ps.CreateTable(ctx); err != nil {
			continue
		}
		if _, err = ps.DB().ExecContext(ctx, ddl); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create the pipeline's tables %s*: %w", cfg.table, err)
	}
	if cfg.direct {
		client, err := pubsub.NewClient(ctx, cfg.project)
		if err != nil {
			return nil, fmt.Errorf("PIPELINE_PUBLISH=direct: %w", err)
		}
		p.direct = client.Publisher(cfg.topic)
	}
	return p, nil
}

// withPipeline serves the pipeline's routes, POST /pipeline/orders and POST
// /pipeline/shipments, in front of h, which serves every other request.
// The second stage is a route of g, the Gateway of st that h's routes
// share. The first stage needs a SQL store (else it answers 501), and a
// Gateway of its own: its records are another store, in tables of their
// own beside st's.
func withPipeline(ctx context.Context, h http.Handler, g *gateway.Gateway, st store.Store, cfg example.Config, getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	pcfg, err := pipelineConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	sup := example.NewSupplier(cfg.SupplierURL, log)
	mux := http.NewServeMux()
	mux.Handle("/", h)
	// The second stage, keyed by the child key the relay's messages
	// carry: a shipment published twice reaches the supplier once.
	shipments := g.Route(&gateway.RouteOptions{Key: prefixed("shipment:", gateway.KeyFromChildKey)})
	mux.Handle("POST /pipeline/shipments", shipments.Push(func(ctx context.Context, m *pushenvelope.Message) error {
		return sup.Send(ctx, keyOf(ctx, m), m.Data, m.Attributes)
	}))
	p, err := newPipeline(ctx, st, pcfg, log)
	if err != nil {
		return nil, err
	}
	if p == nil {
		mux.HandleFunc("POST /pipeline/orders", noPipeline)
		return mux, nil
	}
	// The first stage keeps the gateway's default treatment of failures:
	// the IDEMGATE_MAX_ATTEMPTS family is for the routes of h.
	pg, err := newGateway(p.st, cfg, failureConfig{}, log)
	if err != nil {
		return nil, err
	}
	orders := pg.Route(&gateway.RouteOptions{Key: prefixed("pipeline:", gateway.KeyFromAttribute("order_id"))})
	mux.Handle("POST /pipeline/orders", orders.Push(p.book))
	return mux, nil
}

// book is the body of POST /pipeline/orders. In one transaction it records
// the claim done, enqueues the order's shipment and writes the order's row;
// an order whose amount attribute is not a positive integer is rolled back,
// standing for any rule a transaction may enforce, and acknowledged as
// rejected. A delivery that lost its claim commits nothing, and so ships
// nothing.
func (p *pipeline) book(ctx context.Context, m *pushenvelope.Message) error {
	c, ok := gateway.ClaimFromContext(ctx)
	if !ok {
		return errors.New("pipeline: no claim in the context")
	}
	id := m.Attributes["order_id"]
	ship := outbox.Message{
		Topic:      p.topic,
		Data:       m.Data,
		Attributes: map[string]string{"order_id": id, "enqueued_at": time.Now().UTC().Format(time.RFC3339Nano)},
		Name:       "shipment",
	}
	var msgs []outbox.Message
	if p.direct == nil {
		msgs = append(msgs, ship)
	} else if err := p.publish(ctx, ship); err != nil {
		return err
	}
	tx, err := p.st.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := p.st.CompleteTx(ctx, tx, c, msgs...); err != nil {
		return err // fenced out: nothing of this delivery commits
	}
	amount, perr := strconv.ParseInt(m.Attributes["amount"], 10, 64)
	if _, err := tx.ExecContext(ctx, p.insert, id, amount); err != nil {
		return err
	}
	if perr != nil || amount <= 0 {
		p.log.WarnContext(ctx, "pipeline order rejected", slog.String("order_id", id), slog.String("amount", m.Attributes["amount"]))
		return nil // rolled back; the gateway records the order done
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	p.log.InfoContext(ctx, "pipeline order booked", slog.String("order_id", id))
	return nil
}

// publish is PIPELINE_PUBLISH=direct: the message goes out now, with no
// child key, whatever becomes of the transaction.
func (p *pipeline) publish(ctx context.Context, m outbox.Message) error {
	_, err := p.direct.Publish(ctx, &pubsub.Message{Data: m.Data, Attributes: m.Attributes}).Get(ctx)
	return err
}

// noPipeline answers POST /pipeline/orders when the store is not SQL.
func noPipeline(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "POST /pipeline/orders needs a SQL store (IDEMGATE_STORE=postgres://…, mysql://… or sqlite://…)", http.StatusNotImplemented)
}
