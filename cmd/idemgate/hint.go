package main

import (
	"context"
	"slices"
	"strings"

	"github.com/idemgate/idemgate/store"
)

// maxHintPrefixes bounds the prefixes a hint names, and hintSample the
// records it reads to find them.
const (
	maxHintPrefixes = 5
	hintSample      = 200
)

// storePrefixes returns the key prefixes (see keyPrefix) of the records
// st holds, as one page of its listing shows them (store.Lister: the
// first keys in byte order), at most maxHintPrefixes, sorted; nil when st
// cannot list or the listing fails: the hint then names none.
func storePrefixes(ctx context.Context, st any) []string {
	l, ok := st.(store.Lister)
	if !ok {
		return nil
	}
	page, err := l.List(ctx, store.ListOptions{Limit: hintSample})
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range page.Records {
		if p, ok := keyPrefix(r.Key); ok && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), maxHintPrefixes)]
}

// keyHint is the hint that ends the answer for an absent key near which no
// record was found. prefixes are the key prefixes the store's keys are known
// to carry, each ending in ':', to try before key; nil when none is known
// (the hint then says what to look for, naming no service's prefixes). A
// key that already carries a prefix is never given another one.
func keyHint(key string, prefixes []string) string {
	if p, ok := keyPrefix(key); ok {
		return "the key is read as given, prefix " + p + " included: if the service claims this message under another prefix, or none, give that key"
	}
	if len(prefixes) == 0 {
		return "a service often claims a message's key under a prefix of its own (gateway.KeyFromAttribute puts the attribute's name first: order_id:" + key + "): give the key with the prefix its route adds"
	}
	try := make([]string, len(prefixes))
	for i, p := range prefixes {
		try[i] = p + key
	}
	return "this store's keys carry a prefix: try " + strings.Join(try, ", ")
}

// keyPrefix returns the prefix key starts with, up to and including its
// first ':', when something precedes and follows it: "msg:" of
// "msg:m-101", "order_id:" of "order_id:o-1".
func keyPrefix(key string) (string, bool) {
	i := strings.IndexByte(key, ':')
	if i <= 0 || i == len(key)-1 {
		return "", false
	}
	return key[:i+1], true
}
