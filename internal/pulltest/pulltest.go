// Package pulltest builds received Pub/Sub messages whose Ack and Nack are
// recorded, for tests and the simulator that drive pull's callback without
// a server. The client builds received messages with an internal
// constructor, so Message sets the message's unexported ack handler by
// reflection, and refuses, rather than guess, when a client version changed
// that field.
package pulltest

import (
	"errors"
	"reflect"
	"sync"
	"unsafe"

	"cloud.google.com/go/pubsub/v2"
)

// Acks is a message's ack handler: it notes the first Ack or Nack, the only
// one that counts on a real message. Safe for concurrent use.
type Acks struct {
	mu    sync.Mutex // guards first
	first string     // "Ack", "Nack" or "" (neither yet)
}

func (a *Acks) note(what string) {
	a.mu.Lock()
	if a.first == "" {
		a.first = what
	}
	a.mu.Unlock()
}

// Verdict is "Ack", "Nack", or "neither Ack nor Nack".
func (a *Acks) Verdict() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.first == "" {
		return "neither Ack nor Nack"
	}
	return a.first
}

// OnAck, OnNack, OnAckWithResult and OnNackWithResult implement the
// client's internal AckHandler interface. The results are ready at once
// with success, as on a subscription without exactly-once delivery.
func (a *Acks) OnAck()  { a.note("Ack") }
func (a *Acks) OnNack() { a.note("Nack") }
func (a *Acks) OnAckWithResult() *pubsub.AckResult {
	a.note("Ack")
	return (&pubsub.Message{}).AckWithResult()
}
func (a *Acks) OnNackWithResult() *pubsub.AckResult {
	a.note("Nack")
	return (&pubsub.Message{}).NackWithResult()
}

// Message makes m a received message whose Ack and Nack go to acks.
func Message(m *pubsub.Message, acks *Acks) (*pubsub.Message, error) {
	f := reflect.ValueOf(m).Elem().FieldByName("ackh")
	if !f.IsValid() || f.Kind() != reflect.Interface || !reflect.TypeOf(acks).Implements(f.Type()) {
		return nil, errors.New("pulltest: pubsub.Message has no ackh field of an interface type that Acks implements; update pulltest for this client version")
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(acks))
	return m, nil
}
