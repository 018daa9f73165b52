package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"
)

// deadLetter is one dead-lettered message as -dead-letters writes it, a
// JSON object a line: what a dead-letter topic keeps of it (data,
// attributes, ids), for an operator to replay with -replay-dead once its
// cause is fixed.
type deadLetter struct {
	MessageID   string            `json:"message_id"`
	OrderID     string            `json:"order_id"`
	Data        []byte            `json:"data"`
	Attributes  map[string]string `json:"attributes"`
	PublishTime time.Time         `json:"publish_time"`
	// Attempts is how many delivery attempts were nacked before it was
	// dead-lettered.
	Attempts int `json:"delivery_attempts"`
}

// writeDeadLetters writes the dead-lettered messages of res to path, each
// once (a copy redelivered on its own may be dead-lettered beside its
// message), in publish order.
func writeDeadLetters(path string, res *runResult) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	seen := map[string]bool{}
	for _, st := range slices.Concat(res.msgs, res.chains) {
		if st.final != deadLettered || seen[st.m.id] {
			continue
		}
		seen[st.m.id] = true
		m := st.m
		err = errors.Join(err, enc.Encode(deadLetter{MessageID: m.id, OrderID: m.orderID, Data: m.data,
			Attributes: m.attrs, PublishTime: m.publishTime, Attempts: st.attempts}))
	}
	if err = errors.Join(err, w.Flush(), f.Close()); err != nil {
		return fmt.Errorf("write -dead-letters %s: %w", path, err)
	}
	return nil
}

// replayMessages reads the -replay-dead file of c: its messages, with
// their messageIds, data and attributes, delivered again from attempt 1,
// as a tool that moves a dead-letter subscription's messages back does.
// The chaos of the flags (-dup, -concurrent) is drawn for them from rng;
// producer republishes are not (a replay publishes nothing).
func replayMessages(c config, rng *rand.Rand) ([]*message, error) {
	f, err := os.Open(c.ReplayDead)
	if err != nil {
		return nil, fmt.Errorf("-replay-dead: %w", err)
	}
	defer f.Close()
	var msgs []*message
	dec := json.NewDecoder(f)
	for dec.More() {
		var d deadLetter
		if err := dec.Decode(&d); err != nil {
			return nil, fmt.Errorf("-replay-dead %s: message %d: %w", c.ReplayDead, len(msgs)+1, err)
		}
		m := &message{seq: len(msgs), id: d.MessageID, orderID: d.OrderID, data: d.Data, attrs: d.Attributes, publishTime: d.PublishTime}
		m.dupAfterAck = rng.Float64() < c.Dup
		m.concurrentFirst = rng.Float64() < c.Concurrent
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("-replay-dead %s: no message to replay", c.ReplayDead)
	}
	return msgs, nil
}
