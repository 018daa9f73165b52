package gateway

import (
	"github.com/idemgate/idemgate/store"
)

// originOf names d for the record its claim wins (WithOrigin): its
// surface and its message id (delivery.message_id in its log lines), such
// as "push/4711", or its surface alone when it has no id.
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
