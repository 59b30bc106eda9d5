package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// writeRunFile writes a run file and the folders its units name, and
// returns the run file's path.
func writeRunFile(t *testing.T, content string, dirs ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(root, "gantry.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// given is what a workflow gives a run of file: the command, flags and
// env, with the workspace the folder that holds the test's folders.
func given(file string, flags, env map[string]string) Given {
	e := map[string]string{"GANTRY_WORKSPACE": filepath.Dir(filepath.Dir(file)), "GANTRY_RUN_FILE_SERVERS": "https://a.example:6443\nhttps://b.example:6443"}
	for k, v := range env {
		e[k] = v
	}
	if flags == nil {
		flags = map[string]string{}
	}
	return Given{Command: "apply", CommandOrigin: "the command line", Flags: flags, Env: e}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// kubeconfigFor writes a kubeconfig with one context per server, named
// as the map's keys.
func kubeconfigFor(t *testing.T, servers map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for name, server := range servers {
		b.WriteString("- name: " + name + "\n  cluster:\n    server: " + server + "\n")
	}
	b.WriteString("users:\n- name: u\n  user:\n    token: not-a-real-token\ncontexts:\n")
	for name := range servers {
		b.WriteString("- name: " + name + "\n  context:\n    cluster: " + name + "\n    user: u\n")
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A run file's units take the defaults, then their own inputs; paths are
// relative to the run file; the command line and the variables apply to
// every unit over both, except a variable that holds only the default
// (action.yml and the CI templates set every input).
func TestRunFileLayersDefaultsUnitsAndCommandLine(t *testing.T) {
	t.Parallel()
	kc := kubeconfigFor(t, map[string]string{"a": "https://a.example:6443", "b": "https://b.example:6443"})
	file := writeRunFile(t, `
defaults:
  inventory-namespace: platform
  timeout: 4m
  kubeconfig: `+kc+`
  context: a
units:
  - name: crds
    path: infra/crds
    inventory: crds
    wait: true
  - name: web
    depends-on: [crds]
    path: apps/web
    inventory: web
    context: b
    prune: false
    health-checks:
      - Deployment/shop/web
    substitute:
      IMAGE_TAG: "1.4.2"
      DB_PASSWORD: {env: DB_PASSWORD}
  - name: later
    suspend: true
    depends-on: web
    path: apps/later
    inventory: later
`, "infra/crds", "apps/web", "apps/later")
	env := map[string]string{
		"DB_PASSWORD":         "canary-password",
		"INPUT_PATH":          ".",    // action.yml's default: not an override
		"INPUT_PRUNE":         "true", // likewise
		"GANTRY_TIMEOUT":      "9m",   // given: applies to every unit
		"GANTRY_RUN_FILE_ENV": "DB_*",
	}
	units, err := LoadUnits(given(file, map[string]string{"concurrency": "8"}, env), file, false)
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Name, Path, Inventory, InventoryNamespace, Context string
		DependsOn                                          []string
		Suspend, Prune                                     bool
		Timeout                                            time.Duration
		Concurrency                                        int
		Substitute                                         map[string]string
		Checks                                             int
	}
	var got []view
	for _, u := range units {
		c := u.Config
		got = append(got, view{u.Name, c.Path, c.Inventory, c.InventoryNamespace, c.Context, u.DependsOn, u.Suspend, c.Prune, c.Timeout, c.Concurrency, c.Substitute, len(c.HealthChecks)})
	}
	dir := filepath.Dir(file)
	want := []view{
		{"crds", filepath.Join(dir, "infra/crds"), "crds", "platform", "a", nil, false, true, 9 * time.Minute, 8, nil, 0},
		{"web", filepath.Join(dir, "apps/web"), "web", "platform", "b", []string{"crds"}, false, false, 9 * time.Minute, 8,
			map[string]string{"IMAGE_TAG": "1.4.2", "DB_PASSWORD": "canary-password"}, 1},
		{"later", filepath.Join(dir, "apps/later"), "later", "platform", "a", []string{"web"}, true, true, 9 * time.Minute, 8, nil, 0},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("units (-want +got)\n%s", d)
	}
	// A secret read from a reference is masked like any secret.
	if !strings.Contains(strings.Join(units[1].Config.Secrets, "\n"), "canary-password") {
		t.Errorf("the referenced secret is not among the values to mask")
	}
}

// Bad run files are refused before anything runs, every problem at once,
// each naming the file and line, and never echoing a secret.
func TestRunFileRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"unknown input", "units:\n- name: a\n  path: x\n  pathh: y\n", []string{"gantry.yaml:4", `unknown input "pathh"; did you mean path?`}},
		{"misspelt default", "defaults:\n  timout: 5m\nunits:\n- name: a\n  path: x\n", []string{"gantry.yaml:2", `unknown input "timout"; did you mean timeout?`}},
		{"unknown top-level key", "unit:\n- name: a\n", []string{"gantry.yaml:1", `unknown key "unit"`, "no units"}},
		{"no name", "units:\n- path: x\n", []string{"gantry.yaml:2", "without a name"}},
		{"bad name", "units:\n- name: Web_1\n  path: x\n", []string{"gantry.yaml:2", `unit name "Web_1"`}},
		{"run-level input in a unit", "units:\n- name: a\n  path: x\n  github-token: {env: T}\n", []string{"gantry.yaml:4", "github-token is a setting of the whole run"}},
		{"literal secret", "units:\n- name: a\n  path: x\n  sops-age-key: AGE-SECRET-KEY-1CANARYCANARY\n", []string{"gantry.yaml:4", "sops-age-key is a secret", "{env: VARIABLE}"}},
		{"literal secret-named substitution", "defaults:\n  substitute:\n    API_TOKEN: canary-token\nunits:\n- name: a\n  path: x\n", []string{"gantry.yaml:3", "API_TOKEN looks secret"}},
		{"unset variable", "units:\n- name: a\n  path: x\n  registry-password: {env: NOT_SET_ANYWHERE}\n", []string{"gantry.yaml:4", "NOT_SET_ANYWHERE is not set"}},
		{"not a boolean", "units:\n- name: a\n  path: x\n  prune: maybe\n", []string{"gantry.yaml:4", `"maybe" is not true or false`}},
		{"name in defaults", "defaults:\n  depends-on: [a]\nunits:\n- name: a\n  path: x\n", []string{"gantry.yaml:2", "depends-on is a unit's own"}},
		{"not yaml", "units: [\n", []string{"gantry.yaml:1", "did not find expected node content"}},
		{"indentation", "units:\n  - name: a\n    path: x\n   inventory: a\n", []string{"gantry.yaml:4: did not find expected '-' indicator"}},
		{"flow mapping over lines, then a bad line", "units:\n  - {name: a,\n     path: x}\n  - name: b\n    path: x\n   inventory: y\n", []string{"gantry.yaml:6:"}},
		// A YAML bomb, refused by the bounded parser before any unit is
		// read.
		{"alias bomb", "units:\n- name: a\n  path: x\nx:\n" + runFileBomb, []string{"run-file ", "gantry.yaml: its YAML aliases expand out of proportion"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := writeRunFile(t, tc.file, "x")
			_, err := LoadUnits(given(file, nil, map[string]string{"GANTRY_RUN_FILE_ENV": "NOT_SET_ANYWHERE"}), file, false)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "CANARY") || strings.Contains(err.Error(), "canary") {
				t.Errorf("the error echoes a secret:\n%v", err)
			}
		})
	}
}

// runFileBomb is nine levels of nine aliases: 9^9 strings once expanded.
const runFileBomb = `  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

// The graph is checked before anything is built or sent: unknown names,
// cycles named as a chain, a unit with no source, two units on one
// inventory of one cluster (the same server under two contexts too), and
// each unit's own configuration, named by unit.
func TestRunFileGraphRefusals(t *testing.T) {
	t.Parallel()
	kc := kubeconfigFor(t, map[string]string{"a": "https://a.example:6443", "a-again": "https://a.example:6443", "b": "https://b.example:6443"})
	for _, tc := range []struct {
		name, units string
		want        []string
	}{
		{"unknown dependency", "- {name: a, path: x, inventory: a, depends-on: [nope]}\n", []string{"unit a (", "gantry.yaml:5) depends on nope, which is not a unit"}},
		{"cycle", "- {name: a, path: x, inventory: a, depends-on: [c]}\n- {name: b, path: x, inventory: b, depends-on: [a]}\n- {name: c, path: x, inventory: c, depends-on: [b]}\n",
			[]string{"cycle: a -> c -> b -> a (", "gantry.yaml:5)"}},
		{"self", "- {name: a, path: x, inventory: a, depends-on: [a]}\n", []string{"cycle: a -> a"}},
		{"named twice", "- {name: a, path: x, inventory: a}\n- {name: a, path: x, inventory: b}\n", []string{"unit a (", "gantry.yaml:6) is named twice"}},
		{"no source", "- {name: a, inventory: a}\n", []string{"unit a (", "no source"}},
		{"one inventory on one cluster", "- {name: a, path: x, inventory: shop, context: a}\n- {name: b, path: x, inventory: shop, context: a-again}\n",
			[]string{"units a and b (", "gantry.yaml:6) use one inventory, default/shop, on one cluster"}},
		{"a unit's own input", "- {name: a, path: x, inventory: a, timeout: soon}\n", []string{"unit a (", `timeout (from `, `"soon" is not a positive duration`}},
		{"a missing path", "- {name: a, path: missing, inventory: a}\n", []string{"gantry.yaml:5", "unit a: path: missing does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := writeRunFile(t, "defaults:\n  kubeconfig: kubeconfig\n  context: a\nunits:\n"+tc.units, "x")
			copyFile(t, kc, filepath.Join(filepath.Dir(file), "kubeconfig"))
			_, err := LoadUnits(given(file, nil, map[string]string{"GANTRY_RUN_FILE_ENV": "NOT_SET_ANYWHERE"}), file, false)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}

	// One inventory name on two clusters is two inventories.
	file := writeRunFile(t, "defaults:\n  kubeconfig: kubeconfig\nunits:\n- {name: a, path: x, inventory: shop, context: a}\n- {name: b, path: x, inventory: shop, context: b}\n", "x")
	copyFile(t, kc, filepath.Join(filepath.Dir(file), "kubeconfig"))
	if _, err := LoadUnits(given(file, nil, map[string]string{"GANTRY_RUN_FILE_ENV": "NOT_SET_ANYWHERE"}), file, false); err != nil {
		t.Errorf("one inventory name on two clusters: %v", err)
	}
}

// A run file with many problems names them all in one round, each with
// its line: a misspelt input, a bad value, a missing path, an unknown
// dependency, a cycle and two units on one inventory.
func TestRunFileNamesEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	kc := kubeconfigFor(t, map[string]string{"a": "https://a.example:6443"})
	file := writeRunFile(t, `defaults:
  kubeconfig: kubeconfig
  context: a
units:
  - {name: a, path: x, inventory: a, timout: 5m}
  - {name: b, path: missing, inventory: b}
  - {name: c, path: x, inventory: c, timeout: soon}
  - {name: d, path: x, inventory: d, depends-on: [nope]}
  - {name: e, path: x, inventory: shared, depends-on: [f]}
  - {name: f, path: x, inventory: shared, depends-on: [e]}
`, "x")
	copyFile(t, kc, filepath.Join(filepath.Dir(file), "kubeconfig"))
	_, err := LoadUnits(given(file, nil, nil), file, false)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{
		`gantry.yaml:5: unit a: unknown input "timout"; did you mean timeout?`,
		"gantry.yaml:6", "missing does not exist",
		"gantry.yaml:7", `"soon" is not a positive duration`,
		"unit d (", "gantry.yaml:8) depends on nope",
		"units e and f (", "gantry.yaml:10) use one inventory",
		"cycle: e -> f -> e (",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q:\n%v", w, err)
		}
	}
}

// A large run file with a YAML error is answered at once: the line at
// fault is looked for only in a file small enough to read in prefixes, and
// a larger one keeps the parser's own line.
func TestProblemLineOfALargeFileKeepsTheParsersLine(t *testing.T) {
	t.Parallel()
	data := []byte("units:\n" + strings.Repeat("  - {name: a, path: x}\n", 10000) + "   bad: [\n")
	err := yaml.Unmarshal(data, new(yaml.Node))
	if err == nil {
		t.Fatal("parsed")
	}
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("no line in %v", err)
	}
	if got := problemLine(data, err); strconv.Itoa(got) != m[1] {
		t.Errorf("line %d, want the parser's %s", got, m[1])
	}
}
