package pushenvelope

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers a push subscription with payload unwrapping and write metadata
// adds besides the message id, which selects the form (decode.go), in the
// canonical form net/http stores them in. The subscription, publish time and
// ordering key are Pub/Sub's; the ordering key is also read under the
// shorter name, second; Pub/Sub documents no delivery attempt header for
// this form, and the one here is the name relays use.
const (
	headerSubscription     = "X-Goog-Pubsub-Subscription-Name"
	headerPublishTime      = "X-Goog-Pubsub-Publish-Time"
	headerOrderingKey      = "X-Goog-Pubsub-Ordering-Key"
	headerOrderingKeyShort = "X-Goog-Ordering-Key"
	headerDeliveryAttempt  = "X-Goog-Pubsub-Delivery-Attempt"
)

// parseUnwrapped builds a Message from the metadata headers; the body is the
// message data as published.
func parseUnwrapped(h http.Header, id string, body []byte) (*Message, error) {
	m := &Message{
		ID:           id,
		Data:         body,
		Attributes:   headerAttributes(h),
		Subscription: h.Get(headerSubscription),
		OrderingKey:  h.Get(headerOrderingKey),
		Form:         Unwrapped,
	}
	if len(m.Data) == 0 {
		m.Data = nil
	}
	if m.OrderingKey == "" {
		m.OrderingKey = h.Get(headerOrderingKeyShort)
	}
	if ts := h.Get(headerPublishTime); ts != "" {
		at, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return nil, notPush("%s %q is not an RFC 3339 time", headerPublishTime, ts)
		}
		m.PublishTime = at.UTC()
	}
	if s := h.Get(headerDeliveryAttempt); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, notPush("%s %q is not a count", headerDeliveryAttempt, s)
		}
		m.DeliveryAttempt = n
	}
	return m, nil
}

// headerAttributes recovers the message attributes, which write metadata
// sends as one header each, named after the attribute. HTTP cannot tell them
// from the request's own headers, so this keeps every header except the
// transport, tracing and Google infrastructure ones, under its lowercased
// name (header names are case-insensitive, so the attribute's case is lost),
// with its first value.
func headerAttributes(h http.Header) map[string]string {
	attrs := make(map[string]string)
	for k, vs := range h {
		name := strings.ToLower(k)
		if len(vs) == 0 || transportHeader(name) {
			continue
		}
		attrs[name] = vs[0]
	}
	return attrs
}

// transportHeader reports whether a lowercased header name belongs to HTTP,
// to a proxy, load balancer or CDN on the way, to tracing, or to Google's
// front ends and Pub/Sub's own metadata, rather than to a message
// attribute. Authorization is among them, so a bearer token never ends up
// in Attributes (and in logs that print them). Ce-* names are not: on an
// unwrapped push only attributes can carry them. No list can know every
// header a proxy invents, which is why gateway.FingerprintPayload does not
// count this form's attributes.
func transportHeader(name string) bool {
	for _, p := range transportPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	switch name {
	case "accept", "authorization", "cache-control", "connection", "cookie", "expect",
		"forwarded", "from", "host", "keep-alive", "pragma", "te", "trailer",
		"transfer-encoding", "upgrade", "user-agent", "via",
		// Proxies, load balancers and CDNs.
		"x-real-ip", "true-client-ip", "x-client-ip", "x-request-id", "x-request-start",
		"cdn-loop", "x-amz-cf-id",
		// Tracing: W3C, B3, Jaeger, Sentry, AWS and gRPC.
		"traceparent", "tracestate", "baggage", "b3", "uber-trace-id",
		"sentry-trace", "x-amzn-trace-id", "grpc-trace-bin", "x-ot-span-context":
		return true
	}
	return false
}

// transportPrefixes are the name prefixes transportHeader leaves out.
var transportPrefixes = [...]string{
	"accept-", "content-", "proxy-", // HTTP's own
	"x-goog-", "x-google-", "x-cloud-", "x-appengine-", "x-serverless-", // Google
	"x-forwarded-", "x-envoy-", "cf-", "fastly-", "x-akamai-", // proxies and CDNs
	"x-b3-", "x-datadog-", "uberctx-", "ot-baggage-", "ot-tracer-", // tracing
}
