#!/bin/sh
# mutate.sh: mutation testing (go-gremlins) over the packages whose tests
# need no server; docs/testing.md records the figures and every survivor.
#
#   scripts/mutate.sh                  every package below
#   scripts/mutate.sh ./gateway        some of them
#
# Each mutant is one change to the source (a < turned <=, a && turned ||,
# a + turned -, a condition negated…); gremlins runs the package's own tests
# against it. KILLED: a test failed. LIVED: every test passed (a gap, or an
# equivalent mutant). NOT COVERED: no test of the package runs that line,
# which counts here as not killed. The tool is installed into bin/.
#
# Gremlins v0.6.0 also reports NOT COVERED the mutants in a switch case's
# condition and in a package-level value, which Go's coverage profile has
# no block for (gremlins issue #298); scripts/casemutants then runs those
# against the package's tests, without writing the tree, and prints the
# package's figures with its verdicts in their place: the last lines.
# Each package is mutated alone: its subpackages' files are left out (a
# subpackage is an entry of its own).
set -eu
cd "$(dirname "$0")/.."
version=v0.6.0
gremlins=bin/gremlins
if ! go version -m "$gremlins" 2>/dev/null | grep -q "gremlins	$version"; then
	GOBIN=$(pwd)/bin go install github.com/go-gremlins/gremlins/cmd/gremlins@$version
fi
pkgs=${*:-./gateway ./store/internal/record ./store/memstore ./pull ./cloudevent ./pushenvelope ./pushauth ./outbox ./relay}
mkdir -p bin/mutate
go build -o bin/casemutants ./scripts/casemutants
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
status=0
for p in $pkgs; do
	name=$(echo "${p#./}" | tr / _)
	echo "== $p"
	begin=$(date +%s)
	if "$gremlins" unleash --workers 1 --timeout-coefficient 10 --invert-logical \
		--exclude-files / --output "bin/mutate/$name.json" --output-statuses lt "$p" &&
		bin/casemutants "bin/mutate/$name.json" "$p" >"bin/mutate/$name.case"; then
		cat "bin/mutate/$name.case"
		echo "$(tail -n 1 "bin/mutate/$name.case") [$(($(date +%s) - begin))s]" >>"$summary"
	else
		echo "$p: failed" >>"$summary"
		status=1
	fi
done
echo "== figures"
cat "$summary"
exit $status
