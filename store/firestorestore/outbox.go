package firestorestore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store/internal/layout"
	"github.com/idemgate/idemgate/store/internal/outboxq"
)

// outboxSuffix names the outbox collection after the records' sibling
// collection ("idemgate_records_outbox").
const outboxSuffix = "_outbox"

// outboxDoc is an outgoing message in layout.Message, the attributes as a
// map. Its ID is its child key, so a retried transaction writes the same
// document.
type outboxDoc outboxq.Stored

func (d *outboxDoc) fields() map[string]any {
	return encode(layout.Message, (*outboxq.Stored)(d), encodeMessage)
}

// state returns the updates of the fields a Take, a Settle or a Revive
// changes, so that the payload is not written again.
func (d *outboxDoc) state() []firestore.Update {
	return changes(layout.Message, (*outboxq.Stored)(d), layout.Changed, encodeMessage)
}

// encodeMessage stores the attributes as a map of strings, and no data as
// empty bytes.
func encodeMessage(name string, v any) any {
	switch v := v.(type) {
	case map[string]string:
		m := make(map[string]any, len(v))
		for k, s := range v {
			m[k] = s
		}
		return m
	case []byte:
		if v == nil {
			return []byte{}
		}
	}
	return v
}

// parseOutbox reads an outbox document; a known field of the wrong type is
// an error, an unknown one is ignored.
func parseOutbox(data map[string]any) (outboxDoc, error) {
	var m outboxq.Stored
	err := decode(layout.Message, &m, data, func(name string, v any) (any, error) {
		av, ok := v.(map[string]any)
		if name != layout.Attributes || !ok {
			return v, nil
		}
		attrs := make(map[string]string, len(av))
		for k, x := range av {
			s, isStr := x.(string)
			if !isStr {
				return nil, fmt.Errorf("field %s.%s holds a %T", layout.Attributes, k, x)
			}
			attrs[k] = s
		}
		return attrs, nil
	})
	if err == nil {
		err = layout.CheckMessage(&m, "field")
	}
	if err != nil {
		return outboxDoc{}, err
	}
	return outboxDoc(m), nil
}

// The fields of an order key's sequence document (outboxq.Seq), whose ID
// is the order key; due is absent when the key has no message. CompleteTx
// reads and writes it in its transaction, so the database, not a
// process's clock, orders the key's messages.
const (
	seqLast = "last"
	seqDue  = "due"
)

// parseSeq reads a sequence document: nil when it does not exist.
func parseSeq(snap *firestore.DocumentSnapshot) (*outboxq.Seq, error) {
	if !snap.Exists() {
		return nil, nil
	}
	var sq outboxq.Seq
	var ok bool
	if sq.Last, ok = snap.Data()[seqLast].(int64); !ok {
		return nil, fmt.Errorf("sequence document %q: field %q holds a %T", snap.Ref.ID, seqLast, snap.Data()[seqLast])
	}
	if d, has := snap.Data()[seqDue]; has {
		if sq.Due, ok = d.(time.Time); !ok {
			return nil, fmt.Errorf("sequence document %q: field %q holds a %T", snap.Ref.ID, seqDue, d)
		}
	}
	return &sq, nil
}

func seqFields(sq *outboxq.Seq) map[string]any {
	f := map[string]any{seqLast: sq.Last}
	if !sq.Due.IsZero() {
		f[seqDue] = sq.Due
	}
	return f
}

// seqSuffix names the sequences' collection ("idemgate_records_outbox_seq").
const seqSuffix = outboxSuffix + "_seq"

func (s *Store) seqs() *firestore.CollectionRef   { return s.sibling(seqSuffix) }
func (s *Store) outbox() *firestore.CollectionRef { return s.sibling(outboxSuffix) }

// sibling returns the collection next to the records' named with suffix.
func (s *Store) sibling(suffix string) *firestore.CollectionRef {
	if p := s.coll.Parent; p != nil {
		return p.Collection(s.coll.ID + suffix)
	}
	return s.client.Collection(s.coll.ID + suffix)
}

// Outbox is the outbox of a [Store]: the messages CompleteTx queued with
// the records, committed and not yet sent. It is the [relay.Source] a relay
// publishes from, and its [relay.DeadLetters]; safe for concurrent use,
// also by relays in other processes. Each message is a document of
// [Options.Collection] + "_outbox"; its queries need two composite indexes
// (see "The outbox: publishing from inside the transaction" in docs/stores/firestore.md).
//
// [relay.Source]: https://pkg.go.dev/github.com/idemgate/idemgate/relay#Source
// [relay.DeadLetters]: https://pkg.go.dev/github.com/idemgate/idemgate/relay#DeadLetters
type Outbox struct{ s *Store }

// Outbox returns the store's outbox. It does no I/O.
func (s *Store) Outbox() *Outbox { return &Outbox{s: s} }

// Firestore's limits on what CompleteTx writes. It refuses a message whose
// document could exceed MaxDocumentBytes (an upper bound, about 1 KiB over
// the payload, attributes and names), and messages that could exceed
// MaxCommitBytes, a request's limit, with 16 KiB for the record and the
// body's writes.
const (
	MaxDocumentBytes = 1 << 20
	MaxCommitBytes   = 10 << 20
)

// Backlog implements relay.Source; see docs/stores/firestore.md.
func (o *Outbox) Backlog(ctx context.Context) (int64, error) { return o.q().Backlog(ctx) }

// Stats implements relay.Stater; see docs/stores/firestore.md.
func (o *Outbox) Stats(ctx context.Context) (outbox.Stats, error) { return o.q().Stats(ctx) }

// Take implements relay.Source; see docs/stores/firestore.md.
func (o *Outbox) Take(ctx context.Context, limit int, lease time.Duration) ([]outbox.Pending, error) {
	return o.q().Take(ctx, limit, lease)
}

// Settle implements relay.Source in one transaction; see docs/stores/firestore.md.
func (o *Outbox) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	return o.q().Settle(ctx, sent, failed)
}

// Dead implements relay.DeadLetters: up to n dead messages, oldest first.
func (o *Outbox) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	return o.q().Dead(ctx, n)
}

// Revive implements relay.DeadLetters in one transaction; see docs/stores/firestore.md.
func (o *Outbox) Revive(ctx context.Context, ids ...string) (int, error) {
	return o.q().Revive(ctx, ids...)
}

func (o *Outbox) q() outboxq.Outbox { return outboxq.Outbox{DB: db{o.s}} }

// db is the outbox's [outboxq.DB].
type db struct{ s *Store }

func (d db) Now() time.Time { return d.s.now() }

func (d db) Free(ctx context.Context, now time.Time, limit int) ([]outboxq.Head, error) {
	return heads(ctx, d.s.outbox().Where(layout.OrderKey, "==", "").Where(layout.Due, "<=", now).
		OrderBy(layout.Due, firestore.Asc).OrderBy(layout.Enqueued, firestore.Asc).Limit(limit))
}

func (d db) First(ctx context.Context, orderKey string, limit int) ([]outboxq.Head, error) {
	return heads(ctx, d.s.outbox().Where(layout.OrderKey, "==", orderKey).OrderBy(layout.Seq, firestore.Asc).Limit(limit))
}

func heads(ctx context.Context, q firestore.Query) ([]outboxq.Head, error) {
	ids, docs, err := getAll(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]outboxq.Head, len(docs))
	for i, d := range docs {
		out[i] = d.Head(ids[i])
	}
	return out, nil
}

func getAll(ctx context.Context, q firestore.Query) ([]string, []*outboxq.Stored, error) {
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, nil, err
	}
	ids, docs := make([]string, len(snaps)), make([]*outboxq.Stored, len(snaps))
	for i, snap := range snaps {
		d, err := parseOutbox(snap.Data())
		if err != nil {
			return nil, nil, fmt.Errorf("outbox document %q: %w", snap.Ref.ID, err)
		}
		ids[i], docs[i] = snap.Ref.ID, (*outboxq.Stored)(&d)
	}
	return ids, docs, nil
}

func (d db) DueKeys(ctx context.Context, now time.Time, limit int) ([]outboxq.Key, error) {
	snaps, err := d.s.seqs().Where(seqDue, "<=", now).OrderBy(seqDue, firestore.Asc).Limit(limit).Documents(ctx).GetAll()
	if err != nil {
		return nil, err
	}
	keys := make([]outboxq.Key, 0, len(snaps))
	for _, snap := range snaps {
		sq, err := parseSeq(snap)
		if err != nil {
			return nil, err
		}
		keys = append(keys, outboxq.Key{OrderKey: snap.Ref.ID, Seq: *sq})
	}
	return keys, nil
}

func (d db) Count(ctx context.Context, dead bool) (int64, error) {
	op := "<"
	if dead {
		op = ">="
	}
	q := d.s.outbox().Where(layout.Due, op, outboxq.Never)
	res, err := q.NewAggregationQuery().WithCount("n").Get(ctx)
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

func (d db) Enqueued(ctx context.Context, n int, each func(*outboxq.Stored) bool) error {
	it := d.s.outbox().OrderBy(layout.Enqueued, firestore.Asc).Limit(n).Documents(ctx)
	defer it.Stop()
	for {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return err
		}
		doc, err := parseOutbox(snap.Data())
		if err != nil {
			return fmt.Errorf("outbox document %q: %w", snap.Ref.ID, err)
		}
		if !each((*outboxq.Stored)(&doc)) {
			return nil
		}
	}
}

func (d db) Dead(ctx context.Context, n int) ([]string, []*outboxq.Stored, error) {
	return getAll(ctx, d.s.outbox().OrderBy(layout.Died, firestore.Asc).Limit(n))
}

func (d db) Run(ctx context.Context, once bool, fn func(outboxq.Tx) error) error {
	var opts []firestore.TransactionOption
	if once {
		opts = append(opts, firestore.MaxAttempts(1))
	}
	err := d.s.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		return fn(txn{d.s, tx})
	}, opts...)
	if once && status.Code(err) == codes.Aborted {
		return outboxq.ErrRace
	}
	return err
}

type txn struct {
	s  *Store
	tx *firestore.Transaction
}

// Put writes the fields a Take, a Settle or a Revive changes, not the payload.
func (t txn) Put(id string, m *outboxq.Stored) error {
	return t.tx.Update(t.s.outbox().Doc(id), (*outboxDoc)(m).state())
}

func (t txn) PutSeq(orderKey string, sq *outboxq.Seq) error {
	return t.tx.Set(t.s.seqs().Doc(orderKey), seqFields(sq))
}

func (t txn) Delete(id string) error { return t.tx.Delete(t.s.outbox().Doc(id)) }

// Get reads, in one request, the documents of ids (nil for a missing one)
// and the sequences of orderKeys that exist.
func (t txn) Get(ids, orderKeys []string) ([]*outboxq.Stored, map[string]*outboxq.Seq, error) {
	var all []*firestore.DocumentRef
	for _, id := range ids {
		all = append(all, t.s.outbox().Doc(id))
	}
	for _, k := range orderKeys {
		all = append(all, t.s.seqs().Doc(k))
	}
	var snaps []*firestore.DocumentSnapshot
	if len(all) > 0 {
		var err error
		if snaps, err = t.tx.GetAll(all); err != nil {
			return nil, nil, err
		}
	}
	docs := make([]*outboxq.Stored, len(ids))
	for i, snap := range snaps[:len(ids)] {
		if !snap.Exists() {
			continue
		}
		d, err := parseOutbox(snap.Data())
		if err != nil {
			return nil, nil, fmt.Errorf("outbox document %q: %w", snap.Ref.ID, err)
		}
		docs[i] = (*outboxq.Stored)(&d)
	}
	seqs := make(map[string]*outboxq.Seq, len(orderKeys))
	for i, snap := range snaps[len(ids):] {
		sq, err := parseSeq(snap)
		if err != nil {
			return nil, nil, err
		}
		if sq != nil {
			seqs[orderKeys[i]] = sq
		}
	}
	return docs, seqs, nil
}

// queued is what a CompleteTx enqueues, and the sequences of its order
// keys, which it reads with the record.
type queued struct {
	ids  []string // the messages' child keys
	msgs []outboxq.Stored
	keys []string // the order keys, as outboxq.OrderKeys
	seqs []*firestore.DocumentRef
	last map[string]*outboxq.Seq // each key's sequence, as read
}

// queue prepares the messages a CompleteTx of parent enqueues (nil for
// none). Before any I/O it refuses a message Pub/Sub would refuse (see
// [outbox.Prepare]) or Firestore could not hold.
func (s *Store) queue(parent string, msgs []outbox.Message) (*queued, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	ps, err := outbox.Prepare(parent, msgs)
	if err != nil {
		return nil, fmt.Errorf("firestorestore: %w", err)
	}
	q := &queued{msgs: outboxq.Queued(ps, s.now()), last: map[string]*outboxq.Seq{}}
	for _, p := range ps {
		q.ids = append(q.ids, p.ChildKey)
	}
	// The document's name: its path, a byte per segment and 16 more, its ID.
	path := s.outbox().Path
	nameBytes := len(path) + strings.Count(path, "/") + 1 + 16 + 64 + 1
	size := func(m *outboxq.Stored) int {
		attrs := 0
		for k, v := range m.Attributes {
			attrs += len(k) + 1 + len(v) + 1
		}
		return outboxq.Size(m, nameBytes, attrs)
	}
	if err := outboxq.CheckSizes(q.msgs, size, MaxDocumentBytes, MaxCommitBytes, "document", "Firestore"); err != nil {
		return nil, fmt.Errorf("firestorestore: CompleteTx: %w", err)
	}
	q.keys = outboxq.OrderKeys(q.msgs)
	for _, k := range q.keys {
		q.seqs = append(q.seqs, s.seqs().Doc(k))
	}
	return q, nil
}

func (q *queued) read(snaps []*firestore.DocumentSnapshot) error {
	for i, snap := range snaps {
		sq, err := parseSeq(snap)
		if err != nil {
			return err
		}
		if sq == nil {
			sq = &outboxq.Seq{}
		}
		q.last[q.keys[i]] = sq
	}
	return nil
}

// enqueueTx writes q in tx once its sequences are read: each ordered
// message at its key's next place, and the sequences advanced. A retried
// transaction reads them again and writes the same documents.
func (s *Store) enqueueTx(tx *firestore.Transaction, q *queued) error {
	if q == nil {
		return nil
	}
	outboxq.Number(q.msgs, q.last)
	ob := s.outbox()
	for i := range q.msgs {
		if err := tx.Set(ob.Doc(q.ids[i]), (*outboxDoc)(&q.msgs[i]).fields()); err != nil {
			return err
		}
	}
	for i, k := range q.keys {
		if err := tx.Set(q.seqs[i], seqFields(q.last[k])); err != nil {
			return err
		}
	}
	return nil
}
