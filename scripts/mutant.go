//go:build ignore

// mutant.go tests, one at a time, the mutants of a gremlins report that
// gremlins itself did not run, or runs again those it saw live.
//
// go-gremlins v0.6.0 runs a mutant only when Go's coverage profile covers
// its position, and Go's profile has no counter on a switch's case
// expressions nor on constant expressions: their mutants come out NOT
// COVERED whatever the tests do (go-gremlins/gremlins#298). This program
// applies each such mutant to a copy of the module, runs the package's
// tests, and says what became of it, as gremlins would have:
//
//	go run scripts/mutant.go -report bin/mutate/gateway.json ./gateway
//	go run scripts/mutant.go -report bin/mutate/gateway.json -status LIVED,"NOT COVERED" ./gateway
//	go run scripts/mutant.go -report … -skip-first 'TestRenewalOnRealStores|TestNetFaultCompleteReset' ./gateway
//
// KILLED: a test failed; LIVED: every test passed; NOT VIABLE: the mutant
// does not compile (a + between strings); TIMED OUT: the tests ran past
// -timeout (gremlins counts that as killed).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// skipFirst names slow tests (go test -skip) left out of a first run of
// each mutant: most mutants die without them, and one that lives is run
// again on the whole suite, so the verdict is the whole suite's.
var skipFirst string

type report struct {
	Files []struct {
		Name      string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// replacements maps each mutator to what it turns an operator into, as
// gremlins does.
var replacements = map[string]map[string]string{
	"CONDITIONALS_BOUNDARY": {"<": "<=", "<=": "<", ">": ">=", ">=": ">"},
	"CONDITIONALS_NEGATION": {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"},
	"INVERT_LOGICAL":        {"&&": "||", "||": "&&"},
	"ARITHMETIC_BASE":       {"+": "-", "-": "+", "*": "/", "/": "*", "%": "*"},
	"INCREMENT_DECREMENT":   {"++": "--", "--": "++"},
	"INVERT_NEGATIVES":      {"-": "+"},
}

func main() {
	reportPath := flag.String("report", "", "gremlins JSON report (--output)")
	statuses := flag.String("status", "NOT COVERED", "comma-separated statuses of the mutants to run")
	timeout := flag.Duration("timeout", 5*time.Minute, "longest test run of one mutant")
	flag.StringVar(&skipFirst, "skip-first", "", "tests to skip on a first, quicker run; a mutant that lives through it is run again on every test")
	flag.Parse()
	if *reportPath == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: go run scripts/mutant.go -report FILE [-status S,…] ./pkg")
		os.Exit(2)
	}
	pkg := flag.Arg(0)
	if err := run(*reportPath, strings.Split(*statuses, ","), *timeout, pkg); err != nil {
		fmt.Fprintln(os.Stderr, "mutant:", err)
		os.Exit(1)
	}
}

func run(reportPath string, statuses []string, timeout time.Duration, pkg string) error {
	raw, err := os.ReadFile(reportPath)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return err
	}
	// A copy of the module, so that the worktree is never left mutated and
	// may be edited meanwhile.
	dir, err := os.MkdirTemp("", "mutant-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := copyModule(".", dir); err != nil {
		return err
	}
	counts := map[string]int{}
	for _, f := range rep.Files {
		path := filepath.Join(dir, pkg, f.Name)
		orig, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range f.Mutations {
			if !slices.Contains(statuses, m.Status) {
				continue
			}
			mutated, op, err := mutate(orig, m.Line, m.Column, m.Type)
			if err != nil {
				return fmt.Errorf("%s:%d:%d: %w", f.Name, m.Line, m.Column, err)
			}
			if err := os.WriteFile(path, mutated, 0o644); err != nil {
				return err
			}
			status := test(dir, pkg, timeout)
			counts[status]++
			fmt.Printf("%12s %s at %s:%d:%d (%s, was %s)\n", status, m.Type, f.Name, m.Line, m.Column, op, m.Status)
			if err := os.WriteFile(path, orig, 0o644); err != nil {
				return err
			}
		}
	}
	fmt.Printf("Killed: %d, Lived: %d, Timed out: %d, Not viable: %d\n", counts["KILLED"], counts["LIVED"], counts["TIMED OUT"], counts["NOT VIABLE"])
	return nil
}

// mutate returns src with the operator at line:col (1-based, in bytes)
// replaced as mutator does.
func mutate(src []byte, line, col int, mutator string) ([]byte, string, error) {
	lines := bytes.SplitAfter(src, []byte("\n"))
	if line < 1 || line > len(lines) {
		return nil, "", errors.New("no such line")
	}
	l := lines[line-1]
	at := col - 1
	repl := replacements[mutator]
	if repl == nil {
		return nil, "", fmt.Errorf("unknown mutator %s", mutator)
	}
	for _, n := range []int{2, 1} {
		if at+n > len(l) {
			continue
		}
		op := string(l[at : at+n])
		if to, ok := repl[op]; ok {
			var out []byte
			for _, x := range lines[:line-1] {
				out = append(out, x...)
			}
			out = append(out, l[:at]...)
			out = append(out, to...)
			out = append(out, l[at+n:]...)
			for _, x := range lines[line:] {
				out = append(out, x...)
			}
			return out, op + " → " + to, nil
		}
	}
	return nil, "", fmt.Errorf("no %s operator at the position: %q", mutator, strings.TrimSpace(string(l)))
}

// test builds and runs pkg's tests in dir and names the mutant's status.
func test(dir, pkg string, timeout time.Duration) string {
	if skipFirst != "" {
		if status := goTest(dir, pkg, timeout, "-skip", skipFirst); status != "LIVED" {
			return status
		}
	}
	return goTest(dir, pkg, timeout)
}

func goTest(dir, pkg string, timeout time.Duration, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-count=1", "-failfast", pkg}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		return "TIMED OUT"
	case err == nil:
		return "LIVED"
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		return "NOT VIABLE"
	}
	return "KILLED"
}

// copyModule copies the module at src (without bin/ and .git) to dst.
func copyModule(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "bin" || path == ".git") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, path)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
