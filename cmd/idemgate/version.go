package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// version prints the module's build information: its path and version,
// the Go release, and the VCS revision the binary was built from, when
// the build recorded them.
func (c *cli) version(_ context.Context, args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(c.stderr, "idemgate: version takes no arguments (got %q)\n", args[0])
		return exitUsage
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(c.stderr, "idemgate: this binary carries no build information")
		return exitProblem
	}
	fmt.Fprintf(c.stdout, "%s %s\n%s\n", bi.Main.Path, bi.Main.Version, bi.GoVersion)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified":
			fmt.Fprintf(c.stdout, "%s %s\n", s.Key, s.Value)
		}
	}
	return exitOK
}
