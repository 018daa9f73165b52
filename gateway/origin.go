package gateway

import (
	"github.com/idemgate/idemgate/store"
)

// originOf names d for the record its claim wins (WithOrigin): its
// surface and its message id, such as "push/4711". The id is the Pub/Sub
// messageId (for a CloudEvent, the event id when the data carries none:
// Pub/Sub's events use the messageId as their id), the one every log line
// of the delivery shows as delivery.message_id; a delivery without one
// (an unwrapped push without the header) is named by its surface alone.
// It never holds the key, unless the key is the message id itself.
func originOf(d *Delivery) string {
	var id string
	if d.Message != nil {
		id = d.Message.ID
	}
	return store.MakeOrigin(surfaceOf(d.Form), id)
}

// surfaceOf is the short name of a delivery's form in an origin.
func surfaceOf(form string) string {
	switch form {
	case "wrapped", "unwrapped":
		return "push"
	case "cloudevent", "cloudevent-binary", "cloudevent-structured":
		return "cloudevent"
	}
	return form // "pull"
}
