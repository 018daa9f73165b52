package testenv

import (
	"testing"
)

// FirestoreEmulatorHost returns the host:port of a Cloud Firestore
// emulator (native mode): $FIRESTORE_EMULATOR_HOST if set, else one started
// from the installed Cloud SDK on a free port and shared by the test binary
// (Main stops it). Tests must isolate themselves with unique collections.
func FirestoreEmulatorHost(t testing.TB) string {
	t.Helper()
	return emulatorAddr(t, "FIRESTORE_EMULATOR_HOST", "firestore-emulator", "google-cloud-cli-firestore-emulator", StartFirestoreEmulator)
}

// UseFirestoreEmulator sets FIRESTORE_EMULATOR_HOST for the rest of the
// process to the emulator FirestoreEmulatorHost would return, starting it
// if needed. Call it from TestMain before Main in packages whose examples
// create clients with firestore.NewClient, which honours the variable.
func UseFirestoreEmulator() error {
	return useEmulator("FIRESTORE_EMULATOR_HOST", "firestore-emulator", StartFirestoreEmulator)
}

// StartFirestoreEmulator starts the Cloud SDK's Firestore emulator in
// native mode, in memory, on a free port in dir.
func StartFirestoreEmulator(dir string) (*Server, error) {
	return startJavaEmulator(dir, "platform/cloud-firestore-emulator/cloud-firestore-emulator.jar", func(jar string, port int) []string {
		return []string{"-cp", jar, "com.google.cloud.datastore.emulator.firestore.CloudFirestore", "--host=127.0.0.1", "--port=" + itoa(port)}
	})
}
