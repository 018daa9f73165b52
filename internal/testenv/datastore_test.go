package testenv

import "testing"

func TestStartDatastoreEmulator(t *testing.T) {
	checkEmulator(t, "Datastore emulator", StartDatastoreEmulator)
}
