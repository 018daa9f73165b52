package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

const digestHelp = `Digest prints, one per line in the order given, the digest that stands for
each KEY in the gateway's log lines and errors when its HideKeys option is
set (the key_digest attribute, and the key's place in error texts). Search
the logs for it to find a key's lines:

  grep "$(idemgate digest msg:100)" service.log

It reads no store.
`

func (c *cli) digest(_ context.Context, args []string) int {
	fs, cm := c.flagSet("digest", "KEY…", digestHelp)
	keys, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	if err := checkKeys(keys); err != nil {
		return c.fail(context.Background(), cm, err)
	}
	for _, k := range keys {
		fmt.Fprintln(c.stdout, keyDigest(k))
	}
	return exitOK
}

// keyDigest is key as a gateway with HideKeys logs it: "sha256:" and the
// hex of the first 8 bytes of the key's SHA-256, as the gateway's keyText
// computes it (TestDigestMatchesTheGateway holds the two together).
func keyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:8])
}
