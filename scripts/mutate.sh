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
set -eu
cd "$(dirname "$0")/.."
version=v0.6.0
gremlins=bin/gremlins
if ! go version -m "$gremlins" 2>/dev/null | grep -q "gremlins	$version"; then
	GOBIN=$(pwd)/bin go install github.com/go-gremlins/gremlins/cmd/gremlins@$version
fi
pkgs=${*:-./gateway ./internal/guard ./store/internal/record ./store/memstore ./pull ./cloudevent ./pushenvelope ./pushauth ./outbox ./relay}
mkdir -p bin/mutate
status=0
for p in $pkgs; do
	name=$(echo "${p#./}" | tr / _)
	echo "== $p"
	"$gremlins" unleash --workers 1 --timeout-coefficient 10 --invert-logical \
		--output "bin/mutate/$name.json" --output-statuses lt "$p" || status=1
done
exit $status
