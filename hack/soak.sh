#!/usr/bin/env bash
# Runs every kill point and interleaving of the fault suite, then each fuzz
# target for SOAK_FUZZTIME, and prints the reliability figures.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${SOAK_FUZZTIME:-2m}
figures=$(mktemp)
logs=$(mktemp -d)
trap 'rm -rf "$figures" "$logs"' EXIT

GANTRY_SOAK=1 GANTRY_FIGURES="$figures" go test -count=1 -timeout 60m \
	-run 'TestAPIServerKilledMidRun|TestTwoRunsNeverInterleave|TestDeadHolderLeaseIsTakenOver|TestPausedRunIsFenced|TestStalledAndSlowAPIServerEndAtTheTimeout|TestRegistryFailures|TestBadInputCorpus|TestSecretsNeverPrintedOnErrorPaths|TestGitHubAction' ./e2e

total=0
for target in sources:FuzzManifestDecoding entrypoint:FuzzLoad plan:FuzzPlanIsData inventory:FuzzEntryID reporters:FuzzOutputsCannotInject reporters:FuzzDotenvValue reporters:FuzzStickyContentKey reporters:FuzzMarkdownIsText safefile:FuzzSafeWrite logguard:FuzzLogWriter diffs:FuzzSecretValuesNeverInDiffs sources/reader:FuzzReaderStaysInside; do
	pkg=${target%%:*} fuzz=${target#*:}
	corpus="$pkg/testdata/fuzz/$fuzz"
	before=$({ ls "$corpus" 2>/dev/null || true; } | wc -l)
	go test -run '^$' -fuzz "^$fuzz\$" -fuzztime "$fuzztime" "./$pkg" 2>&1 | tee "$logs/$fuzz.log" | grep -v '^fuzz: elapsed' || true
	if ! grep -q '^ok' "$logs/$fuzz.log"; then
		# Go 1.26's fuzzing coordinator can report its own -fuzztime
		# deadline as a failure (golang/go#75804, fixed in Go 1.27): that
		# is a clean stop when it wrote no failing input. Anything else,
		# or a new input under testdata/fuzz, is a finding.
		after=$({ ls "$corpus" 2>/dev/null || true; } | wc -l)
		if [[ $after -eq $before ]] && grep -q '^    context deadline exceeded$' "$logs/$fuzz.log" && ! grep -q 'Failing input written' "$logs/$fuzz.log"; then
			echo "soak: $fuzz stopped with Go's 'context deadline exceeded' at its fuzztime and wrote no failing input (golang/go#75804): a clean stop"
			stop=" (stopped by golang/go#75804 at its fuzztime)"
		else
			echo "soak: $fuzz failed"
			echo "figures so far:"; cat "$figures"
			exit 1
		fi
	fi
	execs=$(grep -o 'execs: [0-9]*' "$logs/$fuzz.log" | tail -1 | grep -o '[0-9]*' || echo 0)
	echo "fuzz $fuzz: $execs executions in $fuzztime, no failure${stop:-}" >>"$figures"
	stop=""
	total=$((total + execs))
done
echo "fuzz: $total executions in all" >>"$figures"
echo
echo "reliability figures (make soak, seed ${GANTRY_FAULT_SEED:-1}):"
cat "$figures"
