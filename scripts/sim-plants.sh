#!/bin/sh
# sim-plants.sh [NAME...]: prove the simulator (internal/sim) finds each
# bug planted back into the library, within its seeds; with arguments,
# only the plants named (a number, 221, or a whole name).
#
# A plant is a patch, internal/sim/plants/NAME.patch: a unified diff
# against the library (paths a/… and b/… from the repository's root),
# after header lines that say what the bug is, the backend that reaches
# it (Backend: memstore for the delivery family, or a pipeline backend:
# model, sqlite, postgres, datastore, datastore-instep, firestore), the
# rules the simulator must break (Rules: a, b), for a scenario few seeds
# draw Rare: yes, and for one only a flag of the simulator draws, Flags:
# (such as -sim.burst-refusals). The script copies the files a patch changes to a
# scratch directory, applies the patch there (a patch that no longer
# applies fails the proof, loudly), builds the sim test binary over them
# with go test -overlay (the tree is never written), and runs
# TestSimFindsPlants (memstore) or TestSimPipelineFindsPlants with it:
# each prints the seed that found the plant and the rules it broke. The
# memstore runs are CPU-bound and run one after another; the pipeline
# runs are in real time and mostly wait, so they run side by side.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
header() { sed -n "s/^$1: *//p" "internal/sim/plants/$2.patch" | head -1; }

# build NAME builds the sim test binary over the patched copy of NAME.
build() {
	go test -c -tags idemgate_plant -overlay "$tmp/patch-$1/overlay.json" -o "$tmp/patch-$1/sim.test" ./internal/sim/ \
		>"$tmp/patch-$1/build.log" 2>&1 || touch "$tmp/patch-$1/broken"
}

patches=""
for p in internal/sim/plants/*.patch; do
	[ -e "$p" ] || continue
	name=$(basename "$p" .patch)
	if [ $# -gt 0 ]; then
		want=
		for a in "$@"; do
			case "$name" in "$a" | "$a"-*) want=1 ;; esac
		done
		[ -n "$want" ] || continue
	fi
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
	patches="$patches $name"
done

# The builds, two at a time (a link is mostly one core's work).
set -- $patches
while [ $# -gt 0 ]; do
	build "$1" &
	[ $# -gt 1 ] && build "$2" &
	wait
	shift
	[ $# -gt 0 ] && shift
done
built=""
for n in $patches; do
	if [ -e "$tmp/patch-$n/broken" ]; then
		echo "plant $n: the sim test binary does not build with the patch:"
		tail -20 "$tmp/patch-$n/build.log"
		status=1
		continue
	fi
	built="$built $n"
done

# run NAME TEST runs the plant's binary in the package's directory, as go
# test does, with the plant's header lines in its environment (see
# patchFromEnv in internal/sim/plant_test.go).
run() {
	rules=$(header Rules "$1") backend=$(header Backend "$1") rare=$(header Rare "$1") flags=$(header Flags "$1")
	# shellcheck disable=SC2086 # $flags: the header's words
	(cd internal/sim && IDEMGATE_PLANT_PATCH=$1 IDEMGATE_PLANT_RULES=$rules IDEMGATE_PLANT_BACKEND=$backend \
		IDEMGATE_PLANT_RARE=$rare "$tmp/patch-$1/sim.test" -test.count=1 -test.run "$2" -test.v $flags) >"$tmp/$1.out" 2>&1
}
for n in $built; do
	[ "$(header Backend "$n")" = memstore ] && run "$n" 'TestSimFindsPlants$'
done
for n in $built; do
	[ "$(header Backend "$n")" = memstore ] || run "$n" 'TestSimPipelineFindsPlants$' &
done
wait
for n in $built; do
	line=$(grep -E "plant $n: (found|not found)" "$tmp/$n.out" | head -1 | sed 's/^ *//; s/^plant_test.go:[0-9]*: //')
	echo "${line:-plant $n: no report}"
	case "$line" in
	"plant $n: found"*) ;;
	*)
		tail -20 "$tmp/$n.out"
		status=1
		;;
	esac
done
exit $status
