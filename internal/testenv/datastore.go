package testenv

import (
	"testing"
)

// DatastoreEmulatorHost returns the host:port of a Cloud Datastore
// emulator: $DATASTORE_EMULATOR_HOST if set, else one started from the
// installed Cloud SDK on a free port and shared by the test binary (Main
// stops it). Tests must isolate themselves with unique namespaces.
func DatastoreEmulatorHost(t testing.TB) string {
	t.Helper()
	return emulatorAddr(t, "DATASTORE_EMULATOR_HOST", "datastore-emulator", "google-cloud-cli-datastore-emulator", StartDatastoreEmulator)
}

// UseDatastoreEmulator sets DATASTORE_EMULATOR_HOST for the rest of the
// process to the emulator DatastoreEmulatorHost would return, starting it
// if needed. Call it from TestMain before Main in packages whose examples
// create clients with datastore.NewClient, which honours the variable:
//
//	func TestMain(m *testing.M) {
//		if err := testenv.UseDatastoreEmulator(); err != nil {
//			fmt.Fprintln(os.Stderr, err) // tests skip; examples fail
//		}
//		testenv.Main(m)
//	}
func UseDatastoreEmulator() error {
	return useEmulator("DATASTORE_EMULATOR_HOST", "datastore-emulator", StartDatastoreEmulator)
}

// StartDatastoreEmulator starts the Cloud SDK's Datastore emulator in
// Firestore in Datastore mode (the mode of every new database), keeping
// data in memory only, on a free port in dir.
func StartDatastoreEmulator(dir string) (*Server, error) {
	return startJavaEmulator(dir, "platform/cloud-datastore-emulator/CloudDatastore.jar", func(jar string, port int) []string {
		return []string{"-cp", jar, "com.google.cloud.datastore.emulator.CloudDatastore", "start",
			"--host=127.0.0.1", "--port=" + itoa(port),
			"--store_on_disk=false", "--consistency=1.0",
			"--firestore_in_datastore_mode",
			dir}
	})
}
