#!/usr/bin/env bash
# Fails when git tracks a compiled binary or a file larger than 1 MB: build
# into bin/ (ignored), and keep generated data out of the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue
	if [ "$(stat -c %s "$f")" -gt 1048576 ]; then
		echo "tracked file over 1 MB: $f" >&2
		status=1
	fi
	case "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" in
	7f454c46 | cffaedfe | cefaedfe | feedface | feedfacf | 4d5a*)
		echo "tracked compiled binary: $f" >&2
		status=1
		;;
	esac
done < <(git ls-files -z)
exit $status
