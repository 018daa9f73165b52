// Command pushstorm is a local Pub/Sub push simulator. It delivers messages
// to an HTTP endpoint the way a push subscription does — same body, headers
// and ack rule, redelivery with backoff after a nack, deliveryAttempt
// counting, dead-lettering — and adds the chaos a real subscription produces
// now and then: redelivery of an acked message (a lost ack), two copies of a
// message in flight at once, and producer republishes (a new messageId for the
// same order). It then prints what happened, and optionally what a counting
// "supplier" downstream of the endpoint saw, so one command answers "did every
// order's side effect run exactly once?".
//
// Each order i is a message with data {"order_id":"o-00000i","po_id":"po-(i%10)","amount":…}
// and attributes order_id and po_id, so one run can target every route of
// cmd/example-run: / (keyed on messageId), /orders (keyed on order_id) and
// /po-updates (serialized per po_id).
//
// Usage:
//
//	# Against example-run, with the counting supplier on a fixed port:
//	SUPPLIER_URL=http://127.0.0.1:9099/ go run ./cmd/example-run &
//	go run ./cmd/pushstorm -url http://127.0.0.1:8080/orders -supplier 127.0.0.1:9099 -expect-once
//
//	# Make the supplier fail twice per key, so every order goes nack → retry → ack:
//	go run ./cmd/pushstorm -url http://127.0.0.1:8080/ -supplier 127.0.0.1:9099 -supplier-fail-first 2 -expect-once
//
//	# Throughput, no chaos, machine-readable:
//	go run ./cmd/pushstorm -url http://127.0.0.1:8080/ -n 20000 -concurrency 32 -dup 0 -concurrent 0 -republish 0 -json
//
//	# Check pushstorm itself, with an in-process endpoint and supplier:
//	go run ./cmd/pushstorm -self-test -n 1000 -supplier-fail-first 1
//
//	# Only the supplier, until interrupted (then its stats; GET /stats any time):
//	go run ./cmd/pushstorm -supplier 127.0.0.1:9099
//
// Order ids repeat from run to run (the same -n gives the same order_ids, and
// the same -seed the same messageIds). Against a server whose store outlives
// a run, the next run's orders are duplicates of the last run's: they are
// acked with no action, and -expect-once fails with too few keys. Restart the
// server, or give each run its own -order-prefix (and no fixed -seed).
//
// # Deliveries
//
// The wrapped form (the default) is a JSON body
//
//	{"message":{"data":"<base64>","attributes":{…},"messageId":"…","message_id":"…",
//	 "publishTime":"…","publish_time":"…"},"subscription":"…","deliveryAttempt":1}
//
// with Content-Type application/json and Pub/Sub's User-Agent. deliveryAttempt
// counts from 1 as on a subscription with a dead-letter policy. With -form
// unwrapped the body is the raw data, the metadata travels in
// X-Goog-Pubsub-Message-Id, X-Goog-Pubsub-Subscription-Name and
// X-Goog-Pubsub-Publish-Time, and each attribute is a header of its own.
//
// An answer of 102, 200, 201, 202 or 204 acks the delivery, as on the real
// service (the Pub/Sub emulator differs: it nacks 202). Anything else, a
// network error, or no answer within -timeout nacks it; redirects are not
// followed. A nacked message is delivered again after -backoff-min, doubling
// per attempt up to -backoff-max, with deliveryAttempt+1, and is dead-lettered
// when attempt -max-attempts is nacked. When a message goes out as two
// concurrent copies, an ack of either copy acks it. A transport duplicate
// (-dup) models an ack lost on its way back: the message is delivered again
// with the next deliveryAttempt and must be acked again.
//
// # The supplier
//
// -supplier ADDR starts an HTTP server that counts POSTs per Idempotency-Key
// header (the key the endpoint's business action sends) and answers 200, or
// 500 to the first -supplier-fail-first requests of each key. GET /stats
// returns its counts as JSON (?keys=1 adds every key). The report shows raw
// requests, distinct keys, keys accepted more than once and keys never
// accepted, and the most requests of one key — and of one Po-Id header, when
// the endpoint sends one — in flight at once. Under the table, the text
// report says which figures are the storm's plan rather than failures: the
// 5xx of the supplier's refusals, the 503 of copies that found their key
// held, the keys hit more than once because they were retried.
//
// How many distinct keys are right depends on what the endpoint dedupes on.
// A route keyed on order_id runs the action once per order, republishes
// included; a route keyed on messageId runs it once per published message, so
// each republish is a key of its own. -expect-keys says which (orders,
// messages or a number); its default, auto, picks orders when the URL path
// ends in /orders and messages otherwise.
//
// # Poison orders and concurrent copies
//
// -poison F makes the nearest whole number to F × -n of the orders poison,
// chosen from -seed alone: the supplier answers 422 to every request whose
// JSON body carries their order_id, until POST /fix makes it accept them.
// Their dead letters are planned, not failures, and -expect-once wants
// their keys never accepted. The report counts three classes of order
// apart (poison; concurrent_copy, sent as two copies; normal): deliveries
// and their answers by status, acked and dead-lettered messages, and the
// supplier's requests (the endpoint's body runs) and acceptances; with
// -json, each poison order's fate too.
//
// It also gives the concurrent copies' time-to-ack: for each copy, from
// the moment it is sent to the moment the 2xx that settles it comes back.
// By default an ack of either copy acks the message, so it settles both.
// With -ack-each-copy a copy nacked while the other was acked is
// redelivered on its own after the backoff until acked (or dead-lettered),
// as when the first delivery's ack deadline passed and its late ack no
// longer counts; its time-to-ack then includes the backoff.
//
// -dead-letters FILE writes the dead-lettered messages, a JSON object a
// line; -replay-dead FILE delivers them again (same messageIds, from
// attempt 1) instead of new orders, as once their cause is fixed.
//
//	pushstorm -spawn bin/example-run -path /orders -supplier 127.0.0.1:0 -expect-once \
//		-poison 0.05 -concurrent 0.1 -ack-each-copy -dead-letters dead.jsonl
//
// # Exit status
//
// 0 when every message was acked and, with -expect-once, the supplier
// accepted each expected key exactly once and saw no other key; 1 when a
// message was dead-lettered (but those of poison orders) or lost (never
// acked, not dead-lettered — only an interrupted run can leave one), when the -expect-once check failed or the
// run could not start; 2 for bad flags. The failing messageIds are listed
// with their order_id.
package main
