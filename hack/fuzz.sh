#!/usr/bin/env bash
# Runs each fuzz target given (package:FuzzName) for the time given, and
# fails on the first finding. Usage: hack/fuzz.sh 30s reporters:FuzzDotenvValue ...
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=$1
shift
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
for target in "$@"; do
	pkg=${target%%:*} fuzz=${target#*:}
	corpus="$pkg/testdata/fuzz/$fuzz"
	before=$({ ls "$corpus" 2>/dev/null || true; } | wc -l)
	go test -run '^$' -fuzz "^$fuzz\$" -fuzztime "$fuzztime" "./$pkg" >"$logs/$fuzz.log" 2>&1 || true
	execs=$(grep -o 'execs: [0-9]*' "$logs/$fuzz.log" | tail -1 | grep -o '[0-9]*' || echo 0)
	if grep -q '^ok' "$logs/$fuzz.log"; then
		echo "fuzz $fuzz: $execs executions in $fuzztime, no failure"
		continue
	fi
	# Go 1.26's fuzzing coordinator can report its own -fuzztime deadline
	# as a failure (golang/go#75804, fixed in Go 1.27): a clean stop when
	# it wrote no failing input. Anything else is a finding.
	after=$({ ls "$corpus" 2>/dev/null || true; } | wc -l)
	if [[ $after -eq $before ]] && grep -q '^    context deadline exceeded$' "$logs/$fuzz.log" && ! grep -q 'Failing input written' "$logs/$fuzz.log"; then
		echo "fuzz $fuzz: $execs executions in $fuzztime, no failure (stopped by golang/go#75804 at its fuzztime)"
		continue
	fi
	grep -v '^fuzz: elapsed' "$logs/$fuzz.log"
	echo "fuzz $fuzz: failed"
	exit 1
done
