package main

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// The classes of orders the report counts apart. An order is poison when
// -poison chose it, else concurrent_copy when one of its messages went out
// as concurrent copies, else normal.
const (
	classPoison     = "poison"
	classConcurrent = "concurrent_copy"
	classNormal     = "normal"
)

// classNames are the classes in the order the report shows them.
var classNames = [...]string{classPoison, classConcurrent, classNormal}

// poisonStream is the stream of the PCG source that draws the poison
// orders: a source of their own, so that -poison leaves every other
// decision of a seed as it was.
const poisonStream = 0x706f69736f6e // "poison"

// poisonOrders returns the order_ids of the poison orders of a run: the
// nearest whole number to c.Poison × c.N of them, drawn from seed alone,
// so that the supplier (which refuses them) and the report agree, and a
// seed replays the same set.
func poisonOrders(c config, seed int64) map[string]bool {
	k := int(math.Round(c.Poison * float64(c.N)))
	set := make(map[string]bool, k)
	if k == 0 {
		return set
	}
	rng := rand.New(rand.NewPCG(uint64(seed), poisonStream))
	for _, i := range rng.Perm(c.N)[:k] {
		set[orderID(c.OrderPrefix, i+1)] = true
	}
	return set
}

// orderID is the order_id of order number i (from 1).
func orderID(prefix string, i int) string { return fmt.Sprintf("%s%06d", prefix, i) }

// classes returns the class of each order of msgs.
func classes(msgs []*message, poison map[string]bool) map[string]string {
	class := make(map[string]string, len(msgs))
	for _, m := range msgs {
		switch {
		case poison[m.orderID]:
			class[m.orderID] = classPoison
		case m.concurrentFirst:
			class[m.orderID] = classConcurrent
		case class[m.orderID] == "":
			class[m.orderID] = classNormal
		}
	}
	return class
}
