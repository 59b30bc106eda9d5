package entrypoint

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/result"
)

// golden compares got with testdata/name, which -update rewrites.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept):\n%s", path, got)
	}
}

// The help of gantry and of every command, as --help prints it, exit 0.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	for _, name := range append([]string{""}, commands...) {
		args := []string{"--help"}
		file := "help/gantry.txt"
		if name != "" {
			args = []string{name, "--help"}
			file = "help/" + name + ".txt"
		}
		var stdout, stderr strings.Builder
		if code := Run(t.Context(), args, nil, &stdout, &stderr); code != ExitOK {
			t.Errorf("gantry %s: exit %d, want 0; stderr:\n%s", strings.Join(args, " "), code, stderr.String())
		}
		if stderr.Len() > 0 {
			t.Errorf("gantry %s wrote to stderr:\n%s", strings.Join(args, " "), stderr.String())
		}
		golden(t, file, stdout.String())
	}
}

// Help reached in every usual way: -h, help <command>, and gantry alone.
func TestHelpEveryWay(t *testing.T) {
	t.Parallel()
	want, err := Help("diff")
	if err != nil {
		t.Fatal(err)
	}
	root, err := Help("")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"diff", "-h"}, nil, want},
		{[]string{"help", "diff"}, nil, want},
		{nil, nil, root},
		{[]string{"help"}, nil, root},
		// In a job whose command comes from a variable, --help is that
		// command's help.
		{[]string{"--help"}, map[string]string{"GANTRY_COMMAND": "diff"}, want},
	} {
		var stdout strings.Builder
		code := Run(t.Context(), tc.args, envList(tc.env), &stdout, io.Discard)
		if code != ExitOK || stdout.String() != tc.want {
			t.Errorf("gantry %v: exit %d, stdout:\n%s", tc.args, code, stdout.String())
		}
	}
	// The help of each command lists only the flags it reads.
	if strings.Contains(want, "--health-checks") || !strings.Contains(want, "--detailed-exitcode") {
		t.Errorf("diff's help lists the wrong flags:\n%s", want)
	}
}

func envList(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout strings.Builder
		if code := Run(t.Context(), args, nil, &stdout, io.Discard); code != ExitOK || stdout.String() != "gantry "+Version+"\n" {
			t.Errorf("gantry %v: exit %d, %q", args, code, stdout.String())
		}
	}
}

// Every spelling of a bool flag, and a value as the next argument for the
// others.
func TestFlagSpellings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args         []string
		prune, force bool
	}{
		{[]string{"--prune", "false", "--force", "true"}, false, true},
		{[]string{"--prune=false", "--force=true"}, false, true},
		{[]string{"--prune", "FALSE", "--force"}, false, true},
		{[]string{"--force", "--prune"}, true, true},
		{[]string{"-prune=false", "-force"}, false, true},
		{nil, true, false},
	} {
		args := append([]string{"apply", "--inventory", "shop", "--timeout", "1m"}, tc.args...)
		c, err := Load(append(args, dir), nil, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if c.Prune != tc.prune || c.Force != tc.force || c.Inventory != "shop" || c.Path != dir || c.Timeout.Minutes() != 1 {
			t.Errorf("%v: prune=%v force=%v inventory=%q path=%q timeout=%v", tc.args, c.Prune, c.Force, c.Inventory, c.Path, c.Timeout)
		}
	}
	// A repeated flag of a multi-line input gives one line each.
	c, err := Load([]string{"build", dir, "--patches", "a.yaml", "--patches=b.yaml"}, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "patch file a.yaml does not exist") || !strings.Contains(err.Error(), "patch file b.yaml does not exist") {
		t.Errorf("repeated --patches: %v %v", c, err)
	}
}

// A bad command line exits 2 and says what is wrong, and how to do it right.
func TestCommandLineErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"build", dir, "--inventory", "shop"}, nil, "--inventory is not a flag of build; it is for diff, apply, delete, release, inventory"},
		{[]string{"apply", "--inventroy", "shop"}, nil, "unknown flag --inventroy; did you mean --inventory? (see gantry apply --help)"},
		{[]string{"apply", "--command", "diff"}, nil, "--command is not a flag: the command is the first argument"},
		{[]string{"apply", dir, "--dry-run"}, nil, "gantry has no --dry-run: gantry diff shows what apply would change"},
		{[]string{"apply", dir, "--dry-run=server"}, nil, "gantry has no --dry-run: gantry diff shows what apply would change"},
		{[]string{"deploy"}, nil, `command (from the command line): "deploy" is not one of build, diff, validate, apply, rollback, history, drift, delete, release, inventory, push, pull, tag, list, inspect, diff-artifact, plan, version`},
		{nil, map[string]string{"GANTRY_COMMAND": "deploy"}, `command (from GANTRY_COMMAND): "deploy" is not one of`},
		{[]string{"aply", dir}, nil, `command (from the command line): unknown command "aply"; did you mean apply? (see gantry --help)`},
		{nil, map[string]string{"GANTRY_COMMAND": "histroy"}, `command (from GANTRY_COMMAND): unknown command "histroy"; did you mean history?`},
		{[]string{"--path", dir}, nil, "a command comes first"},
		{[]string{"build", dir, "--path", dir}, nil, "path given twice"},
		{[]string{"build", dir, "other"}, nil, "build takes one path, got 2 arguments"},
		{[]string{"delete", "shop"}, nil, `unexpected argument "shop": delete takes its settings as flags`},
		{[]string{"apply", "--inventory"}, nil, "flag needs an argument: --inventory"},
	} {
		var stderr strings.Builder
		code := Run(t.Context(), tc.args, envList(tc.env), io.Discard, &stderr)
		if code != ExitInvalid || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("gantry %v: exit %d, stderr:\n%s\nwant %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// The completion scripts, and the values the flags complete to.
func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "__start_gantry", "zsh": "#compdef gantry", "fish": "complete -c gantry", "powershell": "Register-ArgumentCompleter"} {
		var stdout strings.Builder
		if code := Run(t.Context(), []string{"completion", shell}, nil, &stdout, io.Discard); code != ExitOK || !strings.Contains(stdout.String(), want) {
			t.Errorf("completion %s: exit %d, no %q", shell, code, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "diff", "--output", ""}, "text\njson\nyaml\njunit\nsarif\n:4\n"},
		{[]string{"__complete", "apply", "--output", ""}, "text\njson\nyaml\n:4\n"},
		{[]string{"__complete", "plan", "--format", ""}, "github\ntekton\ngitlab\n:4\n"},
		{[]string{"__complete", "apply", "--prune="}, "true\nfalse\n:4\n"},
		{[]string{"__complete", "apply", "--summary", ""}, "auto\ntrue\nfalse\n:4\n"},
		{[]string{"__complete", "di"}, "diff\tShow what apply would change, validated by the cluster\ndiff-artifact\tCompare an artifact with another artifact or a folder\n:4\n"},
	} {
		var stdout strings.Builder
		if code := Run(t.Context(), tc.args, nil, &stdout, io.Discard); code != ExitOK || !strings.HasPrefix(stdout.String(), tc.want) {
			t.Errorf("gantry %v: exit %d:\n%s\nwant\n%s", tc.args, code, stdout.String(), tc.want)
		}
	}
	// Flags of the command only, and the kubeconfig's contexts.
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\ncontexts:\n- name: prod\n  context: {cluster: a, user: a}\n- name: dev\n  context: {cluster: a, user: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	Run(t.Context(), []string{"__complete", "diff", "--kubeconfig", kubeconfig, "--context", ""}, nil, &stdout, io.Discard)
	if !strings.HasPrefix(stdout.String(), "dev\nprod\n") {
		t.Errorf("contexts completed as:\n%s", stdout.String())
	}
	stdout.Reset()
	Run(t.Context(), []string{"__complete", "build", "--he"}, nil, &stdout, io.Discard)
	if !strings.HasPrefix(stdout.String(), "--help\t") || strings.Contains(stdout.String(), "--health-checks") {
		t.Errorf("build's flags completed as:\n%s", stdout.String())
	}
}

// The diff as a terminal shows it and as a pipe or a log gets it.
func TestDiffOutputGolden(t *testing.T) {
	t.Parallel()
	res := &result.Result{Command: "diff", Reason: result.ReasonProgressing, Objects: []result.Object{
		{Kind: "Service", Namespace: "shop", Name: "web", Action: result.Unchanged},
		{Kind: "Deployment", APIVersion: "apps/v1", Namespace: "shop", Name: "web", Action: result.Configured,
			Diff: "--- live/Deployment.apps/shop/web\n+++ desired/Deployment.apps/shop/web\n@@ -3,3 +3,3 @@\n spec:\n-  replicas: 2\n+  replicas: 3\n   selector: {}\n"},
		{Kind: "ConfigMap", Namespace: "shop", Name: "settings", Action: result.Created,
			Diff: "--- live/ConfigMap/shop/settings\n+++ desired/ConfigMap/shop/settings\n@@ -0,0 +1,2 @@\n+data:\n+  password: hunter2-substituted\n"},
		{Kind: "ConfigMap", Namespace: "shop", Name: "old", Action: result.Deleted,
			Diff: "--- live/ConfigMap/shop/old\n+++ desired/ConfigMap/shop/old\n@@ -1 +0,0 @@\n-data: {}\n"},
	}}
	for name, color := range map[string]bool{"plain": false, "color": true} {
		var b strings.Builder
		if err := writeDiff(&b, res, "text", "", false, color, redact.New("hunter2-substituted")); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "hunter2") {
			t.Errorf("%s: a secret value reached the diff", name)
		}
		golden(t, "diff-"+name+".txt", b.String())
	}
}
