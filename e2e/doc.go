// Package e2e holds the end-to-end tests of idemgate: the Google Cloud
// Pub/Sub emulator pushes real deliveries over HTTP to cmd/example-run
// processes, which guard a call to a counting supplier with a shared store
// (Redis, or the Datastore emulator). The tests kill, restart and starve
// those processes and check, on the supplier's counts and on what the
// emulator delivered, that every order ran once and no message was lost.
//
// Run them with make e2e (go test -race -v ./e2e/...). Everything is in test
// files; docs/testing.md describes each scenario.
package e2e
