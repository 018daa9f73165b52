package testenv

import "testing"

func TestStartFirestoreEmulator(t *testing.T) {
	checkEmulator(t, "Firestore emulator", StartFirestoreEmulator)
}
