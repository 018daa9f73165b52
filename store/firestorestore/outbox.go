package firestorestore

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store/internal/outboxq"
)

// outboxSuffix names the outbox collection after the records' collection:
// records in "idemgate_records" have their outgoing messages in
// "idemgate_records_outbox", a sibling collection.
const outboxSuffix = "_outbox"

// The fields of an outbox document.
const (
	obTopic    = "topic"
	obData     = "data"
	obAttrs    = "attributes"  // map of strings
	obOrdering = "orderingKey" // "" for none
	obEnqueued = "enqueued"    // when the transaction queued it, plus its index in the transaction (µs)
	obDue      = "due"         // when a relay may take it: enqueued, or the end of a relay's lease
	obToken    = "token"       // the lease of the relay that took it last ("" before any)
	obName     = "name"        // the name its child key was derived from
)

// outboxDoc is an outgoing message as stored. Its document ID is the
// message's child key, so a message has one document however often its
// transaction is tried.
type outboxDoc outboxq.Stored

// fields returns the document of d.
func (d *outboxDoc) fields() map[string]any {
	attrs := make(map[string]any, len(d.Attributes))
	for k, v := range d.Attributes {
		attrs[k] = v
	}
	data := d.Data
	if data == nil {
		data = []byte{}
	}
	return map[string]any{
		obTopic:    d.Topic,
		obData:     data,
		obAttrs:    attrs,
		obOrdering: d.OrderingKey,
		obEnqueued: d.Enqueued,
		obDue:      d.Due,
		obToken:    d.Token,
		obName:     d.Name,
	}
}

// parseOutbox reads an outbox document. Unknown fields are ignored; a known
// one of the wrong type is an error.
func parseOutbox(data map[string]any) (outboxDoc, error) {
	var d outboxDoc
	for name, v := range data {
		ok := true
		switch name {
		case obTopic:
			d.Topic, ok = v.(string)
		case obData:
			d.Data, ok = v.([]byte)
		case obAttrs:
			var m map[string]any
			if m, ok = v.(map[string]any); ok {
				d.Attributes = make(map[string]string, len(m))
				for k, av := range m {
					s, isStr := av.(string)
					if !isStr {
						return outboxDoc{}, fmt.Errorf("field %s.%s holds a %T", obAttrs, k, av)
					}
					d.Attributes[k] = s
				}
			}
		case obOrdering:
			d.OrderingKey, ok = v.(string)
		case obEnqueued:
			d.Enqueued, ok = v.(time.Time)
		case obDue:
			d.Due, ok = v.(time.Time)
		case obToken:
			d.Token, ok = v.(string)
		case obName:
			d.Name, ok = v.(string)
		}
		if !ok {
			return outboxDoc{}, fmt.Errorf("field %q holds a %T", name, v)
		}
	}
	if d.Topic == "" {
		return outboxDoc{}, fmt.Errorf("field %q is missing", obTopic)
	}
	return d, nil
}

// outbox returns the outbox collection.
func (s *Store) outbox() *firestore.CollectionRef {
	if p := s.coll.Parent; p != nil {
		return p.Collection(s.coll.ID + outboxSuffix)
	}
	return s.client.Collection(s.coll.ID + outboxSuffix)
}

// Outbox is the outbox of a [Store]: the messages that CompleteTx queued
// with the records, committed and not yet sent. It is the [relay.Source]
// a relay publishes from. It is safe for concurrent use, also by relays in
// other processes.
//
// Each message is a document of the collection next to the records' named
// [Options.Collection] + "_outbox", whose ID is its child key. Take finds
// due messages with a query on the field due, and the first messages of a
// topic's ordering key with equality filters on orderingKey and topic
// ordered by enqueued, which needs a composite index in production (see
// docs/stores/firestore.md). Settle deletes what was sent; nothing else
// deletes outbox documents.
//
// [relay.Source]: https://pkg.go.dev/github.com/idemgate/idemgate/relay#Source
type Outbox struct{ s *Store }

// Outbox returns the store's outbox. It does no I/O.
func (s *Store) Outbox() *Outbox { return &Outbox{s: s} }

// Backlog implements relay.Source: how many messages are committed and
// unsent, held or not.
func (o *Outbox) Backlog(ctx context.Context) (int64, error) {
	res, err := o.s.outbox().NewAggregationQuery().WithCount("n").Get(ctx)
	if err != nil {
		return 0, err
	}
	var m map[string]any
	if err := res.DataTo(&m); err != nil {
		return 0, err
	}
	n, ok := m["n"].(int64)
	if !ok {
		return 0, fmt.Errorf("firestorestore: count of the outbox is a %T", m["n"])
	}
	return n, nil
}

// enqueueTx queues the messages of the claim keyed parent in tx, as
// documents whose IDs are their child keys (see [outbox.Prepare]). Each
// message is stamped a microsecond after the one before it, so that a
// relay publishes them in their order. A retried transaction writes the
// same documents again.
func (s *Store) enqueueTx(tx *firestore.Transaction, parent string, msgs []outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ps, err := outbox.Prepare(parent, msgs)
	if err != nil {
		return fmt.Errorf("firestorestore: %w", err)
	}
	ob := s.outbox()
	for i, q := range outboxq.Queued(ps, s.now()) {
		if err := tx.Set(ob.Doc(ps[i].ChildKey), (*outboxDoc)(&q).fields()); err != nil {
			return err
		}
	}
	return nil
}

// Take implements relay.Source: it leases up to limit due messages to the
// caller for lease and returns them in the order to publish them. A
// message is taken only with every earlier message of its topic and
// ordering key, and never while one of those is held by another Take.
// The messages are taken in one transaction; when another relay's
// transaction wins the race, Take returns none and no error, and the
// relay polls again.
func (o *Outbox) Take(ctx context.Context, limit int, lease time.Duration) ([]outbox.Pending, error) {
	s := o.s
	if limit <= 0 {
		return nil, nil
	}
	ob := s.outbox()
	// Candidates: the due messages, oldest first.
	cands, err := ob.Where(obDue, "<=", s.now()).OrderBy(obDue, firestore.Asc).OrderBy(obEnqueued, firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, err
	}
	heads := make([]outboxq.Head, len(cands))
	for i, c := range cands {
		d, err := parseOutbox(c.Data())
		if err != nil {
			return nil, fmt.Errorf("outbox document %q: %w", c.Ref.ID, err)
		}
		heads[i] = outboxq.Head{ID: c.Ref.ID, Topic: d.Topic, OrderingKey: d.OrderingKey}
	}
	ids, err := outboxq.Plan(heads, limit, func(topic, orderingKey string) ([]string, error) {
		first, err := ob.Where(obOrdering, "==", orderingKey).Where(obTopic, "==", topic).
			OrderBy(obEnqueued, firestore.Asc).Limit(limit).Documents(ctx).GetAll()
		ids := make([]string, len(first))
		for i, f := range first {
			ids[i] = f.Ref.ID
		}
		return ids, err
	})
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	order := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		order[i] = ob.Doc(id)
	}
	token := rand.Text()
	type took struct {
		id string
		d  outboxDoc
	}
	var taken []took
	var now time.Time // of the transaction that took them
	err = s.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		taken = taken[:0]
		snaps, err := tx.GetAll(order)
		if err != nil {
			return err
		}
		docs := make([]outboxDoc, len(snaps))
		msgs := make([]*outboxq.Msg, len(snaps))
		for i, snap := range snaps {
			if !snap.Exists() {
				continue // sent and deleted since the query
			}
			if docs[i], err = parseOutbox(snap.Data()); err != nil {
				return fmt.Errorf("outbox document %q: %w", snap.Ref.ID, err)
			}
			msgs[i] = &outboxq.Msg{Topic: docs[i].Topic, OrderingKey: docs[i].OrderingKey, Due: docs[i].Due}
		}
		now = s.now()
		for _, i := range outboxq.Pick(msgs, now) {
			d := docs[i]
			d.Due, d.Token = now.Add(lease), token
			if err := tx.Update(order[i], []firestore.Update{{Path: obDue, Value: d.Due}, {Path: obToken, Value: token}}); err != nil {
				return err
			}
			taken = append(taken, took{ids[i], d})
		}
		return nil
	}, firestore.MaxAttempts(1))
	if status.Code(err) == codes.Aborted {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Publish in the order of enqueueing.
	slices.SortStableFunc(taken, func(a, b took) int { return a.d.Enqueued.Compare(b.d.Enqueued) })
	out := make([]outbox.Pending, len(taken))
	for i, t := range taken {
		out[i] = (*outboxq.Stored)(&t.d).Pending(t.id, token, now)
	}
	return out, nil
}

// Settle implements relay.Source: it deletes sent and makes unsent due
// again at once, those of them the same Take still holds.
func (o *Outbox) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	if err := o.s.markSent(ctx, sent); err != nil {
		return err
	}
	unsent := make([]outbox.Pending, len(failed))
	for i, f := range failed {
		unsent[i] = f.Pending
	}
	return o.s.releaseOutbox(ctx, unsent, o.s.now())
}

// markSent deletes the outbox documents of messages a relay published.
func (s *Store) markSent(ctx context.Context, ps []outbox.Pending) error {
	if len(ps) == 0 {
		return nil
	}
	ob := s.outbox()
	bw := s.client.BulkWriter(ctx)
	jobs := make([]*firestore.BulkWriterJob, 0, len(ps))
	for _, p := range ps {
		j, err := bw.Delete(ob.Doc(p.ID))
		if err != nil {
			bw.End()
			return err
		}
		jobs = append(jobs, j)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			return err
		}
	}
	return nil
}

// releaseOutbox makes messages a relay took but could not publish due again
// at after, if the Take that handed them out still holds them.
func (s *Store) releaseOutbox(ctx context.Context, ps []outbox.Pending, after time.Time) error {
	if len(ps) == 0 {
		return nil
	}
	ob := s.outbox()
	refs := make([]*firestore.DocumentRef, len(ps))
	for i, p := range ps {
		refs[i] = ob.Doc(p.ID)
	}
	return s.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return err
		}
		for i, snap := range snaps {
			if !snap.Exists() {
				continue
			}
			if tok, _ := snap.Data()[obToken].(string); tok != ps[i].Token {
				continue // taken by another relay since
			}
			if err := tx.Update(refs[i], []firestore.Update{{Path: obDue, Value: after}}); err != nil {
				return err
			}
		}
		return nil
	})
}
