package cloudevent

import (
	"errors"
	"strconv"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/pushenvelope"
)

// KeyFromEvent is Wrap's default key function. A Pub/Sub event (its
// message has a Form) is keyed on its messageId, as
// gateway.KeyFromMessageID keys the same message on every surface. Any
// other event is keyed on its source and id, which the CloudEvents spec
// makes unique together: the source's length in bytes, a colon, the
// source, a colon and the id, as in
//
//	45://storage.googleapis.com/projects/_/buckets/b:1042
func KeyFromEvent(m *pushenvelope.Message) (string, error) {
	if m.Form != 0 {
		return gateway.KeyFromMessageID(m)
	}
	if m.ID == "" {
		return "", errors.New("the event has no id")
	}
	return strconv.Itoa(len(m.Source)) + ":" + m.Source + ":" + m.ID, nil
}
