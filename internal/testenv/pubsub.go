package testenv

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The Pub/Sub emulator is a Java program like the Datastore and Firestore
// emulators, but the SDK ships it as a versioned jar
// (platform/pubsub-emulator/lib/cloud-pubsub-emulator-<version>-all.jar)
// behind a Gradle launcher script. It is started here with java -jar, so the
// process Server.Stop signals is the JVM itself.

// PubSubEmulatorHost returns the host:port of a Google Cloud Pub/Sub
// emulator: $PUBSUB_EMULATOR_HOST if set, else one started from the
// installed Cloud SDK on a free port and shared by the test binary ([Main]
// stops it). The first start takes a few seconds (a JVM); later calls in the
// same binary return at once.
//
// Connect a client with [PubSubClientOptions]:
//
//	host := testenv.PubSubEmulatorHost(t)
//	c, err := pubsub.NewClient(ctx, testenv.PubSubProject(t), testenv.PubSubClientOptions(host)...)
//
// The emulator accepts every project ID and keeps everything in memory for
// the life of the process, so tests isolate themselves with a project of
// their own ([PubSubProject]). It differs from the real service in ways
// that matter to tests: push subscriptions acknowledge on 200, 201, 203 and
// 204 and treat every other status, 202 included, as a nack; pushed
// requests carry no deliveryAttempt, no orderingKey and no Authorization
// header; a nacked message comes back about a second later; there is no
// dead lettering and no exactly-once delivery. For those, pull tests use
// cloud.google.com/go/pubsub/v2/pstest instead, which models them.
func PubSubEmulatorHost(t testing.TB) string {
	t.Helper()
	if h := emulatorHost("PUBSUB_EMULATOR_HOST"); h != "" {
		return h
	}
	s, err := shared("pubsub-emulator", StartPubSubEmulator)
	if err != nil {
		Unavailable(t, "Pub/Sub emulator: set PUBSUB_EMULATOR_HOST or install the Cloud SDK emulator "+
			"(apt install google-cloud-cli-pubsub-emulator) and a Java 17 runtime: %v", err)
	}
	return s.Addr
}

// UsePubSubEmulator sets PUBSUB_EMULATOR_HOST for the rest of the process
// to the emulator PubSubEmulatorHost would return, starting it if needed.
// Call it from TestMain before Main in packages whose examples create
// clients with pubsub.NewClient and no options, which honours the variable:
//
//	func TestMain(m *testing.M) {
//		if err := testenv.UsePubSubEmulator(); err != nil {
//			fmt.Fprintln(os.Stderr, err) // tests skip; examples fail
//		}
//		testenv.Main(m)
//	}
func UsePubSubEmulator() error {
	return useEmulator("PUBSUB_EMULATOR_HOST", "pubsub-emulator", StartPubSubEmulator)
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
	java, err := pubsubJava()
	if err != nil {
		return nil, err
	}
	jar, err := pubsubEmulatorJar()
	if err != nil {
		return nil, err
	}
	const within = 60 * time.Second // a cold JVM on a busy machine is slow
	s, err := startOnFreePort(dir, within, java, func(port int) []string {
		// -Duser.language=en: the emulator only speaks English, as the
		// SDK's launcher asks for.
		return []string{"-Duser.language=en", "-jar", jar, "--host=127.0.0.1", "--port=" + itoa(port)}
	})
	if err != nil {
		return nil, err
	}
	if err := waitPubSubReady(s.Addr, within); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// pubsubJava finds java the way the SDK's launcher does: $JAVA_HOME/bin/java,
// else java in PATH.
func pubsubJava() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return lookPath("java", "/usr/bin/java")
}

// pubsubEmulatorJar finds the newest emulator jar in an installed Cloud SDK.
func pubsubEmulatorJar() (string, error) {
	var tried []string
	for _, root := range sdkRoots() {
		if root == "" {
			continue
		}
		pattern := filepath.Join(root, "platform", "pubsub-emulator", "lib", "cloud-pubsub-emulator-*.jar")
		jars, _ := filepath.Glob(pattern)
		if len(jars) > 0 {
			sort.Strings(jars) // one version is installed; if several, take the last
			return jars[len(jars)-1], nil
		}
		tried = append(tried, pattern)
	}
	return "", fmt.Errorf("cloud-pubsub-emulator jar not found (looked for %s)", strings.Join(tried, ", "))
}

// waitPubSubReady polls the emulator until it passes its health check
// (GET / answers "Ok") and answers a cheap administrative call (list the
// topics of a project, over the REST surface, which serves the same
// in-memory state as gRPC), or within has gone by. Connections are not
// kept alive, so no idle connection outlives the wait.
func waitPubSubReady(addr string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = probePubSub(ctx, client, addr); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pubsub emulator at %s not ready after %v: %w", addr, within, last)
		case <-tick.C:
		}
	}
}

func probePubSub(ctx context.Context, client *http.Client, addr string) error {
	body, err := pubsubGet(ctx, client, "http://"+addr+"/")
	if err != nil {
		return err
	}
	if strings.TrimSpace(body) != "Ok" {
		return fmt.Errorf("GET / = %q, want \"Ok\"", body)
	}
	_, err = pubsubGet(ctx, client, "http://"+addr+"/v1/projects/idemgate-probe/topics")
	return err
}

// pubsubGet returns the start of the body of a 200 answer to GET url.
func pubsubGet(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}
