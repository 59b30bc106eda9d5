package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run file's chart and values lie in the workspace: a path that climbs
// out of it, or a link that leads out of it, is refused.
func TestAttackRunFileChartPathsConfined(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "Chart.yaml"), []byte("apiVersion: v2\nname: o\nversion: 0.1.0\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "values.yaml"), []byte("a: 1\n"), 0o644)
	for name, unit := range map[string]string{
		"chart up":        "chart: ../../../../../../.." + outside,
		"chart absolute":  "chart: " + outside,
		"chart link":      "chart: linked",
		"values up":       "chart: c\n  values: [../../../../../../.." + filepath.Join(outside, "values.yaml") + "]",
		"values absolute": "chart: c\n  values: [" + filepath.Join(outside, "values.yaml") + "]",
		"values link":     "chart: c\n  values: [lv.yaml]",
		"values in .git":  "chart: c\n  values: [.git/config]",
		"chart is .git":   "chart: .git",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := writeRunFile(t, "units:\n- name: a\n  "+unit+"\n", "c", ".git")
			root := filepath.Dir(file)
			os.WriteFile(filepath.Join(root, "c", "Chart.yaml"), []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), 0o644)
			os.WriteFile(filepath.Join(root, ".git", "config"), []byte("[core]\n"), 0o644)
			os.WriteFile(filepath.Join(root, ".git", "Chart.yaml"), []byte("apiVersion: v2\nname: g\nversion: 0.1.0\n"), 0o644)
			os.Symlink(outside, filepath.Join(root, "linked"))
			os.Symlink(filepath.Join(outside, "values.yaml"), filepath.Join(root, "lv.yaml"))
			_, err := LoadUnits(given(file, nil, nil), file, false)
			t.Logf("%v", err)
			if err == nil {
				t.Errorf("%s: accepted", unit)
			}
		})
	}
}

// A secret-named set value written in a run file is refused, as a
// literal secret is, and is never echoed.
func TestAttackRunFileSecretSetLiteral(t *testing.T) {
	t.Parallel()
	file := writeRunFile(t, "units:\n- name: a\n  chart: c\n  set: [\"db.PASSWORD=canary-set-value\"]\n", "c")
	os.WriteFile(filepath.Join(filepath.Dir(file), "c", "Chart.yaml"), []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), 0o644)
	_, err := LoadUnits(given(file, nil, nil), file, false)
	t.Logf("%v", err)
	if err != nil && strings.Contains(err.Error(), "canary-set-value") {
		t.Errorf("the error echoes the value: %v", err)
	}
}
