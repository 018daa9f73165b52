package datastorestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/idemgate/idemgate/outbox"
	"github.com/idemgate/idemgate/store/internal/layout"
	"github.com/idemgate/idemgate/store/internal/outboxq"
)

// outboxSuffix names the outbox kind after the records' kind
// ("IdemgateRecordOutbox"), in the same namespace.
const outboxSuffix = "Outbox"

// outboxEntity is an outgoing message in layout.Message, the attributes as
// a JSON object. It is named by its child key, so a retried transaction
// writes the same entity.
type outboxEntity outboxq.Stored

// Save implements datastore.PropertyLoadSaver.
func (e *outboxEntity) Save() ([]datastore.Property, error) {
	return save(layout.Message, (*outboxq.Stored)(e), func(name string, v any) (any, error) {
		if name != layout.Attributes {
			return v, nil
		}
		b, err := json.Marshal(v)
		return string(b), err
	})
}

// Load implements datastore.PropertyLoadSaver. Unknown properties are
// ignored; a known one of the wrong type is an error.
func (e *outboxEntity) Load(ps []datastore.Property) error {
	*e = outboxEntity{}
	err := load(layout.Message, (*outboxq.Stored)(e), ps, func(name string, v any) (any, error) {
		switch s, ok := v.(string); {
		case name == layout.Data && v == nil:
			return []byte(nil), nil
		case name == layout.Attributes && ok:
			var m map[string]string
			return m, json.Unmarshal([]byte(s), &m)
		}
		return v, nil
	})
	if err != nil {
		return err
	}
	return layout.CheckMessage((*outboxq.Stored)(e), "property")
}

// seqEntity is an order key's sequence (outboxq.Seq), named by the order
// key. CompleteTx reads and writes it in its transaction, so the database,
// not a process's clock, orders the key's messages.
type seqEntity struct {
	Last int64     `datastore:"last,noindex"`
	Due  time.Time `datastore:"due,omitempty"`
}

// seqSuffix names the sequences' kind ("IdemgateRecordOutboxSeq").
const seqSuffix = outboxSuffix + "Seq"

func (s *Store) seqKey(orderKey string) *datastore.Key    { return s.nameKey(seqSuffix, orderKey) }
func (s *Store) outboxKey(childKey string) *datastore.Key { return s.nameKey(outboxSuffix, childKey) }

// Outbox is the outbox of a [Store]: the messages CompleteTx queued with
// the records, committed and not yet sent. It is the [relay.Source] a relay
// publishes from, and its [relay.DeadLetters]; safe for concurrent use,
// also by relays in other processes. Each message is an entity of kind
// [Options.Kind] + "Outbox"; its queries need two composite indexes (see
// "The outbox" in docs/stores/datastore.md).
//
// [relay.Source]: https://pkg.go.dev/github.com/idemgate/idemgate/relay#Source
// [relay.DeadLetters]: https://pkg.go.dev/github.com/idemgate/idemgate/relay#DeadLetters
type Outbox struct{ s *Store }

// Outbox returns the store's outbox. It does no I/O.
func (s *Store) Outbox() *Outbox { return &Outbox{s: s} }

// Datastore's limits on what CompleteTx writes. It refuses a message whose
// entity could exceed MaxEntityBytes (an upper bound, about 1 KiB over the
// payload, attributes and names), and messages that could exceed
// MaxCommitBytes together with 16 KiB for the record and the body's writes.
const (
	MaxEntityBytes = 1_048_572
	MaxCommitBytes = 10 << 20
)

// Backlog implements relay.Source; see docs/stores/datastore.md.
func (o *Outbox) Backlog(ctx context.Context) (int64, error) { return o.q().Backlog(ctx) }

// Stats implements relay.Stater; see docs/stores/datastore.md.
func (o *Outbox) Stats(ctx context.Context) (outbox.Stats, error) { return o.q().Stats(ctx) }

// Take implements relay.Source; see docs/stores/datastore.md.
func (o *Outbox) Take(ctx context.Context, limit int, lease time.Duration) ([]outbox.Pending, error) {
	return o.q().Take(ctx, limit, lease)
}

// Settle implements relay.Source in one transaction; see docs/stores/datastore.md.
func (o *Outbox) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	return o.q().Settle(ctx, sent, failed)
}

// Dead implements relay.DeadLetters: up to n dead messages, oldest first.
func (o *Outbox) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	return o.q().Dead(ctx, n)
}

// Revive implements relay.DeadLetters in one transaction; see docs/stores/datastore.md.
func (o *Outbox) Revive(ctx context.Context, ids ...string) (int, error) {
	return o.q().Revive(ctx, ids...)
}

func (o *Outbox) q() outboxq.Outbox { return outboxq.Outbox{DB: db{o.s}} }

// db is the outbox's [outboxq.DB].
type db struct{ s *Store }

func (d db) Now() time.Time { return d.s.now() }

func (d db) query() *datastore.Query {
	return datastore.NewQuery(d.s.kind + outboxSuffix).Namespace(d.s.namespace)
}

func (d db) Free(ctx context.Context, now time.Time, limit int) ([]outboxq.Head, error) {
	return d.heads(ctx, d.query().FilterField(layout.OrderKey, "=", "").FilterField(layout.Due, "<=", now).Order(layout.Due).Order(layout.Enqueued).Limit(limit))
}

func (d db) First(ctx context.Context, orderKey string, limit int) ([]outboxq.Head, error) {
	return d.heads(ctx, d.query().FilterField(layout.OrderKey, "=", orderKey).Order(layout.Seq).Limit(limit))
}

func (d db) heads(ctx context.Context, q *datastore.Query) ([]outboxq.Head, error) {
	var ents []*outboxEntity
	keys, err := d.s.client.GetAll(ctx, q, &ents)
	heads := make([]outboxq.Head, len(ents))
	for i, e := range ents {
		heads[i] = (*outboxq.Stored)(e).Head(keys[i].Name)
	}
	return heads, err
}

func (d db) DueKeys(ctx context.Context, now time.Time, limit int) ([]outboxq.Key, error) {
	var ents []*seqEntity
	names, err := d.s.client.GetAll(ctx, datastore.NewQuery(d.s.kind+seqSuffix).Namespace(d.s.namespace).
		FilterField(layout.Due, "<=", now).Order(layout.Due).Limit(limit), &ents)
	if err != nil {
		return nil, err
	}
	keys := make([]outboxq.Key, len(ents))
	for i, e := range ents {
		keys[i] = outboxq.Key{OrderKey: names[i].Name, Seq: outboxq.Seq(*e)}
	}
	return keys, nil
}

func (d db) Count(ctx context.Context, dead bool) (int64, error) {
	op := "<"
	if dead {
		op = ">="
	}
	n, err := d.s.client.Count(ctx, d.query().FilterField(layout.Due, op, outboxq.Never))
	return int64(n), err
}

func (d db) Enqueued(ctx context.Context, n int, each func(*outboxq.Stored) bool) error {
	it := d.s.client.Run(ctx, d.query().Order(layout.Enqueued).Limit(n))
	for {
		var e outboxEntity
		_, err := it.Next(&e)
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil || !each((*outboxq.Stored)(&e)) {
			return err
		}
	}
}

func (d db) Dead(ctx context.Context, n int) ([]string, []*outboxq.Stored, error) {
	var ents []*outboxEntity
	keys, err := d.s.client.GetAll(ctx, d.query().Order(layout.Died).Limit(n), &ents)
	if err != nil {
		return nil, nil, err
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name
	}
	return names, stored(ents), nil
}

func (d db) Run(ctx context.Context, once bool, fn func(outboxq.Tx) error) error {
	opts := []datastore.TransactionOption{datastore.BeginLater}
	if once {
		opts = append(opts, datastore.MaxAttempts(1))
	}
	_, err := d.s.client.RunInTransaction(ctx, func(tx *datastore.Transaction) error {
		t := &txn{s: d.s, tx: tx}
		if err := fn(t); err != nil {
			return err
		}
		return t.commit()
	}, opts...)
	if once && (errors.Is(err, datastore.ErrConcurrentTransaction) || status.Code(err) == codes.Aborted) {
		return outboxq.ErrRace
	}
	return err
}

// txn is an [outboxq.Tx] that gathers its writes for one PutMulti.
type txn struct {
	s          *Store
	tx         *datastore.Transaction
	dels, puts []*datastore.Key
	ents       []any
}

func (t *txn) Put(id string, m *outboxq.Stored) error {
	t.puts, t.ents = append(t.puts, t.s.outboxKey(id)), append(t.ents, (*outboxEntity)(m))
	return nil
}

func (t *txn) PutSeq(orderKey string, sq *outboxq.Seq) error {
	t.puts, t.ents = append(t.puts, t.s.seqKey(orderKey)), append(t.ents, (*seqEntity)(sq))
	return nil
}

func (t *txn) Delete(id string) error {
	t.dels = append(t.dels, t.s.outboxKey(id))
	return nil
}

func (t *txn) commit() error {
	if len(t.dels) > 0 {
		if err := t.tx.DeleteMulti(t.dels); err != nil {
			return err
		}
	}
	if len(t.puts) == 0 {
		return nil
	}
	_, err := t.tx.PutMulti(t.puts, t.ents)
	return err
}

// stored returns got as the messages outboxq handles.
func stored(got []*outboxEntity) []*outboxq.Stored {
	out := make([]*outboxq.Stored, len(got))
	for i, e := range got {
		out[i] = (*outboxq.Stored)(e)
	}
	return out
}

// Get reads, in one lookup, the entities of ids (nil for a missing one)
// and the sequences of orderKeys that exist.
func (t *txn) Get(ids, orderKeys []string) ([]*outboxq.Stored, map[string]*outboxq.Seq, error) {
	got := make([]*outboxEntity, len(ids))
	all, dst := make([]*datastore.Key, 0, len(ids)+len(orderKeys)), make([]any, 0, len(ids)+len(orderKeys))
	for i, id := range ids {
		got[i] = new(outboxEntity)
		all, dst = append(all, t.s.outboxKey(id)), append(dst, got[i])
	}
	for _, k := range orderKeys {
		all, dst = append(all, t.s.seqKey(k)), append(dst, new(seqEntity))
	}
	if len(all) == 0 {
		return stored(got), nil, nil
	}
	err := t.tx.GetMulti(all, dst)
	var merr datastore.MultiError
	if err != nil && !errors.As(err, &merr) {
		return nil, nil, err
	}
	missing := func(i int) (bool, error) {
		if merr == nil || merr[i] == nil {
			return false, nil
		}
		if !errors.Is(merr[i], datastore.ErrNoSuchEntity) {
			return false, merr[i]
		}
		return true, nil
	}
	for i := range got {
		switch gone, err := missing(i); {
		case err != nil:
			return nil, nil, err
		case gone:
			got[i] = nil
		}
	}
	seqs := make(map[string]*outboxq.Seq, len(orderKeys))
	for i, k := range orderKeys {
		switch gone, err := missing(len(ids) + i); {
		case err != nil:
			return nil, nil, err
		case !gone:
			seqs[k] = (*outboxq.Seq)(dst[len(ids)+i].(*seqEntity))
		}
	}
	return stored(got), seqs, nil
}

// queued is what a CompleteTx enqueues, and the sequences of its order
// keys, which it reads with the record.
type queued struct {
	names  []string // the messages' child keys
	msgs   []outboxq.Stored
	keys   []string // the order keys, as outboxq.OrderKeys
	seqs   []*datastore.Key
	seqDst []any // the *seqEntity each seq is read into
}

// queue prepares the messages a CompleteTx of parent enqueues (nil for
// none). Before any I/O it refuses a message Pub/Sub would refuse (see
// [outbox.Prepare]) or Datastore could not hold.
func (s *Store) queue(parent string, msgs []outbox.Message) (*queued, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	ps, err := outbox.Prepare(parent, msgs)
	if err != nil {
		return nil, fmt.Errorf("datastorestore: %w", err)
	}
	q := &queued{msgs: outboxq.Queued(ps, s.now())}
	for _, p := range ps {
		q.names = append(q.names, p.ChildKey)
	}
	// The key: kind, name, namespace, and the project's and database's IDs.
	keyBytes := len(s.kind+outboxSuffix) + 64 + len(s.namespace) + 128
	size := func(m *outboxq.Stored) int {
		attrs, _ := json.Marshal(m.Attributes)
		return outboxq.Size(m, keyBytes, len(attrs))
	}
	if err := outboxq.CheckSizes(q.msgs, size, MaxEntityBytes, MaxCommitBytes, "entity", "Datastore"); err != nil {
		return nil, fmt.Errorf("datastorestore: CompleteTx: %w", err)
	}
	q.keys = outboxq.OrderKeys(q.msgs)
	if n := len(q.msgs) + len(q.keys); n > MaxMessagesPerCompleteTx {
		return nil, fmt.Errorf("datastorestore: CompleteTx: %d messages and %d ordering keys' sequences, more than the %d entities a commit can hold beside the record", len(q.msgs), len(q.keys), MaxMessagesPerCompleteTx)
	}
	for _, k := range q.keys {
		q.seqs = append(q.seqs, s.seqKey(k))
		q.seqDst = append(q.seqDst, new(seqEntity))
	}
	return q, nil
}

// enqueueTx writes q in tx once its sequences are read: each ordered
// message at its key's next place, and the sequences advanced. A retried
// transaction reads them again and writes the same entities.
func (s *Store) enqueueTx(tx *datastore.Transaction, q *queued) error {
	if q == nil {
		return nil
	}
	seqs := make(map[string]*outboxq.Seq, len(q.keys))
	for i, k := range q.keys {
		seqs[k] = (*outboxq.Seq)(q.seqDst[i].(*seqEntity))
	}
	outboxq.Number(q.msgs, seqs)
	keys := make([]*datastore.Key, 0, len(q.msgs)+len(q.keys))
	ents := make([]any, 0, cap(keys))
	for i := range q.msgs {
		keys, ents = append(keys, s.outboxKey(q.names[i])), append(ents, (*outboxEntity)(&q.msgs[i]))
	}
	for i, k := range q.keys {
		keys, ents = append(keys, q.seqs[i]), append(ents, (*seqEntity)(seqs[k]))
	}
	_, err := tx.PutMulti(keys, ents)
	return err
}
