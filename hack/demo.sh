#!/usr/bin/env bash
# make demo: start a local control plane, run gantry's whole pipeline on
# examples/hello, show what it did, change the app and run again, then tear
# everything down.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
cluster_pid=
cleanup() {
  if [[ -n "$cluster_pid" ]] && kill -0 "$cluster_pid" 2>/dev/null; then
    kill -INT "$cluster_pid"
    wait "$cluster_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "starting a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok)"
go build -o "$work/cluster" ./e2e/cmd/cluster
"$work/cluster" up -kubeconfig "$work/kubeconfig" >"$work/cluster.out" 2>"$work/cluster.log" &
cluster_pid=$!
for _ in $(seq 1 240); do
  grep -q '^export KUBECONFIG=' "$work/cluster.out" 2>/dev/null && break
  kill -0 "$cluster_pid" 2>/dev/null || { cat "$work/cluster.log"; exit 1; }
  sleep 0.5
done
grep -q '^export KUBECONFIG=' "$work/cluster.out" || { echo "cluster did not start"; cat "$work/cluster.log"; exit 1; }
tail -n 1 "$work/cluster.log"
export KUBECONFIG="$work/kubeconfig"
# The workflow's secret that signs every revision gantry records, so that
# a rollback writes only what this workflow recorded (docs/revisions.md).
# In CI it is a secret of the repository; here, one for this demo.
GANTRY_RECORD_KEY=$(head -c 32 /dev/urandom | base64)
export GANTRY_RECORD_KEY

step "gantry apply: build, validate, apply, prune, wait"
bin/gantry apply --path examples/hello --inventory hello --report "$work/report.json"

step "what is running now"
bin/kubectl get namespace hello
bin/kubectl get deployments,pods,services,configmaps -n hello -o wide

step "the same apply again writes nothing"
bin/gantry apply --path examples/hello --inventory hello

step "gantry diff with 3 replicas instead of 2 (exit 3: changes pending)"
set +e
bin/gantry diff --path examples/hello --inventory hello --patches hack/demo/three-replicas.yaml --detailed-exitcode
echo "gantry diff exited $?"
set -e

step "apply the change; gantry waits until the third replica is ready"
bin/gantry apply --path examples/hello --inventory hello --patches hack/demo/three-replicas.yaml
bin/kubectl get deployment hello -n hello

step "the inventory gantry keeps in the cluster, and its revisions"
bin/gantry inventory --inventory hello
bin/gantry history --inventory hello

step "someone scales it by hand: gantry drift names the change and who made it (exit 3)"
bin/kubectl scale deployment hello -n hello --replicas=5
set +e
bin/gantry drift --inventory hello
echo "gantry drift exited $?"
set -e

step "roll back to the first revision (2 replicas), pruned and waited for as an apply"
bin/gantry rollback --inventory hello --to 1
bin/kubectl get deployment hello -n hello

step "the JSON report of the first run (excerpt)"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({k: r[k] for k in ("reason","inventory","stages")}, indent=2))' "$work/report.json" 2>/dev/null || head -c 1200 "$work/report.json"

step "done; tearing the control plane down"
