package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

// docs/reference.md is what make docs writes.
func TestReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != Reference() {
		t.Error("docs/reference.md is stale: run make docs")
	}
}

// docs/cli.md is what make docs writes.
func TestHealthDocIsCurrent(t *testing.T) {
	b, err := os.ReadFile("../../docs/health.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), BuiltInRules()) {
		t.Error("docs/health.md does not list the built-in rules as health/builtin.go has them: run go run ./hack/gendocs")
	}
}

func TestCLIIsCurrent(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := CLI()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Error("docs/cli.md is stale: run make docs")
	}
}

// schemas/run-file.json is what make docs writes, and it holds a run file
// of the shape a platform team writes, and refuses what gantry refuses:
// an unknown input, a unit with no name, a secret written in the file.
func TestRunFileSchema(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../../schemas/run-file.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != RunFileSchema() {
		t.Error("schemas/run-file.json is stale: run make docs")
	}
	var schema spec.Schema
	if err := json.Unmarshal(got, &schema); err != nil {
		t.Fatal(err)
	}
	validator := validate.NewSchemaValidator(&schema, nil, "", strfmt.Default)
	for _, tc := range []struct {
		name, file string
		valid      bool
	}{
		{"a platform team's run file", `
defaults:
  inventory-namespace: platform
  timeout: 5m
  concurrency: 8
units:
  - name: crds
    path: infra/crds
    inventory: crds
    prune: false
  - name: web
    depends-on: [crds]
    path: apps/web
    inventory: web
    context: prod-eu
    health-checks: [Deployment/shop/web]
    sops-age-key: {env: SOPS_AGE_KEY}
    substitute:
      IMAGE_TAG: "1.4.2"
      REPLICAS: 3
      DB_PASSWORD: {file: secrets/db}
`, true},
		{"an unknown input", "units:\n- {name: a, pathh: x}\n", false},
		{"a unit with no name", "units:\n- {path: x}\n", false},
		{"a secret written in the file", "units:\n- {name: a, sops-age-key: AGE-SECRET-KEY-1X}\n", false},
		{"a run-level input in a unit", "units:\n- {name: a, github-token: {env: T}}\n", false},
		{"no units", "defaults: {timeout: 5m}\n", false},
	} {
		var doc any
		if err := yaml.Unmarshal([]byte(tc.file), &doc); err != nil {
			t.Fatal(err)
		}
		res := validator.Validate(doc)
		if res.IsValid() != tc.valid {
			t.Errorf("%s: valid %v, want %v: %v", tc.name, res.IsValid(), tc.valid, res.Errors)
		}
	}
}
