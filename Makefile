# The index of developer actions. Anything longer than a few lines lives in
# hack/.

SHELL := /usr/bin/env bash
BIN   := $(CURDIR)/bin
FIGURES := $(CURDIR)/.figures
GO    ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Helm's packages read their own version (a chart's .Capabilities.HelmVersion)
# from a variable their CLI's build sets: gantry's build sets it as well, to
# the version go.mod pins, so that charts render as that helm CLI renders them.
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v4" { print $$2 }' go.mod)
LDFLAGS := -s -w -X github.com/gantry-dev/gantry/entrypoint.Version=$(VERSION) -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)
export GANTRY_BIN_DIR := $(BIN)

KUBE_BINS := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/kubectl
AGE_BINS  := $(BIN)/age $(BIN)/age-keygen
# The local control plane: all that make demo and make cluster need.
CLUSTER_TOOLS := $(KUBE_BINS) $(BIN)/etcd $(BIN)/kwok $(BIN)/kwok-stages.yaml
TOOLS     := $(CLUSTER_TOOLS) $(AGE_BINS) $(BIN)/cosign $(BIN)/sops $(BIN)/actionlint $(BIN)/tektoncheck $(BIN)/gitlab-ci-local $(BIN)/helm $(BIN)/kustomize

FLUX_BINS := $(BIN)/source-controller $(BIN)/kustomize-controller

.PHONY: all bench bench-peers build image tools cluster-tools flux-tools fuzz test test-image test-flux cert-manager-tools test-certmanager node-tools test-node tekton-tools test-race test-short demo cluster docs schemas compare-offline lint vuln soak release-prep clean help

all: build

## build: the gantry binary, into bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/gantry .

## tools: the local control plane (Kubernetes v1.36.3, etcd, kwok) the interop CLIs (age, cosign, sops, helm), actionlint, tektoncheck from the Go module proxy, gitlab-ci-local from the npm registry, and a registry server (Debian docker-registry) and rsync for gitlab-ci-local, into bin/
tools: $(TOOLS)
	@hack/install-registry.sh

## cluster-tools: the local control plane only (Kubernetes v1.36.3, etcd, kwok), into bin/: what make demo and make cluster need
cluster-tools: $(CLUSTER_TOOLS)

# Each tool module under hack/tools pins its versions; a binary is rebuilt
# only when its pins change, so a warm run takes seconds.
# The version is stamped as Kubernetes' release build stamps it: clients
# that check the server's version (knative's controllers, Tekton's among
# them) refuse the unstamped v0.0.0-master+$Format:%H$.
$(KUBE_BINS) &: hack/tools/kube/go.mod hack/tools/kube/go.sum
	cd hack/tools/kube && $(GO) build -trimpath -ldflags '-s -w -X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36' -o $(BIN)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
	@touch $(KUBE_BINS)

$(BIN)/etcd: hack/tools/etcd/go.mod hack/tools/etcd/go.sum
	cd hack/tools/etcd && $(GO) build -trimpath -ldflags '-s -w' -o $@ go.etcd.io/etcd/server/v3

$(BIN)/kwok: hack/tools/kwok/go.mod hack/tools/kwok/go.sum
	cd hack/tools/kwok && $(GO) build -trimpath -ldflags '-s -w' -o $@ sigs.k8s.io/kwok/cmd/kwok

$(AGE_BINS) &: hack/tools/age/go.mod hack/tools/age/go.sum
	cd hack/tools/age && $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/ filippo.io/age/cmd/age filippo.io/age/cmd/age-keygen
	@touch $(AGE_BINS)

$(BIN)/cosign: hack/tools/cosign/go.mod hack/tools/cosign/go.sum
	cd hack/tools/cosign && $(GO) build -trimpath -ldflags '-s -w' -o $@ github.com/sigstore/cosign/v2/cmd/cosign

$(BIN)/sops: hack/tools/sops/go.mod hack/tools/sops/go.sum
	cd hack/tools/sops && $(GO) build -trimpath -ldflags '-s -w' -o $@ github.com/getsops/sops/v3/cmd/sops

# Not in TOOLS: only make lint needs it (a cold build takes minutes).
$(BIN)/golangci-lint: hack/tools/golangci-lint/go.mod hack/tools/golangci-lint/go.sum
	cd hack/tools/golangci-lint && $(GO) build -trimpath -ldflags '-s -w' -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# Not in TOOLS: only make vuln needs it.
$(BIN)/govulncheck: hack/tools/govulncheck/go.mod hack/tools/govulncheck/go.sum
	cd hack/tools/govulncheck && $(GO) build -trimpath -ldflags '-s -w' -o $@ golang.org/x/vuln/cmd/govulncheck

# The helm CLI of the Helm version gantry links: tests compare its
# helm template with gantry's rendering. gantry never runs it.
$(BIN)/helm: hack/tools/helm/go.mod hack/tools/helm/go.sum
	cd hack/tools/helm && $(GO) build -trimpath -ldflags '-s -w -X helm.sh/helm/v4/internal/version.version=v4.3.1' -o $@ helm.sh/helm/v4/cmd/helm

# The kustomize CLI whose api module is the one gantry links: tests
# compare its build --enable-helm (running bin/helm) with gantry's
# in-process rendering of helmCharts. gantry never runs it.
$(BIN)/kustomize: hack/tools/kustomize/go.mod hack/tools/kustomize/go.sum
	cd hack/tools/kustomize && $(GO) build -trimpath -ldflags '-s -w' -o $@ sigs.k8s.io/kustomize/kustomize/v5

$(BIN)/actionlint: hack/tools/actionlint/go.mod hack/tools/actionlint/go.sum
	cd hack/tools/actionlint && $(GO) build -trimpath -ldflags '-s -w' -o $@ github.com/rhysd/actionlint/cmd/actionlint

$(BIN)/tektoncheck: hack/tools/tektoncheck/go.mod hack/tools/tektoncheck/go.sum hack/tools/tektoncheck/main.go
	cd hack/tools/tektoncheck && $(GO) build -trimpath -ldflags '-s -w' -o $@ .

# GitLab's CI JSON Schema, as gitlab-ci-local checks files against it: the
# package from the npm registry, pinned by its lock file, run by the
# machine's Node.js.
$(BIN)/gitlab-ci-local: hack/tools/gitlab-ci-local/package.json hack/tools/gitlab-ci-local/package-lock.json
	cd hack/tools/gitlab-ci-local && npm ci --no-audit --no-fund --loglevel=error
	@mkdir -p $(BIN)
	printf '#!/bin/sh\nexec node "%s/hack/tools/gitlab-ci-local/node_modules/gitlab-ci-local/src/index.js" "$$@"\n' "$(CURDIR)" > $@ && chmod +x $@

$(BIN)/kwok-stages.yaml: hack/tools/kwok/go.mod hack/tools/kwok/go.sum hack/tools/kwok/stages/main.go
	@mkdir -p $(BIN)
	cd hack/tools/kwok && $(GO) run ./stages > $@.tmp && mv $@.tmp $@

## image: the container image as a tarball (docker load accepts it), built without a Docker engine
image: $(BIN)/busybox
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/linux-amd64/gantry .
	$(GO) run ./hack/image -binary dist/linux-amd64/gantry -busybox $(BIN)/busybox -out dist/gantry-image.tar -tag ghcr.io/gantry-dev/gantry:$(VERSION) -version $(VERSION)

# The image's shell: Debian's static busybox (GitLab's Docker executor runs
# a job's script through sh).
$(BIN)/busybox:
	hack/get-busybox.sh $@

## bench: gantry against kubectl, kapp and the floor on a local control plane (see BENCHMARKS.md)
bench: tools build bench-peers
	$(GO) run ./e2e/bench $(BENCH_FLAGS)

## bench-peers: kapp and kubectl-validate, which make bench times beside gantry and kubectl (the tests do not need them)
bench-peers: $(BIN)/kapp $(BIN)/kubectl-validate

$(BIN)/kapp: hack/tools/kapp/go.mod hack/tools/kapp/go.sum
	cd hack/tools/kapp && $(GO) build -trimpath -ldflags '-s -w' -o $@ carvel.dev/kapp/cmd/kapp

$(BIN)/kubectl-validate: hack/tools/kubectl-validate/go.mod hack/tools/kubectl-validate/go.sum
	cd hack/tools/kubectl-validate && $(GO) build -trimpath -ldflags '-s -w' -o $@ sigs.k8s.io/kubectl-validate

## test: every test, the cluster tests against the local control plane, four seeded kill points and interleavings; prints the reliability figures
test: tools
	@test -x $(BIN)/kustomize-controller || echo "make test: the hand-off to Flux's own controllers (TestFluxHandOff) is skipped; make test-flux builds them and runs it"
	@echo "make test: the container image tests (TestImage*) are skipped; make test-image runs them in a Docker engine"
	@rm -f $(FIGURES)
	GANTRY_FIGURES=$(FIGURES) $(GO) test -count=1 -timeout 40m ./...
	@hack/fuzz.sh $(FUZZ_QUICK_TIME) $(FUZZ_QUICK) >$(FIGURES).fuzz || { cat $(FIGURES).fuzz; rm -f $(FIGURES).fuzz; exit 1; }; cat $(FIGURES).fuzz >>$(FIGURES); rm -f $(FIGURES).fuzz
	@echo "reliability figures (make test, seed $${GANTRY_FAULT_SEED:-1}):"; cat $(FIGURES); rm -f $(FIGURES)

## soak: every kill point (24) and 24 interleavings of the fault suite, then each fuzz target for SOAK_FUZZTIME (default 2m); prints the figures
soak: tools
	hack/soak.sh


## test-image: the container image in a Docker engine, run as GitHub's runner runs a container action and as GitLab's Docker executor runs the template's jobs, then the GitLab template and plan run by gitlab-ci-local's Docker executor against the local cluster (needs a running dockerd; skips without one)
test-image:
	@docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || { echo "make test-image: skipped: no Docker engine answers (docker version failed; start dockerd)"; exit 0; }; \
	$(MAKE) --no-print-directory tools image && \
	GANTRY_IMAGE=$(CURDIR)/dist/gantry-image.tar $(GO) test -count=1 -timeout 30m -run 'TestImage' -v ./e2e | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|SKIP|image_test|gitlab_plan_test' ; exit $${PIPESTATUS[0]}

## test-flux: the hand-off to Flux, against Flux's own source-controller and kustomize-controller (v1.7.3) built from their modules
test-flux: tools flux-tools
	GANTRY_FLUX=1 $(GO) test -count=1 -timeout 15m -run 'TestFlux' ./e2e

## flux-tools: Flux's source-controller and kustomize-controller and their CRDs, into bin/ (only make test-flux needs them)
flux-tools: $(FLUX_BINS)

# Each controller is its own module (their pins differ); the CRDs come from
# the same module versions.
$(BIN)/source-controller: hack/tools/flux-source/go.mod hack/tools/flux-source/go.sum
	cd hack/tools/flux-source && $(GO) build -trimpath -ldflags '-s -w' -o $@ github.com/fluxcd/source-controller
	@mkdir -p $(BIN)/flux-crds
	cp "$$(cd hack/tools/flux-source && $(GO) list -m -f '{{.Dir}}' github.com/fluxcd/source-controller)/config/crd/bases/"*.yaml $(BIN)/flux-crds/
	@chmod u+w $(BIN)/flux-crds/*

$(BIN)/kustomize-controller: hack/tools/flux-kustomize/go.mod hack/tools/flux-kustomize/go.sum
	cd hack/tools/flux-kustomize && $(GO) build -trimpath -ldflags '-s -w' -o $@ github.com/fluxcd/kustomize-controller
	@mkdir -p $(BIN)/flux-crds
	cp "$$(cd hack/tools/flux-kustomize && $(GO) list -m -f '{{.Dir}}' github.com/fluxcd/kustomize-controller)/config/crd/bases/"*.yaml $(BIN)/flux-crds/
	@chmod u+w $(BIN)/flux-crds/*

## test-certmanager: the health rules against cert-manager's own controllers (v1.21.2, built from its module): gantry waits for a Certificate until it is issued
test-certmanager: tools cert-manager-tools
	GANTRY_CERTMANAGER=1 $(GO) test -count=1 -timeout 15m -run 'TestCertManager' ./e2e

## cert-manager-tools: cert-manager's controllers for self-signed and CA issuance and its CRDs, into bin/ (only make test-certmanager needs them)
cert-manager-tools: $(BIN)/cert-manager-controller $(BIN)/cert-manager-crds

# cert-manager's own controller binary is a module the Go module proxy does
# not serve: hack/tools/cert-manager/main.go runs the controllers from the
# packages of the cert-manager module. The CRDs come from the same version.
$(BIN)/cert-manager-controller: hack/tools/cert-manager/go.mod hack/tools/cert-manager/go.sum hack/tools/cert-manager/main.go
	cd hack/tools/cert-manager && $(GO) build -trimpath -ldflags '-s -w' -o $@ .

$(BIN)/cert-manager-crds: hack/tools/cert-manager/go.mod hack/tools/cert-manager/go.sum
	@rm -rf $@ && mkdir -p $@
	cp "$$(cd hack/tools/cert-manager && $(GO) list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds/"*.yaml $@/
	@chmod u+w $@/*

## tekton-tools: Tekton Pipelines' controller (v1.9.0, built from its module), the commands its TaskRun pods run (entrypoint, nop, workingdirinit, sidecarlogresults), its CRDs and ConfigMaps, into bin/tekton/ (only make test-node needs them)
tekton-tools: $(BIN)/tekton/controller $(BIN)/tekton/config

# hack/tools/tekton/main.go is the module's cmd/controller without
# knative's second probe server on the fixed port 8080. The commands are
# static (CGO_ENABLED=0): the tests put them into images on Debian's
# busybox, as ko puts them at /ko-app/<command>. The CRDs and the
# ConfigMaps of the tekton-pipelines namespace come from the same module
# version.
TEKTON_CMDS := entrypoint nop sidecarlogresults workingdirinit
$(BIN)/tekton/controller: hack/tools/tekton/go.mod hack/tools/tekton/go.sum hack/tools/tekton/main.go
	@mkdir -p $(BIN)/tekton
	cd hack/tools/tekton && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/tekton/ $(addprefix github.com/tektoncd/pipeline/cmd/,$(TEKTON_CMDS))
	cd hack/tools/tekton && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ .
	@touch $(addprefix $(BIN)/tekton/,$(TEKTON_CMDS))

$(BIN)/tekton/config: hack/tools/tekton/go.mod hack/tools/tekton/go.sum
	@rm -rf $@ && mkdir -p $@
	d="$$(cd hack/tools/tekton && $(GO) list -m -f '{{.Dir}}' github.com/tektoncd/pipeline)/config" && cp "$$d"/300-crds/*.yaml "$$d"/config-*.yaml $@/
	@chmod u+w $@/*

## test-node: the health wait on pods a real kubelet runs (v1.36.3, with Debian's containerd, runc and CNI plugins, installed when missing), after a check that the node starts clean twice, and the Tekton plan run by Tekton's controller on it
# One package at a time (each starts a real node), each built on every
# core: go test -p 1 would build them on one.
test-node: cluster-tools node-tools tekton-tools image
	@hack/install-registry.sh
	GANTRY_NODE=1 $(GO) test -count=1 -parallel 8 -timeout 20m -run 'TestNode' ./e2e/cluster
	GANTRY_NODE=1 $(GO) test -count=1 -parallel 8 -timeout 20m -run 'TestNode' ./e2e

## node-tools: the kubelet, the sandbox and test programs, and Debian's containerd, runc and CNI plugins (apt-get, when missing): what make test-node and make cluster NODE=real need
node-tools: $(BIN)/kubelet $(BIN)/gantry-pause $(BIN)/gantry-memhog $(BIN)/busybox
	@hack/install-node.sh

# Not in TOOLS: only the real node needs it (a cold build takes minutes).
$(BIN)/kubelet: hack/tools/kube/go.mod hack/tools/kube/go.sum
	cd hack/tools/kube && $(GO) build -trimpath -ldflags '-s -w -X k8s.io/component-base/version.gitVersion=v1.36.3' -o $@ k8s.io/kubernetes/cmd/kubelet

# The real node's sandbox (pause) program and a container that is
# OOM-killed, built statically into its own images at test time.
$(BIN)/gantry-pause $(BIN)/gantry-memhog: $(BIN)/gantry-%: hack/nodeimages/%/main.go
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./hack/nodeimages/$*

## fuzz: each fuzz target for FUZZTIME (default 30s); make test runs their seeds, and fuzzes the sinks whose packages build for fuzzing in seconds
FUZZTIME ?= 30s
# The sinks' targets whose packages build for fuzzing in seconds: make test
# fuzzes them for FUZZ_QUICK_TIME each. The others (whose packages link
# client-go, sops and kustomize, minutes of instrumented build on two
# cores) run their seeds in make test and fuzz here and in make soak.
FUZZ_QUICK := reporters:FuzzOutputsCannotInject reporters:FuzzDotenvValue reporters:FuzzStickyContentKey reporters:FuzzMarkdownIsText safefile:FuzzSafeWrite logguard:FuzzLogWriter diffs:FuzzSecretValuesNeverInDiffs plan:FuzzPlanIsData sources/reader:FuzzReaderStaysInside
FUZZ_QUICK_TIME ?= 3s
FUZZ_TARGETS := $(FUZZ_QUICK) sources:FuzzManifestDecoding entrypoint:FuzzLoad entrypoint:FuzzPlanFromRunFile inventory:FuzzEntryID
fuzz:
	hack/fuzz.sh $(FUZZTIME) $(FUZZ_TARGETS)

## test-race: every test under the race detector (gantry runs requests concurrently)
test-race: tools
	$(GO) test -race -count=1 -timeout 60m ./...

## test-short: unit tests only, no cluster
test-short:
	$(GO) test -short ./...

## cluster: a local control plane until Ctrl-C (NODE=real adds a node run by a real kubelet); prints the KUBECONFIG to use
cluster: cluster-tools $(if $(filter real,$(NODE)),node-tools)
	$(GO) run ./e2e/cmd/cluster up $(if $(filter real,$(NODE)),-node real) $(CLUSTER_FLAGS)

## demo: the whole pipeline on examples/ against a local control plane
demo: cluster-tools build
	hack/demo.sh

## release-prep: point action.yml at the image of release VERSION (vX.Y.Z), before tagging it
release-prep:
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$$ ]] || { echo "VERSION=vX.Y.Z, not $(VERSION)"; exit 2; }
	sed -i -E 's#^  image: docker://ghcr.io/gantry-dev/gantry:.*#  image: docker://ghcr.io/gantry-dev/gantry:$(VERSION)#' action.yml
	@grep -n '^  image:' action.yml

## schemas: the OpenAPI documents of the Kubernetes releases offline validation embeds (schemas/releases), from the k8s.io/kubernetes module of each
KUBE_SCHEMA_RELEASES := v1.37.2 v1.36.3 v1.35.4 v1.34.4 v1.33.13
schemas:
	rm -f schemas/releases/v*.zip
	$(GO) run ./hack/kubeschemas -out schemas/releases $(KUBE_SCHEMA_RELEASES)

## compare-offline: the offline corpus through gantry validate --offline, kubectl-validate and kubeconform (docs/comparison.md)
compare-offline: build
	hack/compare-offline.sh

## docs: action.yml's inputs and the README's input table, from the entrypoint's table
docs:
	$(GO) run ./hack/gendocs

## lint: vet, golangci-lint (v2.15.0, .golangci.yml), formatting, and actionlint on the workflows
lint: $(BIN)/actionlint $(BIN)/golangci-lint
	$(GO) vet ./...
	$(BIN)/golangci-lint run ./...
	$(BIN)/actionlint .github/workflows/*.yaml
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## vuln: govulncheck (v1.9.0, pinned in hack/tools) on gantry and every dependency it calls; reads vuln.go.dev
vuln: $(BIN)/govulncheck
	$(BIN)/govulncheck ./...

clean:
	rm -rf $(BIN) dist

help:
	@grep -E '^## ' Makefile | sed 's/^## /  /'
