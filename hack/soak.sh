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
for target in pipeline:FuzzManifestDecoding entrypoint:FuzzLoad inventory:FuzzEntryID reporters:FuzzOutputsCannotInject diffs:FuzzSecretValuesNeverInDiffs; do
	pkg=${target%%:*} fuzz=${target#*:}
	go test -run '^$' -fuzz "^$fuzz\$" -fuzztime "$fuzztime" "./$pkg" 2>&1 | tee "$logs/$fuzz.log" | grep -v '^fuzz: elapsed' || true
	grep -q '^ok' "$logs/$fuzz.log" || { echo "soak: $fuzz failed"; exit 1; }
	execs=$(grep -o 'execs: [0-9]*' "$logs/$fuzz.log" | tail -1 | grep -o '[0-9]*' || echo 0)
	echo "fuzz $fuzz: $execs executions in $fuzztime, no failure" >>"$figures"
	total=$((total + execs))
done
echo "fuzz: $total executions in all" >>"$figures"
echo
echo "reliability figures (make soak, seed ${GANTRY_FAULT_SEED:-1}):"
cat "$figures"
