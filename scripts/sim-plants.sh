#!/bin/sh
# sim-plants.sh: prove the simulator (internal/sim) finds each bug planted
# back into the library (internal/plant, build tag idemgate_plant, or a
# patch applied to a scratch copy, below) within its seeds.
#
# The delivery path's plants (items 1, 3, 9 and 14 of "The guarantee,
# second pass"; 221 and 226 of issue 22; 321–325 of issue 32, the
# failures and the wait for the holder): TestSim must fail; the
# script prints the seed that found it, how many seeds that took, and the
# rules it broke, and TestSimFindsPlants then checks that the rule broken
# is the plant's own.
#
# Issue 29's plants (291–298): the pipeline family (TestSimPipelineFindsPlants)
# must find each within its seeds, on the backend whose code it is in.
# Those runs are in real time and mostly wait, so they run side by side.
#
# The plants that are patches (internal/sim/plants/*.patch): each is a
# unified diff against the library (paths a/… and b/… from the
# repository's root), after header lines that name the rules the
# simulator must break (Rules: a, b) and the backend that reaches it
# (Backend: memstore, or a pipeline backend: model, sqlite, postgres,
# datastore, firestore). The script copies the files the patch changes
# to a scratch directory, applies the patch there (a patch that no
# longer applies fails the proof, loudly), builds the sim test binary
# over them with go test -overlay (the tree is never written), and runs
# TestSimFindsPlants or TestSimPipelineFindsPlants with the plant.
set -u
cd "$(dirname "$0")/.."
mkdir -p bin
bin=bin/sim-plant.test
go test -c -tags idemgate_plant -o "$bin" ./internal/sim/ || exit 1
bin=$(pwd)/$bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
patches=""
for p in internal/sim/plants/*.patch; do
	[ -e "$p" ] || continue
	name=$(basename "$p" .patch)
	dir=$tmp/patch-$name
	mkdir -p "$dir/src"
	overlay=""
	for f in $(sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$p"); do
		mkdir -p "$dir/src/$(dirname "$f")"
		[ -f "$f" ] && cp "$f" "$dir/src/$f"
		overlay="$overlay${overlay:+,}\"$(pwd)/$f\":\"$dir/src/$f\""
	done
	if [ -z "$overlay" ] || ! patch -d "$dir/src" -p1 --batch --forward --silent <"$p" >"$dir/patch.log" 2>&1; then
		echo "plant $name: THE PATCH NO LONGER APPLIES ($p):"
		cat "$dir/patch.log"
		status=1
		continue
	fi
	echo "{\"Replace\":{$overlay}}" >"$dir/overlay.json"
	if ! go test -c -tags idemgate_plant -overlay "$dir/overlay.json" -o "$dir/sim.test" ./internal/sim/; then
		echo "plant $name: the sim test binary does not build with the patch ($p)"
		status=1
		continue
	fi
	patches="$patches $name"
done
cd internal/sim # the package's directory, as go test runs it

# patchenv runs its arguments with the environment of the patch plant $1.
patchenv() {
	p=../../internal/sim/plants/$1.patch
	name=$1
	shift
	IDEMGATE_PLANT_PATCH=$name IDEMGATE_PLANT_RULES=$(sed -n 's/^Rules: *//p' "$p" | head -1) \
		IDEMGATE_PLANT_BACKEND=$(sed -n 's/^Backend: *//p' "$p" | head -1) \
		IDEMGATE_PLANT_RARE=$(sed -n 's/^Rare: *//p' "$p" | head -1) "$@"
}
for n in $patches; do
	[ "$(sed -n 's/^Backend: *//p' ../../internal/sim/plants/$n.patch | head -1)" = memstore ] || continue
	if ! patchenv "$n" "$tmp/patch-$n/sim.test" -test.count=1 -test.run 'TestSimFindsPlants' -test.v 2>&1 | grep -E "plant $n: (found|not found)"; then
		echo "plant $n: no report from TestSimFindsPlants"
		status=1
	fi
done
# haspatch n: the switch plant n has become a patch (plants/n-*.patch),
# which the patch loops above and below prove instead.
haspatch() {
	for f in ../../internal/sim/plants/"$1"-*.patch; do
		[ -e "$f" ] && return 0
	done
	return 1
}
for n in 1 3 9 14 221 226 321 322 323 324 325; do
	haspatch "$n" && continue
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
# The Datastore emulator's plants (294, 296) run after the others: eight
# runs at once slow its answers past what the relays' short leases allow,
# and a relay then gives its batches back untried (which the family reads
# as a message delayed past its bound).
pipe=""
for group in "291 293 295" "294 296"; do
	for n in $group; do
		haspatch "$n" && continue
		pipe="$pipe $n"
		IDEMGATE_PLANT=$n "$bin" -test.count=1 -test.run 'TestSimPipelineFindsPlants' -test.v >"$tmp/$n" 2>&1 &
	done
	wait
done
# The pipeline family's patch plants, side by side.
for n in $patches; do
	case "$(sed -n 's/^Backend: *//p' ../../internal/sim/plants/$n.patch | head -1)" in
	memstore) continue ;;
	esac
	patchenv "$n" "$tmp/patch-$n/sim.test" -test.count=1 -test.run 'TestSimPipelineFindsPlants' -test.v >"$tmp/$n" 2>&1 &
	pipe="$pipe $n"
done
wait
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
