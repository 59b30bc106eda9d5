package config

import (
	"fmt"
	"strings"
	"testing"
)

// unitsFile is a run file of n units, each with its own inventory, all
// building the folder x.
func unitsFile(n int) string {
	var b strings.Builder
	b.WriteString("units:\n")
	for i := range n {
		fmt.Fprintf(&b, "- {name: u%05d, path: x, inventory: u%05d}\n", i, i)
	}
	return b.String()
}

// A run file lists at most MaxUnits units: one more, or as many as
// MaxRunFileBytes holds, is refused whole as soon as it is parsed, naming
// the file, the count and the bound, before any unit is read; a file
// over MaxRunFileBytes (a hundred thousand units) is refused before it
// is parsed; MaxUnits load. (How long each takes is measured, not
// asserted: see docs/reliability.md.)
func TestRunFileUnitBound(t *testing.T) {
	t.Parallel()
	big := writeRunFile(t, unitsFile(100_000), "x")
	units, err := LoadUnits(given(big, nil, nil), big, true)
	want := fmt.Sprintf("run-file: %s is over the limit of %d bytes", big, MaxRunFileBytes)
	if err == nil || err.Error() != want || units != nil {
		t.Errorf("100,000 units: %d loaded, error %.300v, want %q", len(units), err, want)
	}
	dense := MaxRunFileBytes / len("- {name: u00000, path: x, inventory: u00000}\n")
	for _, n := range []int{MaxUnits + 1, dense - 1} {
		file := writeRunFile(t, unitsFile(n), "x")
		units, err = LoadUnits(given(file, nil, nil), file, true)
		want = fmt.Sprintf("%s:2: units: %d units, over the limit of %d a run file may list", file, n, MaxUnits)
		if err == nil || err.Error() != want || units != nil {
			t.Errorf("%d units: %d loaded, error %.300v, want %q", n, len(units), err, want)
		}
	}
	file := writeRunFile(t, unitsFile(MaxUnits), "x")
	units, err = LoadUnits(given(file, nil, nil), file, true)
	if err != nil || len(units) != MaxUnits {
		t.Errorf("%d units: %d loaded, error %.300v", MaxUnits, len(units), err)
	}
}

// {env: NAME} names a variable: anything else is refused where the run
// file is read, naming the file and line, the unit and the input, the
// name quoted if it would not print as itself, whatever run-file-env
// allows. path.Match's * matches a
// line ending: before, APP_* let the first reach a plan's comment.
func TestEnvReferenceIsAName(t *testing.T) {
	t.Parallel()
	for _, ref := range []string{
		"APP_X\nenv:\n  ACTIONS_ALLOW_UNSECURE_COMMANDS: true\n  ALL: ${{ toJSON(secrets) }}\n#",
		"APP_X\r", "APP_X ", "APP_X\u2028", "APP-X", "APP_X.Y", "APP_", "1APP", "",
	} {
		t.Run(fmt.Sprintf("%q", ref), func(t *testing.T) {
			t.Parallel()
			content := fmt.Sprintf("units:\n- name: web\n  path: x\n  inventory: web\n  sops-age-key: {env: %q}\n", ref)
			file := writeRunFile(t, content, "x")
			_, err := LoadUnits(given(file, nil, map[string]string{"GANTRY_RUN_FILE_ENV": "APP_*\n*\n1*\n?*"}), file, true)
			want := fmt.Sprintf("%s:5: unit web: sops-age-key: {env: %s}: not a variable's name", file, shownName(ref))
			if ref == "APP_" { // a name: APP_* allows it
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want %q", err, want)
			}
		})
	}
}

// The allow-list's patterns match names only: * and ? match no line
// ending, no space, nothing a name cannot hold.
func TestAllowListMatchesNamesOnly(t *testing.T) {
	t.Parallel()
	p := &policy{env: []string{"APP_*", "*", "?", "[!A]*"}}
	for _, name := range []string{"APP_X\nenv:", "APP_X\r", "A B", "\n", "", "1A", "A-B"} {
		if err := p.mayRead(name); err == nil {
			t.Errorf("%q: allowed", name)
		}
		for _, pat := range p.env {
			if matchesName(pat, name) {
				t.Errorf("%q matches %q", pat, name)
			}
		}
	}
	if err := p.mayRead("APP_X"); err != nil {
		t.Errorf("APP_X: %v", err)
	}
	if err := p.mayRead("GITHUB_TOKEN"); err == nil {
		t.Errorf("GITHUB_TOKEN: allowed")
	}
}
