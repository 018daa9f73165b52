// Command casemutants runs the mutants go-gremlins v0.6.0 reports NOT
// COVERED only because Go's coverage profile has no block for them: the
// conditions of a switch's cases (gremlins issue #298) and the values of
// package-level constants and variables. The cover tool counts statements,
// and neither is one, so gremlins never tests a mutant there even when
// every test passes through it. This command applies each such mutant
// exactly as gremlins would have (the same token swapped at the same
// position), through go test's -overlay so the source tree is never
// written, and runs the package's tests against it. A mutant that go vet
// refuses and no test fails is KILLED BY VET, counted killed as gremlins
// counts it.
//
//	go run ./scripts/casemutants bin/mutate/pushauth.json ./pushauth
//
// It prints one line per mutant it ran, then the package's figures:
// gremlins' verdicts with these mutants' own in place of NOT COVERED. A
// mutant elsewhere that gremlins reports NOT COVERED is left so (no test
// runs it). The exit status is 0 whatever lived: the figures are the
// output. scripts/mutate.sh runs it after gremlins, for each package.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// report is the part of gremlins' JSON output read here.
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

// swaps is gremlins' table of replacements (internal/engine/mappings.go) for
// the mutator types it enables by default or with --invert-logical.
var swaps = map[string]map[string]string{
	"ARITHMETIC_BASE":       {"+": "-", "*": "/", "/": "*", "%": "*", "-": "+"},
	"CONDITIONALS_BOUNDARY": {">=": ">", ">": ">=", "<=": "<", "<": "<="},
	"CONDITIONALS_NEGATION": {"==": "!=", ">=": "<", ">": "<=", "<=": ">", "<": ">=", "!=": "=="},
	"INCREMENT_DECREMENT":   {"--": "++", "++": "--"},
	"INVERT_NEGATIVES":      {"-": "+"},
	"INVERT_LOGICAL":        {"&&": "||", "||": "&&"},
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: casemutants bin/mutate/<pkg>.json ./<pkg>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "casemutants:", err)
		os.Exit(1)
	}
}

func run(reportPath, pkg string) error {
	b, err := os.ReadFile(reportPath)
	if err != nil {
		return err
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", reportPath, err)
	}
	dir, err := filepath.Abs(pkg)
	if err != nil {
		return err
	}

	// Gremlins' own verdicts, and the mutants it could not place.
	count := make(map[string]int)
	type candidate struct {
		file, path string
		src        []byte
		line, col  int
		typ        string
	}
	var todo []candidate
	for _, f := range r.Files {
		path := filepath.Join(dir, f.Name)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, m := range f.Mutations {
			if m.Status == "NOT COVERED" && unmapped(fset, file, m.Line, m.Column) {
				todo = append(todo, candidate{f.Name, path, src, m.Line, m.Column, m.Type})
				continue
			}
			count[m.Status]++
		}
	}

	if len(todo) > 0 {
		// A baseline run proves the tests pass unmutated and bounds each
		// mutant's run, as gremlins' --timeout-coefficient 10 does.
		start := time.Now()
		if killed, err := goTest(context.Background(), pkg, "", true); killed || err != nil {
			return fmt.Errorf("the unmutated tests of %s fail (%v)", pkg, err)
		}
		timeout := 10*time.Since(start) + 10*time.Second
		tmp, err := os.MkdirTemp("", "casemutants")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		for _, c := range todo {
			mutated, err := mutate(c.src, c.line, c.col, swaps[c.typ])
			if err != nil {
				return fmt.Errorf("%s:%d:%d %s: %w", c.file, c.line, c.col, c.typ, err)
			}
			status, err := try(tmp, c.path, mutated, pkg, timeout)
			if err != nil {
				return fmt.Errorf("%s:%d:%d %s: %w", c.file, c.line, c.col, c.typ, err)
			}
			count[status]++
			fmt.Printf("%12s %s at %s:%d:%d (casemutants)\n", status, c.typ, c.file, c.line, c.col)
		}
	}

	// The figure counts a timed-out mutant as killed, as gremlins does,
	// and a NOT COVERED one as not killed.
	k, t, l, n := count["KILLED"]+count["KILLED BY VET"], count["TIMED OUT"], count["LIVED"], count["NOT COVERED"]
	figure := "n/a"
	if all := k + t + l + n; all > 0 {
		figure = fmt.Sprintf("%.1f%%", 100*float64(k+t)/float64(all))
	}
	fmt.Printf("%s: killed %d, timed out %d, lived %d, not covered %d, not viable %d (casemutants ran %d); (killed+timed out)/(killed+timed out+lived+not covered) = %s\n",
		pkg, k, t, l, n, count["NOT VIABLE"], len(todo), figure)
	return nil
}

// unmapped reports whether line:col lies where a covered mutant has no
// coverage block: in the condition of a case clause, or in a package-level
// declaration.
func unmapped(fset *token.FileSet, file *ast.File, line, col int) bool {
	in := func(n ast.Node) bool {
		from, to := fset.Position(n.Pos()), fset.Position(n.End())
		return after(line, col, from.Line, from.Column) && !after(line, col, to.Line, to.Column)
	}
	for _, d := range file.Decls {
		if g, ok := d.(*ast.GenDecl); ok && in(g) {
			return true
		}
	}
	found := false
	ast.Inspect(file, func(n ast.Node) bool {
		if cc, ok := n.(*ast.CaseClause); ok {
			for _, e := range cc.List {
				found = found || in(e)
			}
		}
		return !found
	})
	return found
}

// after reports whether l:c is at or after line:col.
func after(l, c, line, col int) bool { return l > line || l == line && c >= col }

// mutate swaps the operator at line:col (1-based, col in bytes) of src
// according to swap.
func mutate(src []byte, line, col int, swap map[string]string) ([]byte, error) {
	lines := strings.SplitAfter(string(src), "\n")
	if line > len(lines) {
		return nil, errors.New("no such line")
	}
	l := lines[line-1]
	i := col - 1
	for _, op := range []string{">=", "<=", "==", "!=", "&&", "||", "++", "--", ">", "<", "+", "-", "*", "/", "%"} {
		if strings.HasPrefix(l[i:], op) {
			to, ok := swap[op]
			if !ok {
				return nil, fmt.Errorf("no swap for %q", op)
			}
			lines[line-1] = l[:i] + to + l[i+len(op):]
			return []byte(strings.Join(lines, "")), nil
		}
	}
	return nil, fmt.Errorf("no operator at column %d of %q", col, l)
}

// try runs the package's tests with path replaced by mutated.
func try(tmp, path string, mutated []byte, pkg string, timeout time.Duration) (string, error) {
	mfile := filepath.Join(tmp, "mutant.go")
	if err := os.WriteFile(mfile, mutated, 0o600); err != nil {
		return "", err
	}
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{path: mfile}})
	if err != nil {
		return "", err
	}
	ofile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ofile, overlay, 0o600); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	killed, err := goTest(ctx, pkg, ofile, true)
	if errors.Is(err, errNotViable) {
		// go test runs vet first, and vet fails "a == 1 && a == 2", the
		// mutant of many a "case a == 1 || a == 2". Gremlins counts such a
		// mutant killed (go test exits 1); so does this, if it builds, but
		// says so: no test ran against it.
		if killed, err = goTest(ctx, pkg, ofile, false); err == nil && !killed {
			return "KILLED BY VET", nil
		}
	}
	switch {
	case ctx.Err() != nil:
		return "TIMED OUT", nil
	case errors.Is(err, errNotViable):
		return "NOT VIABLE", nil
	case err != nil:
		return "", err
	case killed:
		return "KILLED", nil
	}
	return "LIVED", nil
}

// errNotViable is a mutant that does not compile.
var errNotViable = errors.New("the mutant does not build")

// goTest runs pkg's tests, with overlay when it is not empty, and go vet's
// checks first if vet. killed means they failed; err that they could not be
// run.
func goTest(ctx context.Context, pkg, overlay string, vet bool) (killed bool, err error) {
	args := []string{"test", "-count=1", "-failfast"}
	if !vet {
		args = append(args, "-vet=off")
	}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		if strings.Contains(string(out), "[build failed]") {
			return false, errNotViable
		}
		if strings.Contains(string(out), "[setup failed]") {
			return false, fmt.Errorf("go test: %s", out)
		}
		return true, nil
	}
	return false, err
}
