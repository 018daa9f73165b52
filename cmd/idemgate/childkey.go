package main

import (
	"context"
	"fmt"

	"github.com/idemgate/idemgate/outbox"
)

const childKeyHelp = `Childkey prints the child key of the message called NAME that a guarded body
published under PARENT, the key its delivery claimed (prefix included): the
value of the message's idemgate-child-key attribute, as the outbox and
gateway.ChildKey derive it, and the key a downstream route keyed with
gateway.KeyFromChildKey claims (plus that route's own prefix, if it adds
one). A message enqueued without a Name is named by its position among
those of its CompleteTx call: "0", "1", …

  idemgate childkey pipeline:order_id:o-1 shipment
  idemgate inspect "shipment:$(idemgate childkey pipeline:order_id:o-1 shipment)"

It reads no store.
`

func (c *cli) childKey(_ context.Context, args []string) int {
	fs, cm := c.flagSet("childkey", "PARENT NAME", childKeyHelp)
	rest, code, done := c.parse(fs, cm, args)
	if done {
		return code
	}
	if len(rest) != 2 {
		return c.fail(context.Background(), cm, fmt.Errorf("%w: childkey takes PARENT and NAME, %d arguments given", errUsage, len(rest)))
	}
	parent, name := rest[0], rest[1]
	if err := checkKeys([]string{parent}); err != nil {
		return c.fail(context.Background(), cm, err)
	}
	if name == "" {
		return c.fail(context.Background(), cm, fmt.Errorf("%w: empty NAME (a message without a Name is named by its position: 0, 1, …)", errUsage))
	}
	fmt.Fprintln(c.stdout, outbox.ChildKey(parent, name))
	return exitOK
}
