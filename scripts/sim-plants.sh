#!/bin/sh
# sim-plants.sh: prove the simulator (internal/sim) finds the bugs of items
# 1, 3, 9 and 14 of "The guarantee, second pass", and of item 1 of issue 22
# (plant 221: fences restart on a record made anew), when each is planted
# back (internal/plant, build tag idemgate_plant), within the default budget of
# seeds of go test. For each plant, TestSim must fail; the script prints the
# seed that found it, how many seeds that took, and the rules it broke.
# TestSimFindsPlants then checks, in process, that the rule broken is the
# plant's own.
set -u
cd "$(dirname "$0")/.."
status=0
for n in 1 3 9 14 221 226 229; do
	out=$(IDEMGATE_PLANT=$n go test -count=1 -tags idemgate_plant -run 'TestSim$' ./internal/sim/ 2>&1)
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
	if ! IDEMGATE_PLANT=$n go test -count=1 -tags idemgate_plant -run 'TestSimFindsPlants' -v ./internal/sim/ 2>&1 | grep -E "plant $n: (found|not found)"; then
		status=1
	fi
done
# Issue 29's plants: the pipeline family (TestSimPipelineFindsPlants) must
# find each within its budget, on the backend whose code it is in.
for n in 291 292 293 294 295 296 297 298; do
	if ! grep -rqF --include='*.go' --exclude-dir=sim "plant.On($n)" .; then
		echo "plant $n: not planted in the code yet"
		continue
	fi
	out=$(IDEMGATE_PLANT=$n go test -count=1 -tags idemgate_plant -run 'TestSimPipelineFindsPlants' -v ./internal/sim/ 2>&1)
	line=$(printf '%s\n' "$out" | grep -E "plant $n: (found|not found|not reachable)" | head -1)
	echo "${line:-plant $n: no report}" | sed 's/^ *//'
	case "$line" in
	*"plant $n: found"*) ;;
	*"not reachable yet"*) ;; # the family has no backend for its store yet
	*)
		printf '%s\n' "$out" | tail -20
		status=1
		;;
	esac
done
exit $status
