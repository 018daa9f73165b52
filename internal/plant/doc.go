// Package plant puts known bugs back into the library, one at a time, to
// prove that the simulator (internal/sim) finds them. Each planted bug is a
// branch guarded by On(n), where n is the number of the item in the issue
// that fixed it ("The guarantee, second pass"): 1 (a conflict with a held
// record accepted), 3 (a body cancelled for a lost lease recorded DONE), 9
// (Complete retried without the claim kept alive) and 14 (every ErrFenced
// from a body acknowledged); and 221, item 1 of issue 22 ("The guarantee
// over a record's whole life"): memstore starts a record made where none
// lives (absent, or expired) at fence 1 again, so that a key's fences
// repeat once its record is deleted; and 226, item 6 of issue 22: pull
// nacks an ordered message whose key is held, so that a later message of
// its ordering key overtakes it.
//
// Issue 29 ("The pipeline's promise, second pass") plants its defects as
// 290 + the item: 291, outbox.Prepare admits data up to 10 MiB, which the
// Pub/Sub client then refuses on every try; 295, outbox.OrderKey counts
// the topic as spelled, so that "t" and "projects/P/topics/t" are two
// orders; 292, the relay gives a message Pub/Sub refused back at once,
// never backing off and never giving it up; 297, the relay stops waiting
// for its publishes at half the lease and gives the unanswered ones back
// while they may still land (with the client's default Timeout of 60s);
// 298, a stopping relay gives back every message not yet acknowledged and
// then waits in Publisher.Stop for the publishes in flight;
// 294, the Google stores (datastorestore, firestorestore) order
// an ordering key's messages by the clock of the process that completed
// them instead of the key's sequence in the database, so that a process
// ahead within SkewMargin puts its earlier commit after a later one;
// 296, their Settle deletes a sent message by its child key without
// checking its version, so that a message written anew under that key
// since the Take (its parent forgotten and completed again) is lost;
// 293, sqlstore's Take on PostgreSQL and MySQL/MariaDB chooses its
// window of rows before it drops those behind a held (or backing-off, or
// dead) message of their key, so that a window full of them returns
// nothing while a free message waits after it.
//
// Issue 31 ("The relay at the anchors' throughput"): 299, a round gives
// its stragglers (the publishes still unanswered after its short wait)
// back untried while they may still land, instead of letting them wait
// for their answers.
//
// New plants are patches, not branches: internal/sim/plants/*.patch,
// which scripts/sim-plants.sh applies to a scratch copy of the library
// (229 is the first: pushauth's middleware lets a request without a token
// through). Plants exist only in a build with the idemgate_plant tag, which reads
// the list from the environment (IDEMGATE_PLANT=1,14). In every other
// build On is the constant false and the branches compile away.
package plant
