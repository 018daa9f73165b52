package e2e

import (
	"crypto/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/internal/testenv"
)

// storeCase is a store the scenarios run against.
type storeCase struct {
	name string
	// open returns the IDEMGATE_STORE URL of a fresh namespace for t alone,
	// and the further environment example-run needs to reach the store.
	open func(t testing.TB) (url string, env []string)
}

// stores are the stores every scenario runs against: a server the
// processes share over the network, as on Cloud Run.
var stores = []storeCase{
	{"redis", func(t testing.TB) (string, []string) {
		return "redis://" + testenv.RedisAddr(t) + "/0?prefix=" + unique(t) + ":", nil
	}},
	{"datastore", func(t testing.TB) (string, []string) {
		host := testenv.DatastoreEmulatorHost(t)
		return "datastore://idemgate-e2e?namespace=" + unique(t), []string{"DATASTORE_EMULATOR_HOST=" + host}
	}},
}

// unique returns a name no other test uses, made of the test's name and
// a random suffix, in the characters a Datastore namespace allows.
func unique(t testing.TB) string {
	var b strings.Builder
	b.WriteString("e2e-")
	for _, r := range t.Name() {
		switch {
		case b.Len() >= 60:
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String() + "-" + strings.ToLower(rand.Text()[:8])
}

func itoa(i int) string { return strconv.Itoa(i) }

func atoi(s string) int {
	i, _ := strconv.Atoi(s)
	return i
}
