package firestorestore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
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
	obOrderKey = "orderKey"    // outbox.OrderKey; "" when unordered, or dead and released
	obSeq      = "seq"         // its place in its order key, from the key's sequence document
	obVersion  = "version"     // written at enqueue: the version a Take hands out
	obEnqueued = "enqueued"    // when the transaction queued it, plus its index in the transaction (µs)
	obDue      = "due"         // when a relay may take it: enqueued, the end of a lease or a backoff; outboxq.Never when dead
	obToken    = "token"       // the Take that holds it ("" before any, and once given back)
	obName     = "name"        // the name its child key was derived from
	obAttempts = "attempts"    // failed publishes since the enqueue or the last revival
	obReason   = "reason"      // the last failure's reason
	obDied     = "died"        // when a relay gave it up; only dead messages have it
	obHolds    = "holds"       // dead and holding its order key's later messages
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
	f := map[string]any{
		obTopic:    d.Topic,
		obData:     data,
		obAttrs:    attrs,
		obOrdering: d.OrderingKey,
		obOrderKey: d.OrderKey,
		obSeq:      d.Seq,
		obVersion:  d.Version,
		obEnqueued: d.Enqueued,
		obDue:      d.Due,
		obToken:    d.Token,
		obName:     d.Name,
		obAttempts: d.Attempts,
		obReason:   d.Reason,
	}
	if !d.Died.IsZero() {
		f[obDied], f[obHolds] = d.Died, d.Holds
	}
	return f
}

// state returns the updates that write the fields of d that a Settle or a
// Revive changes, so that the payload is not written again.
func (d *outboxDoc) state() []firestore.Update {
	var died, holds any = firestore.Delete, firestore.Delete
	if !d.Died.IsZero() {
		died, holds = d.Died, d.Holds
	}
	return []firestore.Update{
		{Path: obDue, Value: d.Due},
		{Path: obToken, Value: d.Token},
		{Path: obAttempts, Value: d.Attempts},
		{Path: obReason, Value: d.Reason},
		{Path: obDied, Value: died},
		{Path: obHolds, Value: holds},
		{Path: obOrderKey, Value: d.OrderKey}, // cleared while dead and released
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
		case obOrderKey:
			d.OrderKey, ok = v.(string)
		case obSeq:
			d.Seq, ok = v.(int64)
		case obVersion:
			d.Version, ok = v.(string)
		case obEnqueued:
			d.Enqueued, ok = v.(time.Time)
		case obDue:
			d.Due, ok = v.(time.Time)
		case obToken:
			d.Token, ok = v.(string)
		case obName:
			d.Name, ok = v.(string)
		case obAttempts:
			d.Attempts, ok = v.(int64)
		case obReason:
			d.Reason, ok = v.(string)
		case obDied:
			d.Died, ok = v.(time.Time)
		case obHolds:
			d.Holds, ok = v.(bool)
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

// The fields of an order key's sequence document (outboxq.Seq), whose ID
// is the order key: the last place given to one of its messages, and when
// one may next be taken (absent when the key has none: Take finds the
// keys it may take from by it). CompleteTx reads it with the record and
// writes it back in its transaction, so that the database, not the
// completing process's clock, orders the key's messages.
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

// seqFields returns the sequence document of sq.
func seqFields(sq *outboxq.Seq) map[string]any {
	f := map[string]any{seqLast: sq.Last}
	if !sq.Due.IsZero() {
		f[seqDue] = sq.Due
	}
	return f
}

// seqSuffix names the collection of the order keys' sequences after the
// records' collection: "idemgate_records_outbox_seq" by default.
const seqSuffix = outboxSuffix + "_seq"

// seqs returns the collection of the order keys' sequences.
func (s *Store) seqs() *firestore.CollectionRef {
	if p := s.coll.Parent; p != nil {
		return p.Collection(s.coll.ID + seqSuffix)
	}
	return s.client.Collection(s.coll.ID + seqSuffix)
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
// a relay publishes from, and its [relay.DeadLetters]. It is safe for
// concurrent use, also by relays in other processes.
//
// Each message is a document of the collection next to the records' named
// [Options.Collection] + "_outbox", whose ID is its child key. Take finds
// due unordered messages by orderKey and due, the due order keys
// (outbox.OrderKey) by the due of their sequence documents, and a key's
// first messages by orderKey and seq: two composite indexes in production
// (see docs/stores/firestore.md). Settle deletes what was sent, as it was
// taken; nothing else deletes outbox documents. Dead messages stay until
// revived, listed by the field died, which only they have.
//
// [relay.Source]: https://pkg.go.dev/github.com/idemgate/idemgate/relay#Source
// [relay.DeadLetters]: https://pkg.go.dev/github.com/idemgate/idemgate/relay#DeadLetters
type Outbox struct{ s *Store }

// Outbox returns the store's outbox. It does no I/O.
func (s *Store) Outbox() *Outbox { return &Outbox{s: s} }

// Firestore's limits on what CompleteTx writes.
const (
	// MaxDocumentBytes is the most bytes of one document. CompleteTx
	// refuses a message whose document could be larger (see Size in
	// store/internal/outboxq: an upper bound, about 1 KiB over the payload,
	// attributes and names).
	MaxDocumentBytes = 1 << 20
	// MaxCommitBytes is the most bytes of one request, a commit's
	// included. CompleteTx refuses messages whose documents could be
	// larger together, with 16 KiB for the record; the body's own writes
	// count too.
	MaxCommitBytes = 10 << 20
)

// Backlog implements relay.Source: how many live messages are committed
// and unsent, held or not; dead ones are not counted. One count query.
func (o *Outbox) Backlog(ctx context.Context) (int64, error) {
	return count(ctx, o.s.outbox().Where(obDue, "<", outboxq.Never))
}

// count counts the documents of q with one aggregation query.
func count(ctx context.Context, q firestore.Query) (int64, error) {
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

// Stats implements relay.Stater: two count aggregations (live and dead
// messages) and one query of at most outboxq.StatsScan messages in enqueue
// order (on its single-field index), which stops at the first live one.
func (o *Outbox) Stats(ctx context.Context) (outbox.Stats, error) {
	s := o.s
	var st outbox.Stats
	var err error
	if st.Unsent, err = o.Backlog(ctx); err != nil {
		return outbox.Stats{}, err
	}
	if st.Dead, err = count(ctx, s.outbox().Where(obDue, ">=", outboxq.Never)); err != nil {
		return outbox.Stats{}, err
	}
	if st.Unsent == 0 {
		return st, nil
	}
	var msgs []outboxq.Stored
	it := s.outbox().OrderBy(obEnqueued, firestore.Asc).Limit(outboxq.StatsScan).Documents(ctx)
	defer it.Stop()
	for {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return outbox.Stats{}, err
		}
		d, err := parseOutbox(snap.Data())
		if err != nil {
			return outbox.Stats{}, fmt.Errorf("outbox document %q: %w", snap.Ref.ID, err)
		}
		msgs = append(msgs, outboxq.Stored(d))
		if d.Died.IsZero() {
			break
		}
	}
	st.Oldest = outboxq.Oldest(msgs, s.now())
	return st, nil
}

// queued is what a CompleteTx enqueues: the messages, and the sequence
// documents of their order keys, which it reads with the record.
type queued struct {
	ids  []string // the messages' child keys
	msgs []outboxq.Stored
	keys []string // the order keys, as outboxq.OrderKeys
	seqs []*firestore.DocumentRef
	last map[string]*outboxq.Seq // each key's sequence, as read
}

// queue prepares msgs, the messages a CompleteTx of the claim keyed
// parent enqueues at now: nil when there are none. It refuses, before
// anything is read or written, a message Pub/Sub would refuse (see
// [outbox.Prepare]) and one Firestore could not hold (MaxDocumentBytes,
// MaxCommitBytes).
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
	// The document's name: its full path, with a byte per segment and
	// 16 more, and its ID.
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

// read takes the sequences of q from snaps, read in the transaction.
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

// enqueueTx writes q in tx, its sequences read: the messages, as documents
// whose IDs are their child keys, each ordered message at the next place
// of its order key, and the sequences advanced. A retried transaction
// reads the sequences again and writes the same documents again.
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

// Take implements relay.Source: it leases up to limit due messages to the
// caller for lease and returns them in the order to publish them. A
// message of an order key is taken only with every earlier message of
// that key, and never while one of those is held by another Take, waits
// out a backoff, or is dead and holds the key. Take queries the due
// unordered messages and the due order keys (by their sequences' due),
// oldest first, and the first messages of each key; a key's later
// messages are in neither query, so that however many wait behind a held
// or dead one, they never keep another key's messages from a Take. The
// messages are taken in one transaction, which also moves on the due of
// the keys looked at: to the end of the lease, or to when the message
// that blocks the key is due. When another relay's transaction wins the
// race, Take returns none and no error, and the relay polls again.
func (o *Outbox) Take(ctx context.Context, limit int, lease time.Duration) ([]outbox.Pending, error) {
	s := o.s
	if limit <= 0 {
		return nil, nil
	}
	ob := s.outbox()
	now := s.now()
	plan := outboxq.NewPlanner(limit, now, func(orderKey string) ([]outboxq.Head, error) {
		return heads(ctx, ob.Where(obOrderKey, "==", orderKey).OrderBy(obSeq, firestore.Asc).Limit(limit))
	})
	free, err := heads(ctx, ob.Where(obOrderKey, "==", "").Where(obDue, "<=", now).
		OrderBy(obDue, firestore.Asc).OrderBy(obEnqueued, firestore.Asc).Limit(limit))
	if err != nil {
		return nil, err
	}
	snaps, err := s.seqs().Where(seqDue, "<=", now).OrderBy(seqDue, firestore.Asc).Limit(outboxq.KeyLimit(limit)).Documents(ctx).GetAll()
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
	if err := plan.Plan(free, keys); err != nil {
		return nil, err
	}
	ids, blocking := plan.IDs(), plan.Heads()
	if len(ids) == 0 && len(plan.Keys()) == 0 {
		return nil, nil
	}
	var read []*firestore.DocumentRef
	for _, id := range append(slices.Clip(ids), blocking...) {
		read = append(read, ob.Doc(id))
	}
	token := rand.Text()
	var out []outbox.Pending
	err = s.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		out = out[:0]
		docs, seqs, err := s.getOutbox(tx, read, plan.Keys())
		if err != nil {
			return err
		}
		msgs := make([]*outboxq.Msg, len(docs))
		for i, d := range docs {
			if d != nil { // else sent and deleted since the query
				m := (*outboxq.Stored)(d).Msg()
				msgs[i] = &m
			}
		}
		firsts := map[string]*outboxq.Msg{}
		for i, h := range blocking {
			firsts[h] = msgs[len(ids)+i]
		}
		now := s.now()
		var took []*outboxq.Msg
		for _, i := range outboxq.Pick(msgs[:len(ids)], now) {
			d := docs[i]
			d.Due, d.Token = now.Add(lease), token
			if err := tx.Update(read[i], []firestore.Update{{Path: obDue, Value: d.Due}, {Path: obToken, Value: token}}); err != nil {
				return err
			}
			out = append(out, (*outboxq.Stored)(d).Pending(ids[i], token, now))
			took = append(took, msgs[i])
		}
		return s.putSeqs(tx, seqs, plan.Hints(seqs, firsts, took, now, lease))
	}, firestore.MaxAttempts(1))
	if status.Code(err) == codes.Aborted {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// heads runs q, a query of outbox documents, for a Take.
func heads(ctx context.Context, q firestore.Query) ([]outboxq.Head, error) {
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return nil, err
	}
	out := make([]outboxq.Head, len(snaps))
	for i, snap := range snaps {
		d, err := parseOutbox(snap.Data())
		if err != nil {
			return nil, fmt.Errorf("outbox document %q: %w", snap.Ref.ID, err)
		}
		out[i] = (*outboxq.Stored)(&d).Head(snap.Ref.ID)
	}
	return out, nil
}

// getOutbox reads in tx, in one request, the outbox documents of refs, nil
// for one that does not exist, and the sequences of orderKeys that exist.
func (s *Store) getOutbox(tx *firestore.Transaction, refs []*firestore.DocumentRef, orderKeys []string) ([]*outboxDoc, map[string]*outboxq.Seq, error) {
	all := slices.Clip(refs)
	for _, k := range orderKeys {
		all = append(all, s.seqs().Doc(k))
	}
	var snaps []*firestore.DocumentSnapshot
	if len(all) > 0 {
		var err error
		if snaps, err = tx.GetAll(all); err != nil {
			return nil, nil, err
		}
	}
	docs := make([]*outboxDoc, len(refs))
	for i, snap := range snaps[:len(refs)] {
		if !snap.Exists() {
			continue
		}
		d, err := parseOutbox(snap.Data())
		if err != nil {
			return nil, nil, fmt.Errorf("outbox document %q: %w", snap.Ref.ID, err)
		}
		docs[i] = &d
	}
	seqs := make(map[string]*outboxq.Seq, len(orderKeys))
	for i, snap := range snaps[len(refs):] {
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

// putSeqs writes in tx the sequences of keys, from seqs.
func (s *Store) putSeqs(tx *firestore.Transaction, seqs map[string]*outboxq.Seq, keys []string) error {
	for _, k := range keys {
		if err := tx.Set(s.seqs().Doc(k), seqFields(seqs[k])); err != nil {
			return err
		}
	}
	return nil
}

// Settle implements relay.Source in one transaction: a read of every
// message given, then one commit. It deletes each sent message whose
// version is still the one taken (a message written anew under its child
// key since the Take stays), and applies each failure to the message the
// same Take still holds: its attempts and reason, its backoff on this
// store's clock, or its death. The read takes the sequences of the
// messages' order keys too, and the commit makes a key due again (see
// Take) when a message of it is deleted, released or given back.
func (o *Outbox) Settle(ctx context.Context, sent []outbox.Pending, failed []outbox.Failure) error {
	acts, err := outboxq.Actions(sent, failed)
	if err != nil || len(acts) == 0 {
		return err
	}
	s := o.s
	ob := s.outbox()
	refs := make([]*firestore.DocumentRef, len(acts))
	for i, a := range acts {
		refs[i] = ob.Doc(a.ChildKey)
	}
	orderKeys := outboxq.SettleKeys(acts)
	return s.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		docs, seqs, err := s.getOutbox(tx, refs, orderKeys)
		if err != nil {
			return err
		}
		msgs := make([]*outboxq.Stored, len(docs))
		for i, d := range docs {
			msgs[i] = (*outboxq.Stored)(d)
		}
		dels, writes, changed := outboxq.Settle(acts, msgs, seqs, s.now())
		for _, i := range dels {
			if err := tx.Delete(refs[i]); err != nil {
				return err
			}
		}
		for _, i := range writes {
			if err := tx.Update(refs[i], docs[i].state()); err != nil {
				return err
			}
		}
		return s.putSeqs(tx, seqs, changed)
	})
}

// Dead implements relay.DeadLetters: up to n dead messages, oldest first,
// by a query on died, which only dead messages have.
func (o *Outbox) Dead(ctx context.Context, n int) ([]outbox.DeadMessage, error) {
	s := o.s
	if n <= 0 {
		return nil, nil
	}
	snaps, err := s.outbox().OrderBy(obDied, firestore.Asc).Limit(n).Documents(ctx).GetAll()
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]outbox.DeadMessage, len(snaps))
	for i, snap := range snaps {
		d, err := parseOutbox(snap.Data())
		if err != nil {
			return nil, fmt.Errorf("outbox document %q: %w", snap.Ref.ID, err)
		}
		out[i] = (*outboxq.Stored)(&d).DeadMessage(snap.Ref.ID, now)
	}
	return out, nil
}

// Revive implements relay.DeadLetters in one transaction: the dead
// messages of ids are due at once, their attempts at zero and their reason
// cleared, and their order keys due. An ID of a message that is not dead,
// or that was written anew since it was listed, is skipped.
func (o *Outbox) Revive(ctx context.Context, ids ...string) (int, error) {
	s := o.s
	ob := s.outbox()
	var refs []*firestore.DocumentRef
	var versions []string
	for _, id := range ids {
		ck, v, err := outboxq.ParseID(id)
		if err != nil {
			continue // names no message of ours
		}
		if slices.ContainsFunc(refs, func(r *firestore.DocumentRef) bool { return r.ID == ck }) {
			continue
		}
		refs, versions = append(refs, ob.Doc(ck)), append(versions, v)
	}
	if len(refs) == 0 {
		return 0, nil
	}
	var n int
	err := s.client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		n = 0
		docs, _, err := s.getOutbox(tx, refs, nil)
		if err != nil {
			return err
		}
		now := s.now()
		var revived []outboxq.Stored
		var at []int
		for i, d := range docs {
			if d != nil && outboxq.Revive((*outboxq.Stored)(d), versions[i], now) {
				revived, at = append(revived, outboxq.Stored(*d)), append(at, i)
			}
		}
		// Every read before the first write: the sequences of their keys.
		_, seqs, err := s.getOutbox(tx, nil, outboxq.OrderKeys(revived))
		if err != nil {
			return err
		}
		for _, i := range at {
			if err := tx.Update(refs[i], docs[i].state()); err != nil {
				return err
			}
		}
		n = len(at)
		return s.putSeqs(tx, seqs, outboxq.Revived(revived, seqs, now))
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
