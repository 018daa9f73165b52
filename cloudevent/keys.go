package cloudevent

import (
	"errors"
	"strconv"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// KeyFromEvent is Wrap's default key function. A Pub/Sub event (type
// [pushenvelope.MessagePublishedType]) is keyed on its messageId, the key
// gateway.KeyFromMessageID gives the same message on every surface, so that
// a function and a push endpoint sharing a store dedupe each other. Any
// other event is keyed on its source and id, which the CloudEvents spec
// makes unique together (two sources may both send an event 1042): the
// source's length in bytes, a colon, the source, a colon and the id, as in
//
//	45://storage.googleapis.com/projects/_/buckets/b:1042
//
// The length makes the key one pair's only: no other source and id give it,
// whatever characters the source holds.
//
// KeyFromEvent tells the two apart by the message Wrap hands it: a Pub/Sub
// event's decoded message has a Form, any other event's has none. A
// messageId is unique within its topic only: functions on several topics
// that share a store need a prefix per topic (see gateway.KeyFromMessageID).
func KeyFromEvent(m *pushenvelope.Message) (string, error) {
	if m.Form != 0 {
		return gateway.KeyFromMessageID(m)
	}
	if m.ID == "" {
		return "", errors.New("the event has no id")
	}
	return strconv.Itoa(len(m.Source)) + ":" + m.Source + ":" + m.ID, nil
}
