package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

// sdkFile finds rel (e.g. "platform/cloud-datastore-emulator/CloudDatastore.jar")
// in an installed Cloud SDK.
func sdkFile(rel string) (string, error) {
	var tried []string
	for _, root := range sdkRoots() {
		if root == "" {
			continue
		}
		p := filepath.Join(root, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("%s not found (looked in %s)", filepath.Base(rel), strings.Join(tried, ", "))
}

// startJavaEmulator runs class from jar on a free port in dir and waits
// until it answers its health check. args gives the emulator's arguments
// for a port.
func startJavaEmulator(dir, jar, class string, args func(port int) []string) (*Server, error) {
	java, err := lookPath("java", "/usr/bin/java")
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
		return append([]string{"-Duser.language=en", "-cp", jarPath, class}, args(port)...)
	})
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(s.Addr, within); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitHealthy polls the emulator's health check (GET / answers "Ok") until
// it passes or within has gone by. The port accepts connections a little
// before the emulator serves requests.
func waitHealthy(addr string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = healthy(ctx, client, addr); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("emulator at %s not healthy after %v: %w", addr, within, last)
		case <-tick.C:
		}
	}
}

func healthy(ctx context.Context, client *http.Client, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "Ok" {
		return fmt.Errorf("GET / = %d %q, want 200 \"Ok\"", resp.StatusCode, body)
	}
	return nil
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
