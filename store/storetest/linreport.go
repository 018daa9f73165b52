package storetest

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// linShown is how many calls of a failing key a report lists.
const linShown = 60

// violation explains a history porcupine found not linearizable. For the
// first key whose calls admit no legal order it gives the longest order
// that explains a prefix of them, the record that order leaves, and the
// key's calls in the order they started; then it counts the other failing
// keys. When the env keeps files it also writes porcupine's interactive
// visualization of the whole history and names the file.
func (e *env) violation(history []porcupine.Operation, info porcupine.LinearizationInfo) error {
	parts := partitionByKey(history)
	partials := info.PartialLinearizations()
	var (
		b   strings.Builder
		bad int
	)
	b.WriteString("concurrent calls on a key must each take effect at one instant between call and return, " +
		"in an order the transition table explains; no such order exists")
	for p, ops := range parts {
		var best []int
		if p < len(partials) {
			for _, l := range partials[p] {
				if len(l) > len(best) {
					best = l
				}
			}
		}
		if len(best) == len(ops) {
			continue
		}
		bad++
		if bad == 1 {
			describeKey(&b, ops, best)
		}
	}
	if bad > 1 {
		fmt.Fprintf(&b, "\n%d more keys have no legal order either", bad-1)
	}
	if e.keepFiles {
		if path, err := visualize(info); err != nil {
			fmt.Fprintf(&b, "\n(no visualization: %v)", err)
		} else {
			fmt.Fprintf(&b, "\nporcupine's visualization of the whole history: %s", path)
		}
	}
	return fmt.Errorf("%s", b.String())
}

// describeKey writes the report for one key: ops are the key's calls as
// partitioned, best the ids (indexes into ops) of its longest legal order.
func describeKey(b *strings.Builder, ops []porcupine.Operation, best []int) {
	s := linState{}
	in := make([]bool, len(ops))
	for _, id := range best {
		s, _ = linStep(s, ops[id].Input.(linCall))
		in[id] = true
	}
	key := ops[0].Input.(linCall).key
	fmt.Fprintf(b, " for key %s (%d calls). At most %d of them take effect in a legal order, leaving the record %s, "+
		"and none of the others can come next.\nIts calls in the order they started (✓: in that legal order; µs since the run began):",
		key, len(ops), len(best), s)
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(ops[i].Call, ops[j].Call) })
	// Show the calls around the first one left out of the legal order.
	from := 0
	for k, i := range order {
		if !in[i] {
			from = max(0, k-2*linShown/3)
			break
		}
	}
	to := min(len(order), from+linShown)
	if from > 0 {
		fmt.Fprintf(b, "\n  … %d earlier calls", from)
	}
	for _, i := range order[from:to] {
		op := ops[i]
		mark := " "
		if in[i] {
			mark = "✓"
		}
		fmt.Fprintf(b, "\n  %s %8d–%-8d client %d  %s", mark, op.Call/1e3, op.Return/1e3, op.ClientId,
			describeOp(op.Input.(linCall), op.Output.(linResult)))
	}
	if to < len(order) {
		fmt.Fprintf(b, "\n  … %d later calls", len(order)-to)
	}
}

// visualize writes porcupine's HTML view of info to a new file in the
// temporary directory, which outlives the test, and returns its path.
func visualize(info porcupine.LinearizationInfo) (string, error) {
	f, err := os.CreateTemp("", "storetest-linearizable-*.html")
	if err != nil {
		return "", err
	}
	err = porcupine.Visualize(linModel(), info, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}
