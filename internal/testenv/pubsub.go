package testenv

import (
	"crypto/rand"
	"strings"
	"testing"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// PubSubEmulatorHost returns the host:port of a Google Cloud Pub/Sub
// emulator: $PUBSUB_EMULATOR_HOST if set, else one started from the Cloud
// SDK's jar (java -jar) on a free port and shared by the test binary ([Main]
// stops it). Each test isolates itself with its own [PubSubProject]; connect
// with [PubSubClientOptions]. How the emulator differs from the service:
// docs/testing.md, "What the emulator does differently" (pull tests use pstest).
func PubSubEmulatorHost(t testing.TB) string {
	t.Helper()
	return emulatorAddr(t, "PUBSUB_EMULATOR_HOST", "pubsub-emulator", "google-cloud-cli-pubsub-emulator", StartPubSubEmulator)
}

// PubSubClientOptions returns the options that connect a Pub/Sub client to
// an emulator or a pstest server at addr: that endpoint, no credentials,
// plaintext gRPC.
func PubSubClientOptions(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// PubSubProject returns a project ID that no other test uses, so that its
// topics and subscriptions on a shared emulator are its own. It is a valid
// Google Cloud project ID: lower case, starting with a letter, at most 30
// characters.
func PubSubProject(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() == 16 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	suffix := strings.ToLower(rand.Text()[:8])
	return "t-" + b.String() + "-" + suffix
}

// StartPubSubEmulator starts the Cloud SDK's Pub/Sub emulator on a free
// port in dir and returns once it answers an administrative call, not just
// once its port is open: the JVM accepts connections a moment before it
// serves them.
func StartPubSubEmulator(dir string) (*Server, error) {
	// The probe lists the topics of a project over the REST surface, which
	// serves the same in-memory state as gRPC.
	return startJavaEmulator(dir, "platform/pubsub-emulator/lib/cloud-pubsub-emulator-*.jar", func(jar string, port int) []string {
		return []string{"-jar", jar, "--host=127.0.0.1", "--port=" + itoa(port)}
	}, "/v1/projects/idemgate-probe/topics")
}
