package gateway

// KeyFunc resolves the idempotency key of a push delivery. A placeholder until the HTTP surface lands.
type KeyFunc func() (string, error)

// KeyFromMessageID is the default KeyFunc.
func KeyFromMessageID() (string, error) { return "", nil }
