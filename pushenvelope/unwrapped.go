package pushenvelope

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The write-metadata headers besides the message id. Pub/Sub documents no
// delivery attempt header for this form; this is the name relays use.
const (
	headerSubscription     = "X-Goog-Pubsub-Subscription-Name"
	headerPublishTime      = "X-Goog-Pubsub-Publish-Time"
	headerOrderingKey      = "X-Goog-Pubsub-Ordering-Key"
	headerOrderingKeyShort = "X-Goog-Ordering-Key"
	headerDeliveryAttempt  = "X-Goog-Pubsub-Delivery-Attempt"
)

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

// headerAttributes recovers the message attributes, one header each: every
// header but transportHeader's, lowercased, with its first value.
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
// a proxy or CDN, tracing, or Google's front ends rather than to an
// attribute. Authorization is one, so a token never reaches Attributes;
// Ce-* names are not: on this form only attributes carry them.
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

var transportPrefixes = [...]string{
	"accept-", "content-", "proxy-", // HTTP's own
	"x-goog-", "x-google-", "x-cloud-", "x-appengine-", "x-serverless-", // Google
	"x-forwarded-", "x-envoy-", "cf-", "fastly-", "x-akamai-", // proxies and CDNs
	"x-b3-", "x-datadog-", "uberctx-", "ot-baggage-", "ot-tracer-", // tracing
}
