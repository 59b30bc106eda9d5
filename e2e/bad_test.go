package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
)

// badCase is one folder of testdata/bad: a set (set/) and case.txt with
// the extra arguments or environment, the exit code and a substring of
// the message.
type badCase struct {
	args    []string
	env     []string
	exit    int
	message string
}

func readBadCase(t *testing.T, dir string) badCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "case.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var c badCase
	for _, line := range strings.Split(string(b), "\n") {
		key, value, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch key {
		case "args":
			c.args = strings.Fields(value)
			if strings.HasPrefix(value, "--age-recipients=") {
				c.args = []string{value} // one value with a space
			}
		case "env":
			c.env = append(c.env, value)
		case "exit":
			if c.exit, err = strconv.Atoi(value); err != nil {
				t.Fatal(err)
			}
		case "message":
			c.message = value
		}
	}
	return c
}

// Every bad input is refused with its documented exit code and a message
// naming what is at fault, and nothing is written to the cluster: no
// object of the set, no inventory, no lock. Generated here rather than
// kept in git: a link out of the workspace, and a 100 MB file.
func TestBadInputCorpus(t *testing.T) {
	t.Parallel()
	env.Require(t)
	cases, err := filepath.Glob("testdata/bad/*")
	if err != nil || len(cases) < 40 {
		t.Fatalf("%d cases (%v), want at least 40", len(cases), err)
	}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			c := readBadCase(t, dir)
			set := filepath.Join(t.TempDir(), "set")
			if err := os.CopyFS(set, os.DirFS(filepath.Join(dir, "set"))); err != nil {
				t.Fatal(err)
			}
			runBadCase(t, set, c)
		})
	}
	t.Run("symlink-out-of-workspace", func(t *testing.T) {
		t.Parallel()
		set := t.TempDir()
		writeFile(t, filepath.Join(set, "kustomization.yaml"), "resources: [stolen.yaml]\n")
		if err := os.Symlink("/etc/hostname", filepath.Join(set, "stolen.yaml")); err != nil {
			t.Fatal(err)
		}
		runBadCase(t, set, badCase{exit: entrypoint.ExitInvalid, message: "stolen.yaml"})
	})
	t.Run("file-of-100MB", func(t *testing.T) {
		t.Parallel()
		set := t.TempDir()
		f, err := os.Create(filepath.Join(set, "huge.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(100 << 20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		runBadCase(t, set, badCase{exit: entrypoint.ExitInvalid, message: "huge.yaml: 104857600 bytes, over the limit"})
	})
}

func runBadCase(t *testing.T, set string, c badCase) {
	t.Helper()
	figures.badInputs.Add(1)
	defer func() {
		if !t.Failed() {
			figures.badRefused.Add(1)
		}
	}()
	ns := env.Namespace(t)
	args := append([]string{"apply", "--path=" + set, "--inventory=bad", "--inventory-namespace=" + ns,
		"--substitute=NS=" + ns, "--wait=false", "--timeout=30s", "--kubeconfig=" + env.Cluster.Kubeconfig}, c.args...)
	var stdout, stderr bytes.Buffer
	code := entrypoint.Run(context.Background(), args, append([]string{"HOME=" + os.Getenv("HOME")}, c.env...), &stdout, &stderr)
	if code != c.exit || !strings.Contains(stderr.String(), c.message) {
		t.Errorf("exit %d, want %d with %q:\n%s", code, c.exit, c.message, stderr.String())
	}
	ctx := context.Background()
	cms, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("ConfigMap %s was written", cm.Name)
		}
	}
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, inventory.ConfigMapName("bad"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the inventory's lock was left: %v", err)
	}
}
