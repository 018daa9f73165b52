#!/usr/bin/env bash
# Loopback throughput of example-run with the guard versus the same server
# without it (IDEMGATE_EXAMPLE_BARE=1), each driven by pushstorm at the same
# concurrency, alternating so that machine noise hits both alike.
# Usage: scripts/bench-http.sh [rounds] [messages] [concurrency]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} n=${2:-20000} conc=${3:-32}
mkdir -p bin
go build -o bin/ ./cmd/example-run ./cmd/pushstorm

rate() { # $1 = 1 for the bare server
	IDEMGATE_EXAMPLE_BARE=$1 LOG_LEVEL=error IDEMGATE_STORE=memory:// \
		bin/pushstorm -spawn bin/example-run -path / -n "$n" -concurrency "$conc" \
		-dup 0 -concurrent 0 -republish 0 -json 2>/dev/null |
		sed -n 's/.*"deliveries_per_second": *\([0-9.]*\).*/\1/p'
}

guarded=() bare=()
for _ in $(seq "$rounds"); do
	bare+=("$(rate 1)")
	guarded+=("$(rate 0)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
g=$(median "${guarded[@]}") b=$(median "${bare[@]}")
echo "deliveries/s at concurrency $conc, $n messages, median of $rounds:"
echo "  bare (no guard)      $b   (${bare[*]})"
echo "  idemgate + memstore  $g   (${guarded[*]})"
awk -v g="$g" -v b="$b" 'BEGIN {printf "  ratio                %.2f (target >= 0.90)\n", g/b}'
