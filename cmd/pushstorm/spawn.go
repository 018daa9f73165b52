package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// spawn starts command (split on spaces) as the endpoint under test, on a
// free port, with SUPPLIER_URL set when there is a supplier. It waits until
// GET /healthz answers 200 and returns the base URL and a function that
// stops the process with SIGTERM (SIGKILL after 10 s) and waits for it.
func spawn(ctx context.Context, command, supplierURL string, stderr io.Writer) (string, func(), error) {
	args := strings.Fields(command)
	if len(args) == 0 {
		return "", nil, errors.New("empty command")
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	if supplierURL != "" {
		cmd.Env = append(cmd.Env, "SUPPLIER_URL="+supplierURL)
	}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitHealthy(ctx, base+"/healthz", exited); err != nil {
		stop()
		return "", nil, err
	}
	return base, stop, nil
}

// waitHealthy polls url until it answers 200, the process exits, or 30 s pass.
func waitHealthy(ctx context.Context, url string, exited <-chan error) error {
	deadline := time.Now().Add(30 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the endpoint exited before it was healthy: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after 30s", url)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
