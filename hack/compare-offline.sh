#!/usr/bin/env bash
# Runs the corpus of e2e/testdata/offline through gantry validate --offline,
# kubectl-validate (v0.0.4) and kubeconform (v0.8.0, -strict), the two built
# from the module proxy, all against the same Kubernetes release's schemas
# and the corpus's CRDs (for kubeconform converted to JSON schemas by
# hack/jsonschemas, as openapi2jsonschema --strict converts them), and
# prints what each catches of the objects the API server rejects and
# whether any rejects a valid twin. `make compare-offline` runs it;
# docs/comparison.md records its figures.
set -euo pipefail
cd "$(dirname "$0")/.."
RELEASE=${RELEASE:-1.36}
BIN=$PWD/bin
[ -x "$BIN/kubectl-validate" ] || GOBIN=$BIN GOFLAGS=-mod=mod go install sigs.k8s.io/kubectl-validate@v0.0.4
[ -x "$BIN/kubeconform" ] || GOBIN=$BIN GOFLAGS=-mod=mod go install github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0
[ -x "$BIN/gantry" ] || make build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The release's OpenAPI documents, laid out as kubectl-validate reads them.
mkdir -p "$work/raw" "$work/schemas/api" "$work/cases"
unzip -q "schemas/releases/v$RELEASE.zip" -d "$work/raw"
for f in "$work"/raw/*_openapi.json; do
  b=$(basename "$f" _openapi.json)
  if [ "$b" = api__v1 ]; then cp "$f" "$work/schemas/api/v1.json"; continue; fi
  g=${b#apis__}; v=${g##*__}; g=${g%__*}
  mkdir -p "$work/schemas/apis/$g"; cp "$f" "$work/schemas/apis/$g/$v.json"
done

crds=e2e/testdata/offline/crds
go run ./hack/jsonschemas -release "$RELEASE" -crds "$crds" -out "$work/jsonschemas"
tools="gantry kubectl-validate kubeconform"
total=0
declare -A caught=([gantry]=0 [kubectl-validate]=0 [kubeconform]=0) rejected=([gantry]=0 [kubectl-validate]=0 [kubeconform]=0)
check() { # tool file: exit 0 when the tool accepts the file
  case $1 in
    gantry) mkdir -p "$work/one" && rm -f "$work/one"/* && cp "$2" "$work/one/" &&
      "$BIN/gantry" validate "$work/one" --offline --kubernetes-version "$RELEASE" --crds "$crds" >/dev/null 2>&1 ;;
    kubectl-validate) "$BIN/kubectl-validate" "$2" --local-schemas "$work/schemas" --local-crds "$crds" >/dev/null 2>&1 ;;
    kubeconform) "$BIN/kubeconform" -strict -schema-location "$work/jsonschemas/{{.ResourceKind}}{{.KindSuffix}}.json" "$2" >/dev/null 2>&1 ;;
  esac
}
for f in e2e/testdata/offline/cases/*.yaml; do
  n=$(basename "$f" .yaml)
  awk -v inv="$work/cases/$n.invalid.yaml" -v val="$work/cases/$n.valid.yaml" \
    'BEGIN{out=inv} /^---$/{out=val; next} {print > out}' "$f"
  total=$((total + 1))
  for tool in $tools; do
    check $tool "$work/cases/$n.invalid.yaml" || caught[$tool]=$((caught[$tool] + 1))
    check $tool "$work/cases/$n.valid.yaml" || { rejected[$tool]=$((rejected[$tool] + 1)); echo "$tool rejects the valid twin of $n"; }
  done
done
for tool in $tools; do
  echo "$tool: caught ${caught[$tool]} of $total objects the API server rejects; valid twins rejected: ${rejected[$tool]} (Kubernetes $RELEASE schemas)"
done
