#!/bin/sh
# sim-plants.sh: prove the simulator (internal/sim) finds each bug planted
# back into the library (internal/plant, build tag idemgate_plant) within
# its budget of seeds.
#
# The delivery path's plants (items 1, 3, 9 and 14 of "The guarantee,
# second pass"; 221, 226 and 229 of issue 22; 321–325 of issue 32, the
# failures and the wait for the holder): TestSim must fail; the
# script prints the seed that found it, how many seeds that took, and the
# rules it broke, and TestSimFindsPlants then checks that the rule broken
# is the plant's own.
#
# Issue 29's plants (291–298): the pipeline family (TestSimPipelineFindsPlants)
# must find each within its budget, on the backend whose code it is in.
# Those runs are in real time and mostly wait, so they run side by side.
set -u
cd "$(dirname "$0")/.."
mkdir -p bin
bin=bin/sim-plant.test
go test -c -tags idemgate_plant -o "$bin" ./internal/sim/ || exit 1
bin=$(pwd)/$bin
cd internal/sim # the package's directory, as go test runs it
status=0
for n in 1 3 9 14 221 226 229 321 322 323 324 325; do
	out=$(IDEMGATE_PLANT=$n "$bin" -test.count=1 -test.run 'TestSim$' 2>&1)
	if [ $? -eq 0 ]; then
		echo "plant $n: NOT FOUND: TestSim passed"
		status=1
		continue
	fi
	line=$(printf '%s\n' "$out" | grep -o 'found a violation at seed [0-9]*, the [0-9]*-th seed run (rules: [^)]*)' | head -1)
	if [ -z "$line" ]; then
		echo "plant $n: TestSim failed without a simulator report:"
		printf '%s\n' "$out" | tail -20
		status=1
		continue
	fi
	echo "plant $n: TestSim $line"
	if ! IDEMGATE_PLANT=$n "$bin" -test.count=1 -test.run 'TestSimFindsPlants' -test.v 2>&1 | grep -E "plant $n: (found|not found)"; then
		status=1
	fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The Datastore emulator's plants (294, 296) run after the others: eight
# runs at once slow its answers past what the relays' short leases allow,
# and a relay then gives its batches back untried (which the family reads
# as a message delayed past its bound).
pipe="291 292 293 294 295 296 297 298 299"
for group in "291 292 293 295 297 298 299" "294 296"; do
	for n in $group; do
		IDEMGATE_PLANT=$n "$bin" -test.count=1 -test.run 'TestSimPipelineFindsPlants' -test.v >"$tmp/$n" 2>&1 &
	done
	wait
done
for n in $pipe; do
	line=$(grep -E "plant $n: (found|not found)" "$tmp/$n" | head -1)
	echo "${line:-plant $n: no report}" | sed 's/^ *//; s/^plant_test.go:[0-9]*: //'
	case "$line" in
	*"plant $n: found"*) ;;
	*)
		tail -20 "$tmp/$n"
		status=1
		;;
	esac
done
exit $status
