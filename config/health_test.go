package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run file's health-rules never names a file the run holds credentials
// in (a kubeconfig, the SOPS age key) as its rules: such a file is
// refused unread, as the build refuses it for values and patches.
func TestHealthRulesNeverReadCredentialFiles(t *testing.T) {
	t.Parallel()
	file := writeRunFile(t, "", "x")
	root := filepath.Dir(file)
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://a.example:6443\"}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {token: workflow-token-canary}}]\n"
	if err := os.WriteFile(filepath.Join(root, "kubeconfig"), []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "age.key"), []byte("# public key: age1xyz\n- AGE-SECRET-KEY-1CANARY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KUBECONFIG": filepath.Join(root, "kubeconfig"), "SOPS_AGE_KEY_FILE": filepath.Join(root, "age.key")}
	for _, target := range []string{"kubeconfig", "age.key"} {
		if err := os.WriteFile(file, []byte("units:\n- name: web\n  path: x\n  inventory: web\n  health-rules: "+target+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g := given(file, nil, env)
		g.Command = "diff"
		_, err := LoadUnits(g, file, false)
		if err == nil || !strings.Contains(err.Error(), "is a file the run holds credentials in") || strings.Contains(err.Error(), "CANARY") || strings.Contains(err.Error(), "canary") {
			t.Errorf("health-rules: %s: %v; want it refused unread", target, err)
		}
	}
}

// Rules a run file's defaults share are compiled once for all its units,
// and a rules file past the bound is refused before any is parsed: a
// thousand units sharing the largest rules file are read in seconds.
func TestHealthRulesCostIsBounded(t *testing.T) {
	t.Parallel()
	var units strings.Builder
	for i := range MaxUnits {
		fmt.Fprintf(&units, "- {name: u%d, path: x, inventory: u%d}\n", i, i)
	}
	file := writeRunFile(t, "defaults:\n  health-rules: rules.yaml\nunits:\n"+units.String(), "x")
	expr := "[" + strings.Repeat("1,", 2040) + "1] == []"
	var rules strings.Builder
	for i := 0; rules.Len() < 60<<10; i++ {
		fmt.Fprintf(&rules, "- apiVersion: example.com/v1\n  kind: K%d\n  current: %q\n", i, expr)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "rules.yaml"), []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	g := given(file, nil, nil)
	g.Command = "diff"
	start := time.Now()
	_, err := LoadUnits(g, file, true)
	t.Logf("%d units sharing %d bytes of rules read in %s: %v", MaxUnits, rules.Len(), time.Since(start), err)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("%d units sharing %d bytes of rules took %s to read", MaxUnits, rules.Len(), took)
	}
	// Past the bound: refused, naming the file.
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "rules.yaml"), []byte(strings.Repeat(rules.String(), 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadUnits(g, file, true); err == nil || !strings.Contains(err.Error(), "rules.yaml") {
		t.Errorf("a rules file past the bound: %v", err)
	}
}
