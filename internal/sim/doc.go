// Package sim is a seeded simulation of the whole delivery path: Pub/Sub
// publishing messages and redelivering them until they are acknowledged,
// one or more service instances answering them through the three surfaces
// (HTTP push, CloudEvents, pull), handlers that succeed, fail, panic, stall
// or crash, and a store whose every operation may fail, lose its reply,
// slow down or hang. After every answer and at the end it checks the
// guarantee's invariants: the rules below. [Run] runs one [Scenario] on one
// [Backend] and returns a [Result] whose Report is the failure message.
//
// # One seed decides everything
//
// A seed draws a [Scenario]: how many instances, the route's settings
// (messageId or business key, fingerprints, AcceptConflicts, renewal,
// HideKeys) and the messages, with their payloads, business keys and
// publish times. What happens to each delivery attempt of a message (its
// surface, its instance, the handler's behaviour, the store faults, a crash,
// a stall, an operator's Forget, a copy Pub/Sub sends beside it) is drawn
// while the run goes, from the message's own random source (PCG seeded with
// the seed and the message's index), so that the draws do not depend on how
// goroutines interleave. Under testing/synctest time is fake and a run
// replays: the same seed draws the same scenario and the same attempts, and
// a failing seed fails again. The gateway draws the jitter of its lease
// renewals from a source of each delivery's (gateway.Options.RenewJitter),
// seeded from the seed too. What a seed does not decide is the order in which
// goroutines ready at the same fake instant run; the rules are written to
// hold in any such order (a Forget racing a Claim, a forged request racing
// a genuine delivery of another message of its business key).
//
// # The model
//
// Pub/Sub (world.publish) delivers each message until an attempt is
// acknowledged: an answer that is not an ack brings a redelivery after an
// exponential backoff; no answer by the ack deadline brings one at once (and
// cancels the late delivery's context, as a push client that hangs up
// does). Now and then it sends a copy of an attempt beside it, as
// at-least-once delivery may. After its last attempt (16; 8 in real time)
// the message is dead-lettered. The first four attempts of a message draw
// faults; later ones are clean, so that every message can end acknowledged.
//
// Each instance is one process: a Gateway over its own fault wrapper
// ([faulty]) around the one shared store. A crash cuts the wrapper (every
// store call of the old process fails), freezes every body the process was
// running (they never answer), and starts a new process in its place.
// A stall pauses one body and every store call of its process (renewals
// included) for longer than the lease, then lets them go on: a zombie.
//
// Besides, an attempt may make a handler answer 2xx and then fail (an
// error, a panic, or panic(http.ErrAbortHandler)), fail inside its Mutex
// or nested Lock, land one of its store calls on an instant where the
// contract turns, or, on pull, see Receive stop (as its Claim is sent, or
// at a drawn moment) with a body that works on or stops with it.
//
// A handler's effect goes to a [ledger] keyed by the store key, with the
// fence of the claim it ran under; the ledger refuses fences lower than the
// highest it has seen for the key, as docs/design.md tells a sink to do,
// and the handler then returns store.ErrFenced. On a store with completion
// inside a transaction (Backend.Tx) the effect is written in the same
// transaction as the store's CompleteTx instead; an attempt may lose the
// reply of its COMMIT, and the body then runs the transaction again, as a
// caller's retry loop would.
//
// # The families
//
// A seed also picks a bias, which makes it likely to reach one kind of
// interaction, so that the default budget reaches each. Besides those of
// the first generator (conflicts, lost leases, Complete failing, Forget,
// slow claims, nested Locks, crashes and stalls) four families cover a
// record's whole life, pull, Mutex and push authentication:
//
//   - deletion: the first message's first attempt stalls its process past
//     lease + ttl. Meanwhile its redeliveries complete the key, the record
//     expires and is deleted (memstore ignores an expired record at once
//     and sweeps it later, a SQL store's PurgeExpired runs every lease,
//     Redis deletes it itself, without grace), and a late republish of
//     the order claims the key anew. The zombie then resumes, tries its
//     lost claim's Extend, Release, Complete and CompleteTx, and writes its
//     effect to the fenced ledger.
//   - ordering: every message carries its customer's ordering key and
//     comes through pull. Pub/Sub and the client's scheduler are modelled
//     per key: the key's messages published so far, from the first one
//     not acknowledged, go to the callback one after another, the next as
//     soon as the previous callback returned (acked or nacked), and after a
//     nack Pub/Sub redelivers from the first one not acknowledged. Copies
//     still come beside.
//   - mutex: bodies do their work and write their effect inside
//     g.Mutex(ctx, "po:"+customer, …), the "Lock on the message, Mutex on
//     the entity" pattern (plain seeds draw it too, now and then).
//   - auth: Idempotent deliveries go through pushauth's Middleware with a
//     token its validator accepts, and forged requests for the same
//     messageId (no token, or a token the validator refuses) come just
//     before some genuine attempts (plain seeds draw it too).
//
// Issue 32's failures are drawn after everything else, not as a bias, so
// that the seeds before them keep their scenarios: one seed in three
// waits for the holder (gateway.Options.WaitForHolder), with copies sent
// close behind their attempts so that they meet a held claim; another
// third has failures: poison messages, whose work fails every time (for
// good with gateway.Permanent, or a 422 the routes' Terminal reads on
// the Idempotent surface; otherwise each failure is counted), an attempt
// budget (MaxAttempts), AckFailed on the gateway or only on the push
// routes, and an operator who retries FAILED keys now and then (most
// after fixing the cause: a poison key then succeeds); a third of the
// seeds with a budget write their effects in a Mutex, whose contention
// must not spend it. The checker sees
// every Fail and its answer through the fault wrapper, on a store that
// implements store.Failer.
//
// # The pipeline family
//
// [RunPipeline] runs a [PipeScenario] (issue 29's pipeline) on a
// [PipeBackend] in real time: stage A bodies claim their parent keys and
// complete them with messages through the outbox, in one transaction;
// one to three relays (package relay, on a real *pubsub.Client) publish
// them to a pstest server of the run's own; stage B, pull.Wrap keyed with
// gateway.KeyFromChildKey on a subscription with ordering, writes each
// message's tag to a ledger by child key. Each message's data is its
// version's tag (parent, name, attempt), so that the checker tells the
// versions of one child key apart. The backends are internal/outboxmodel (the
// Source contract over memstore), the SQL stores' outboxes (SQLite,
// PostgreSQL) and the Google stores' (Datastore, Firestore, on their
// emulators). On the Google stores two processes complete the parents,
// the second's clock two leases ahead of the first's, so that a key's
// order must come from the database; and since they keep one message per
// child key, a version committed again replaces one not yet published
// ([PipeBackend].Replaces), which the rules follow: the replaced version
// is not owed a publish, holds nothing, and the child key still reaches
// stage B once.
//
// The faults: stage A attempts that roll back, or outlive their lease
// while a redelivery takes the key over and commits, after which their
// CompleteTx must commit nothing; an operator's Forget of a DONE parent
// and a second completion (same child keys, new versions); a message just
// under 10 MiB, which Prepare must refuse (the body then sends it small).
// Pub/Sub, through a Publish reactor: requests that fail (not retried by
// the client), fail UNAVAILABLE (retried by the client itself), are held
// by the server past the relay's patience and then land (the whole
// server is held: an overloaded Pub/Sub), and a topic that refuses every
// message for good. The relays: a process that dies between its publish
// and its Settle (the Settle never reaches the store), a shutdown while a
// batch is out, the store's clock ahead of the relay's by up to a tenth of
// the lease. The relays' options are set in one place, pipeRelayOptions.
//
// Drawn after those (so that the seeds before keep their scenarios), what
// reaches the limits of the relay and of the outboxes: a crowd, more
// messages waiting behind a dead message that holds their key than a
// Take of the Google stores scans (four times its limit), committed
// before other keys' messages; a request refused whole, a clean message
// and behind it, in its key and its request, one that Pub/Sub refuses
// past the relays' MaxAttempts; and a slow Pub/Sub, a burst of a hundred
// or two messages of as many ordering keys, taken in batches of 24 to
// 48, each publish request taking a third of a lease or more on its way
// (its client worker busy meanwhile), often behind a server stall, so
// that the client's requests outnumber its workers (NumGoroutines) and
// wait for one, their Timeout not yet started. Only the model outbox runs
// the burst (PipeBackend.Burst): a database's Takes of such batches, six
// runs at once, are too slow for the lease.
//
// The rules of the pipeline family:
//
//   - pipe-lost: every child key with a committed version reaches stage
//     B's effect, unless each of its versions is dead or waits behind a
//     dead message of its key that holds it (DeadLetters shows both).
//   - pipe-repeat: stage B effects a child key at most once.
//   - pipe-phantom: no version of a rolled-back or fenced-out attempt is
//     published or effected.
//   - pipe-fenced: a CompleteTx of a claim a later claim took over commits
//     nothing.
//   - pipe-unpublished: every committed version is published at least
//     once, or is dead, or waits behind a dead one (a Settle of an older
//     version must leave a newer one of the same child key).
//   - pipe-dead: a message dies only with a reason, and only after
//     failures the run injected into its publishes.
//   - pipe-dup: a version lands in Pub/Sub at most once more than the
//     number of its Takes whose lease lapsed before they settled it (a
//     relay that died, or held a publish of unknown outcome until its
//     lease lapsed, may see it published twice; a relay that gave a
//     message back must not see its publish land). A Take whose publish
//     the client answered more than a quarter lease after the Take's
//     lease ended excuses nothing: the relay bounds each publish to end
//     within the lease, and one that outlives it may land beside the
//     next Take's (the relays hand the client each message with its
//     Take's token in an attribute, which a client interceptor reads).
//   - pipe-take-order: a Take never hands out a message while an earlier
//     message of its key (topic ID and ordering key) is held by another
//     Take or backs off, as the relays' Takes and Settles show it (with a
//     tenth of the lease of margin; a backoff counted from the moment its
//     Settle was called, the earliest the store can have read its clock).
//   - pipe-order: stage B effects a key's child keys in the order of their
//     first commits (keys with a dead version left out; on a store that
//     replaces, keys committed again after a Forget left out too).
//   - pipe-delay: a message with no injected fault, whose Takes never
//     lapsed nor took more than an eighth of the lease (the relay gives
//     such a batch back untried: the store is too slow for the lease), and
//     whose publish requests Pub/Sub never refused (for another message
//     of the request either), is published within 5 leases (plus the time the server was held
//     meanwhile) of being free: committed, and every earlier message of
//     its key published or dead.
//   - pipe-stop: a relay's Run returns within its StopTimeout plus a
//     lease, beside the time its Settles took, once its context ends.
//
// # The rules
//
//   - ack-done: an ack means the key's record is DONE at that moment; the
//     exceptions are a body that wrote its effect and succeeded (SPEC section
//     3: the library then never asks for a retry, whatever Complete says) and
//     a body fenced out while another live claim holds the key. A body
//     fenced out with nobody else holding the key breaks ack-fenced.
//   - ack-effect: a DONE record that an ack relies on has its effect in the
//     ledger: a body that did not do its work was not recorded done.
//   - concurrent: two bodies never run at once for a key, counting only
//     bodies that no stall or crash froze.
//   - lapsed-start: a body never starts on a claim whose lease has passed on
//     the store's clock (on a real store, by more than a tenth of the lease).
//   - repeat: a key's effect is written once, unless the run injected
//     something that makes a repeat unavoidable (a crash or a stall past the
//     lease, an operator's Forget, a store fault that kept Complete failing
//     past the lease while renewal could not keep the claim, a DONE record
//     past its ttl); with a transactional sink, exactly once, unless the
//     key's DONE record may have expired before the second.
//   - lost: at the end every acked message's key is DONE (or its ack was a
//     SPEC section 3 ack of work done, or an operator forgot the key) and
//     its effect is in the sink.
//   - dead-letter: a message is dead-lettered only after real failures:
//     each attempt was injected a fault, met another payload's record (a
//     conflict), met a live holder (in progress), or lost its process to a
//     crash or a pause.
//   - fence: every claim a key wins has a fence above every earlier claim
//     of the key (a retried Claim that re-affirms the same claim excepted),
//     whatever deleted the record in between.
//   - zombie: a holder whose claim was lost (the record deleted and claimed
//     anew, or taken over) changes nothing: its Extend fails, its Release
//     leaves a live claim whose body still runs alone, its Complete answers
//     false, its CompleteTx commits nothing, and the ledger refuses its
//     write once a later claim wrote. Its delivery is acked only as
//     ack-done allows.
//   - order: when a message with an ordering key writes its effect, every
//     earlier message of the key has its effect, was dead-lettered, or met
//     a real failure (injected, a crash or pause, a conflict, an answer too
//     late), which Pub/Sub lets the later messages overtake; one that was
//     only held by another delivery of it must not be overtaken.
//   - mutex: two Mutex bodies of one entity never run at once, counting
//     only bodies that no stall or crash froze; a message is never
//     dead-lettered when its only failures were its Mutex meeting a busy
//     entity.
//   - auth: a forged request is never answered 2xx, never runs a body,
//     and never changes the record (read before and after it, when no
//     genuine delivery of the key is in flight); the genuine deliveries of
//     its message are held to every other rule.
//   - hidekeys: under HideKeys no log line, no span (the gateways export
//     theirs to an in-memory recorder, go.opentelemetry.io/otel/sdk/trace/tracetest)
//     and no error or answer the library hands a caller (a verb's error,
//     with every error in its tree, a CloudEvents result, the body of a
//     push answer) names a business key.
//   - instant: a store call made at the very instant where the contract
//     turns answers as the contract says on that side: a Claim at a
//     holder's leaseUntil is not HeldByOther (now ≥ leaseUntil reclaims),
//     a Claim or a Complete at a DONE record's expiresAt finds it gone,
//     and a Complete of a claim that still owns its record (whatever its
//     lease) records it. Under fake time no time passes inside a call, so
//     the instant is exact; a seed's attempts land calls there on purpose
//     (Attempt.Edge): a Claim waits for a live holder's lease to end (a
//     copy, for a DONE record to expire), a Complete for its own lease to
//     end, a Complete retried after a lost reply for its DONE record to
//     expire, and a Claim's reply comes exactly one lease late, the
//     gateway's own boundary (lapsed-start then judges it).
//   - ack-failed: a delivery whose body failed (an error, a non-2xx, a
//     panic, a failure after a 2xx, a failure inside its Mutex or nested
//     Lock, a stop with Receive) is never acked (SPEC section 10,
//     invariant 3).
//   - panic: nothing but http.ErrAbortHandler comes out of a push
//     handler (a body may panic with it after its 2xx: the connection is
//     cut, a nack).
//   - swallowed: a Mutex or nested Lock whose body failed inside it
//     returns that failure.
//   - stop: no body starts on a Claim sent once its pull Receive had
//     stopped (the callback's context cancelled, as the Claim is sent or
//     at a drawn moment, before, during or after the body).
//   - undone: on a store that did not fail, work acked undone (SPEC
//     section 3) is a bug: when no fault hit Complete, no stall or crash
//     struck the delivery and its claim still owns the record, Complete
//     should have recorded it (it runs on a context the caller's end does
//     not cancel). Memstore only.
//   - unsettled: every message is acknowledged or dead-lettered within the
//     run's horizon.
//   - failed-run: a body never starts on a claim sent while its key's
//     record was FAILED, not retried since, and not yet past its expiry.
//   - failed-ack: a delivery whose failure made its key FAILED, or that
//     met the key FAILED, is acked only under AckFailed (on its surface),
//     and then only while the record is FAILED or after a Retry; no other
//     delivery is acked while the record is FAILED.
//   - retry-once: between two Retries, a retried key's work succeeds at
//     most once (unless a crash, stall or Forget excuses a repeat).
//   - budget: a key's counted failures since its last Retry or Forget
//     never exceed MaxAttempts, and the store's count never exceeds the
//     failures counted since then (a Retry starts a fresh budget).
//   - fence, too: a counted failure frees the claim with a raised fence,
//     as a Release does.
//   - not-a-failure: the store counts no failure for a body whose work
//     did not fail: its Mutex or nested Lock met a live holder
//     (contention is paced, not failed), or the consumer stopped it (pull
//     Receive ending cancels the callbacks in flight). So a key goes
//     FAILED only after MaxAttempts real failures of its work.
//   - failed-conflict: a delivery of another payload than the one whose
//     work failed, meeting its key FAILED (the route takes fingerprints),
//     is a conflict first: its outcome is conflict (in progress under
//     AcceptConflicts, which accepts only done work), never
//     already_failed, and it is never acked, AckFailed or not.
//
// A FAILED key's failures are real ones for dead-letter and order: an
// attempt whose body was poison, whose failure made the record FAILED, or
// that met it FAILED.
package sim
