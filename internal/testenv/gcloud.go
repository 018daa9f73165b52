package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// The Cloud SDK's emulators are Java programs. They are started here with
// java directly (not through the SDK's shell wrappers), so the process that
// Server.Stop signals is the JVM itself and no wrapper can outlive it.

// sdkRoots are the places a Cloud SDK is commonly installed.
func sdkRoots() []string {
	roots := []string{os.Getenv("CLOUDSDK_ROOT_DIR")}
	roots = append(roots, "/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk")
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, "google-cloud-sdk"))
	}
	return roots
}

// sdkFile finds rel (e.g. "platform/cloud-datastore-emulator/CloudDatastore.jar",
// or a glob pattern: the last match in name order) in an installed Cloud SDK.
func sdkFile(rel string) (string, error) {
	var tried []string
	for _, root := range sdkRoots() {
		if root == "" {
			continue
		}
		p := filepath.Join(root, rel)
		if ms, _ := filepath.Glob(p); len(ms) > 0 {
			sort.Strings(ms) // one version is installed; if several, take the last
			return ms[len(ms)-1], nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("%s not found (looked in %s)", filepath.Base(rel), strings.Join(tried, ", "))
}

// startJavaEmulator runs java on the SDK's jar (found by sdkFile) with the
// arguments args gives for the jar's path and a free port in dir, and
// waits until the emulator passes waitHealthy with probes.
func startJavaEmulator(dir, jar string, args func(jar string, port int) []string, probes ...string) (*Server, error) {
	java, err := javaPath()
	if err != nil {
		return nil, err
	}
	jarPath, err := sdkFile(jar)
	if err != nil {
		return nil, err
	}
	const within = 60 * time.Second // a cold JVM on a busy machine is slow
	s, err := startOnFreePort(dir, within, java, func(port int) []string {
		// -Duser.language=en: the emulators only speak English, like the
		// SDK's wrapper scripts ask for.
		return append([]string{"-Duser.language=en"}, args(jarPath, port)...)
	})
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(s.Addr, within, probes...); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// javaPath finds java the way the SDK's launchers do: $JAVA_HOME/bin/java,
// else java in PATH.
func javaPath() (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return lookPath("java", "/usr/bin/java")
}

// waitHealthy polls the emulator until its health check passes (GET /
// answers "Ok") and each of probes, a path, answers 200, or within has
// gone by. The port accepts connections a little before the emulator
// serves requests. Connections are not kept alive, so no idle connection
// outlives the wait.
func waitHealthy(addr string, within time.Duration, probes ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	healthy := func() error {
		if body, err := get(ctx, client, "http://"+addr+"/"); err != nil || strings.TrimSpace(body) != "Ok" {
			return fmt.Errorf("GET / = %q, %v; want \"Ok\"", body, err)
		}
		for _, p := range probes {
			if _, err := get(ctx, client, "http://"+addr+p); err != nil {
				return err
			}
		}
		return nil
	}
	var last error
	for {
		if last = healthy(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("emulator at %s not healthy after %v: %w", addr, within, last)
		case <-tick.C:
		}
	}
}

// get returns the start of the body of a 200 answer to GET url.
func get(ctx context.Context, client *http.Client, url string) (string, error) {
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

// emulatorAddr returns the address in env, or else that of the shared
// emulator called name, started with start; it skips t (or fails it, when
// backends are required) with install's advice when that fails.
func emulatorAddr(t testing.TB, env, name, install string, start func(dir string) (*Server, error)) string {
	t.Helper()
	if h := emulatorHost(env); h != "" {
		return h
	}
	s, err := shared(name, start)
	if err != nil {
		Unavailable(t, "%s: set %s or install the Cloud SDK emulator (apt install %s) and a Java 17 runtime: %v", name, env, install, err)
	}
	return s.Addr
}

// emulatorHost returns the emulator address in the environment variable
// env, without the scheme some tools put in front of it.
func emulatorHost(env string) string {
	h := os.Getenv(env)
	h = strings.TrimPrefix(h, "http://")
	return strings.TrimPrefix(h, "https://")
}

// useEmulator sets env to the address of the shared server called name,
// starting it with start, unless env is already set. It is for TestMain,
// where no testing.TB exists: examples and clients that read env then find
// the emulator. A failed start is returned and remembered, so tests that
// ask for the server afterwards skip (or fail, when backends are required)
// with the reason.
func useEmulator(env, name string, start func(dir string) (*Server, error)) error {
	if os.Getenv(env) != "" {
		return nil
	}
	s, err := shared(name, start)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if s.Addr == "" {
		return errors.New(name + ": no address")
	}
	return os.Setenv(env, s.Addr)
}
