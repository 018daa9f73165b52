package datastorestore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store/internal/outboxq"
)

// outboxSuffix names the outbox kind after the records' kind: records of
// kind "IdemgateRecord" have their outgoing messages in kind
// "IdemgateRecordOutbox", in the same namespace.
const outboxSuffix = "Outbox"

// The properties of an outbox entity. Only due, enqueued, topic and
// orderingKey are indexed: the relay finds due messages, and the first
// messages of a topic's ordering key, by them.
const (
	obTopic    = "topic"
	obData     = "data"
	obAttrs    = "attributes" // JSON object of strings
	obOrdering = "orderingKey"
	obEnqueued = "enqueued" // when the transaction queued it, plus its index in the transaction (µs)
	obDue      = "due"      // when a relay may take it: enqueued, or the end of a relay's lease
	obToken    = "token"    // the lease of the relay that took it last ("" before any)
	obName     = "name"     // the name its child key was derived from
)

// outboxEntity is an outgoing message as Datastore loads and saves it. Its
// entity name is the message's child key, so a message has one entity
// however often its transaction is tried.
type outboxEntity outboxq.Stored

// Save implements datastore.PropertyLoadSaver.
func (e *outboxEntity) Save() ([]datastore.Property, error) {
	attrs, err := json.Marshal(e.Attributes)
	if err != nil {
		return nil, err
	}
	return []datastore.Property{
		{Name: obTopic, Value: e.Topic},
		{Name: obData, Value: e.Data, NoIndex: true},
		{Name: obAttrs, Value: string(attrs), NoIndex: true},
		{Name: obOrdering, Value: e.OrderingKey},
		{Name: obEnqueued, Value: e.Enqueued},
		{Name: obDue, Value: e.Due},
		{Name: obToken, Value: e.Token, NoIndex: true},
		{Name: obName, Value: e.Name, NoIndex: true},
	}, nil
}

// Load implements datastore.PropertyLoadSaver. Unknown properties are
// ignored; a known one of the wrong type is an error.
func (e *outboxEntity) Load(ps []datastore.Property) error {
	*e = outboxEntity{}
	for _, p := range ps {
		ok := true
		switch p.Name {
		case obTopic:
			e.Topic, ok = p.Value.(string)
		case obData:
			e.Data, ok = p.Value.([]byte)
			if p.Value == nil {
				ok = true
			}
		case obAttrs:
			var s string
			if s, ok = p.Value.(string); ok {
				if err := json.Unmarshal([]byte(s), &e.Attributes); err != nil {
					return fmt.Errorf("property %q: %w", p.Name, err)
				}
			}
		case obOrdering:
			e.OrderingKey, ok = p.Value.(string)
		case obEnqueued:
			e.Enqueued, ok = p.Value.(time.Time)
		case obDue:
			e.Due, ok = p.Value.(time.Time)
		case obToken:
			e.Token, ok = p.Value.(string)
		case obName:
			e.Name, ok = p.Value.(string)
		}
		if !ok {
			return fmt.Errorf("property %q holds a %T", p.Name, p.Value)
		}
	}
	if e.Topic == "" {
		return fmt.Errorf("property %q is missing", obTopic)
	}
	return nil
}

// outboxKey returns the key of the outbox entity named childKey.
func (s *Store) outboxKey(childKey string) *datastore.Key {
	k := datastore.NameKey(s.kind+outboxSuffix, childKey, nil)
	k.Namespace = s.namespace
	return k
}

// Outbox is the outbox of a [Store]: the messages that CompleteTx queued
// with the records, committed and not yet sent. It is the [relay.Source]
// a relay publishes from. It is safe for concurrent use, also by relays in
// other processes.
//
// Each message is an entity of kind [Options.Kind] + "Outbox" in the
// store's namespace, named by its child key. Take finds due messages with a
// query on the indexed property due, and the first messages of a topic's
// ordering key with an equality filter on orderingKey and topic ordered by
// enqueued, which needs a composite index in production (see
// docs/stores/datastore.md). Settle deletes what was sent; nothing else
// deletes outbox entities.
//
// [relay.Source]: https://pkg.go.dev/github.com/idemgate/idemgate/relay#Source
type Outbox struct{ s *Store }

// Outbox returns the store's outbox. It does no I/O.
func (s *Store) Outbox() *Outbox { return &Outbox{s: s} }

// Backlog implements relay.Source: how many messages are committed and
// unsent, held or not.
func (o *Outbox) Backlog(ctx context.Context) (int64, error) {
	n, err := o.s.client.Count(ctx, datastore.NewQuery(o.s.kind+outboxSuffix).Namespace(o.s.namespace))
	return int64(n), err
}

// enqueueTx queues the messages of the claim keyed parent in tx, as
// entities named by their child keys (see [outbox.Prepare]). Each message
// is stamped a microsecond after the one before it, so that a relay
// publishes them in their order. A retried transaction writes the same
// entities again.
func (s *Store) enqueueTx(tx *datastore.Transaction, parent string, msgs []outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ps, err := outbox.Prepare(parent, msgs)
	if err != nil {
		return fmt.Errorf("datastorestore: %w", err)
	}
	keys := make([]*datastore.Key, len(ps))
	ents := make([]*outboxEntity, len(ps))
	for i, q := range outboxq.Queued(ps, s.now()) {
		keys[i], ents[i] = s.outboxKey(ps[i].ChildKey), (*outboxEntity)(&q)
	}
	_, err = tx.PutMulti(keys, ents)
	return err
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
	kind := s.kind + outboxSuffix
	// Candidates: the due messages, oldest first.
	q := datastore.NewQuery(kind).Namespace(s.namespace).
		FilterField(obDue, "<=", s.now()).Order(obDue).Order(obEnqueued).Limit(limit)
	var ents []*outboxEntity
	keys, err := s.client.GetAll(ctx, q, &ents)
	if err != nil {
		return nil, err
	}
	heads := make([]outboxq.Head, len(ents))
	for i, e := range ents {
		heads[i] = outboxq.Head{ID: keys[i].Name, Topic: e.Topic, OrderingKey: e.OrderingKey}
	}
	names, err := outboxq.Plan(heads, limit, func(topic, orderingKey string) ([]string, error) {
		q := datastore.NewQuery(kind).Namespace(s.namespace).
			FilterField(obOrdering, "=", orderingKey).FilterField(obTopic, "=", topic).
			Order(obEnqueued).Limit(limit).KeysOnly()
		first, err := s.client.GetAll(ctx, q, nil)
		ids := make([]string, len(first))
		for i, k := range first {
			ids[i] = k.Name
		}
		return ids, err
	})
	if err != nil || len(names) == 0 {
		return nil, err
	}
	order := make([]*datastore.Key, len(names))
	for i, n := range names {
		order[i] = s.outboxKey(n)
	}
	token := rand.Text()
	type took struct {
		name string
		e    *outboxEntity
	}
	var taken []took
	var now time.Time // of the transaction that took them
	_, err = s.client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		taken = taken[:0]
		got := make([]*outboxEntity, len(order))
		for i := range got {
			got[i] = new(outboxEntity)
		}
		err := tx.GetMulti(order, got)
		var merr datastore.MultiError
		if err != nil && !errors.As(err, &merr) {
			return err
		}
		msgs := make([]*outboxq.Msg, len(order))
		for i, e := range got {
			if merr != nil && merr[i] != nil {
				if errors.Is(merr[i], datastore.ErrNoSuchEntity) {
					continue // sent and deleted since the query
				}
				return merr[i]
			}
			msgs[i] = &outboxq.Msg{Topic: e.Topic, OrderingKey: e.OrderingKey, Due: e.Due}
		}
		now = s.now()
		var putKeys []*datastore.Key
		var putEnts []*outboxEntity
		for _, i := range outboxq.Pick(msgs, now) {
			e := got[i]
			e.Due, e.Token = now.Add(lease), token
			putKeys, putEnts = append(putKeys, order[i]), append(putEnts, e)
			taken = append(taken, took{order[i].Name, e})
		}
		if len(putKeys) == 0 {
			return nil
		}
		_, err = tx.PutMulti(putKeys, putEnts)
		return err
	}, datastore.MaxAttempts(1))
	if errors.Is(err, datastore.ErrConcurrentTransaction) || status.Code(err) == codes.Aborted {
		return nil, nil // another relay's transaction won: poll again
	}
	if err != nil {
		return nil, err
	}
	// Publish in the order of enqueueing.
	slices.SortStableFunc(taken, func(a, b took) int { return a.e.Enqueued.Compare(b.e.Enqueued) })
	out := make([]outbox.Pending, len(taken))
	for i, t := range taken {
		out[i] = (*outboxq.Stored)(t.e).Pending(t.name, token, now)
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

// markSent deletes the outbox entities of messages a relay published.
func (s *Store) markSent(ctx context.Context, ps []outbox.Pending) error {
	if len(ps) == 0 {
		return nil
	}
	return s.client.DeleteMulti(ctx, s.outboxKeys(ps))
}

// outboxKeys returns the keys of the entities of ps.
func (s *Store) outboxKeys(ps []outbox.Pending) []*datastore.Key {
	keys := make([]*datastore.Key, len(ps))
	for i, p := range ps {
		keys[i] = s.outboxKey(p.ID)
	}
	return keys
}

// releaseOutbox makes messages a relay took but could not publish due again
// at after, if the Take that handed them out still holds them.
func (s *Store) releaseOutbox(ctx context.Context, ps []outbox.Pending, after time.Time) error {
	if len(ps) == 0 {
		return nil
	}
	keys := s.outboxKeys(ps)
	_, err := s.client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		got := make([]*outboxEntity, len(keys))
		for i := range got {
			got[i] = new(outboxEntity)
		}
		err := tx.GetMulti(keys, got)
		var merr datastore.MultiError
		if err != nil && !errors.As(err, &merr) {
			return err
		}
		var putKeys []*datastore.Key
		var putEnts []*outboxEntity
		for i, e := range got {
			if merr != nil && merr[i] != nil || e.Token != ps[i].Token {
				continue // gone, or taken by another relay since
			}
			e.Due = after
			putKeys, putEnts = append(putKeys, keys[i]), append(putEnts, e)
		}
		_, err = tx.PutMulti(putKeys, putEnts)
		return err
	})
	return err
}
