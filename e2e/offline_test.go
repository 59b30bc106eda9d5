package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/schemas"
	"github.com/gantry-dev/gantry/schemas/releases"
	"github.com/gantry-dev/gantry/sources"
)

// offlineCase is one file of e2e/testdata/offline/cases: an object the API
// server rejects, and its valid twin.
type offlineCase struct {
	name, why      string
	invalid, valid *unstructured.Unstructured
}

func readOfflineCases(t *testing.T) []offlineCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "offline", "cases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	var cases []offlineCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs := readDocs(t, f, b)
		if len(docs) != 2 {
			t.Fatalf("%s: %d objects, want the invalid one and its valid twin", f, len(docs))
		}
		why := strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "# ")
		cases = append(cases, offlineCase{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), why: why, invalid: docs[0], valid: docs[1]})
	}
	return cases
}

func readDocs(t *testing.T, file string, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var docs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", file, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		// As the build reads objects: whole numbers as int64.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		docs = append(docs, u)
	}
	return docs
}

// serverRelease is the Kubernetes minor release of the test cluster: what
// discovery says, or, for an API server built from source without a
// version (make tools builds one), the k8s.io/kubernetes version it was
// built from.
func serverRelease(t *testing.T) *releases.Release {
	t.Helper()
	v, err := env.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSuffix(v.Major+"."+v.Minor, "+")
	if v.Major == "" || v.Minor == "" {
		b, err := os.ReadFile(filepath.Join("..", "hack", "tools", "kube", "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`k8s\.io/kubernetes v(1\.[0-9]+)\.`).FindSubmatch(b)
		if m == nil {
			t.Fatal("hack/tools/kube/go.mod names no k8s.io/kubernetes version")
		}
		version = string(m[1])
	}
	r, err := releases.Get(version)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serverVerdict dry-runs a create of u, as kubectl create --dry-run=server
// does (strict field validation), and returns the API server's refusal.
func serverVerdict(ctx context.Context, t *testing.T, ns string, u *unstructured.Unstructured) error {
	u = u.DeepCopy()
	mapping, err := env.Mapper(t).RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		return err // no such kind: the server rejects it as "no matches for kind"
	}
	res := env.Dynamic.Resource(mapping.Resource)
	opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
	if mapping.Scope.Name() == "namespace" {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		_, err = res.Namespace(u.GetNamespace()).Create(ctx, u, opts)
	} else {
		_, err = res.Create(ctx, u, opts)
	}
	return err
}

// TestOfflineCatchesWhatTheServerCatches sends every case of the corpus to
// the API server (a dry-run) and to offline validation. Offline must catch
// at least 90 % of what the server rejects and never reject what it
// accepts; the figure and every miss are printed.
func TestOfflineCatchesWhatTheServerCatches(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	crds := installOfflineCRDs(ctx, t)
	release := serverRelease(t)
	v, err := schemas.Offline(nil, crds, release, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := readOfflineCases(t)
	if len(cases) < 40 {
		t.Fatalf("%d cases, want at least 40", len(cases))
	}
	serverRejected, caught := 0, 0
	var misses []string
	for _, c := range cases {
		if err := serverVerdict(ctx, t, ns, c.valid); err != nil {
			t.Errorf("%s: the server rejects the valid twin: %v", c.name, err)
		}
		if err := v.Validate(ctx, withNamespace(c.valid)); err != nil {
			t.Errorf("%s: offline rejects the valid twin, which the server accepts: %v", c.name, err)
		}
		serverErr := serverVerdict(ctx, t, ns, c.invalid)
		if serverErr == nil {
			t.Errorf("%s: the server accepts the invalid object: the case is wrong (%s)", c.name, c.why)
			continue
		}
		serverRejected++
		offlineErr := v.Validate(ctx, withNamespace(c.invalid))
		if offlineErr == nil {
			misses = append(misses, fmt.Sprintf("%s (%s): the server says %v", c.name, c.why, serverErr))
			continue
		}
		caught++
		t.Logf("%s: server: %v\n    offline: %v", c.name, serverErr, offlineErr)
	}
	pct := 100 * float64(caught) / float64(max(serverRejected, 1))
	report := fmt.Sprintf("offline validation (Kubernetes %s) caught %d of the %d objects the API server rejects (%.1f %%)", release.Version, caught, serverRejected, pct)
	if len(misses) > 0 {
		sort.Strings(misses)
		report += "; missed:\n  " + strings.Join(misses, "\n  ")
	}
	fmt.Fprintln(os.Stderr, report)
	t.Log(report)
	figures.offlineRejected.Add(int32(serverRejected))
	figures.offlineCaught.Add(int32(caught))
	if pct < 90 {
		t.Errorf("offline caught %.1f %% of what the server rejects, want at least 90 %%", pct)
	}
}

// withNamespace places a namespaced object as the dry-run does; offline
// validation takes the namespace it would be applied to.
func withNamespace(u *unstructured.Unstructured) *unstructured.Unstructured {
	c := u.DeepCopy()
	switch c.GetKind() {
	case "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition":
	default:
		c.SetNamespace("offline-corpus")
	}
	return c
}

// installOfflineCRDs creates the corpus's CRDs and waits until they are
// served; they are deleted when the test ends.
func installOfflineCRDs(ctx context.Context, t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "offline", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range readDocs(t, f, b) {
			crds = append(crds, u)
			createForTest(ctx, t, u)
		}
	}
	waitEstablished(ctx, t, crds)
	return crds
}

// createForTest creates a cluster-scoped object (a Namespace, a CRD) for
// the test and deletes it when the test ends.
func createForTest(ctx context.Context, t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	mapping, err := env.Mapper(t).RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		t.Fatal(err)
	}
	res := env.Dynamic.Resource(mapping.Resource)
	if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	name := u.GetName()
	t.Cleanup(func() { _ = res.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// waitEstablished waits until the API server serves every CRD.
func waitEstablished(ctx context.Context, t *testing.T, crds []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := env.Dynamic.Resource(crdResource).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not created yet: poll again
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s never established: %v", u.GetName(), err)
		}
	}
}

// TestOfflineAcceptsWhatTheServerAccepts builds configuration of the shapes
// real projects ship (an overlay with a component, generators and
// patches; an operator's CRD, RBAC, webhook and custom resource; a
// database's StatefulSet with its Secrets, Jobs, quota and claims; the
// example app and the e2e tests' own app) and checks that every object
// the API server accepts, offline validation accepts too, by the command
// users run.
func TestOfflineAcceptsWhatTheServerAccepts(t *testing.T) {
	appDir, appNS := app(t, "app") // creates the test's namespace
	ns := strings.TrimSuffix(appNS, "-app")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	release := serverRelease(t)
	sets := []struct {
		name, dir  string
		substitute map[string]string
	}{
		{"overlay with a component", filepath.Join("testdata", "offline", "shapes", "web", "overlays", "prod"), nil},
		{"operator", filepath.Join("testdata", "offline", "shapes", "operator"), nil},
		{"stateful", filepath.Join("testdata", "offline", "shapes", "stateful"), nil},
		{"null values", filepath.Join("testdata", "offline", "shapes", "nulls"), nil},
		{"example", filepath.Join("..", "examples", "hello"), map[string]string{}}, // as shipped, no input
		{"e2e app", appDir, map[string]string{"NS": appNS}},
	}
	total := 0
	for _, s := range sets {
		objects, err := sources.Build(sources.BuildOptions{Path: s.dir, Substitute: s.substitute})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		set := make([]*unstructured.Unstructured, len(objects))
		for i, o := range objects {
			set[i] = o.Unstructured
		}
		// What the rest needs is created for real; everything else is
		// dry-run.
		var rest []*unstructured.Unstructured
		var crds []*unstructured.Unstructured
		for _, u := range set {
			switch u.GetKind() {
			case "Namespace":
				createForTest(ctx, t, u)
			case "CustomResourceDefinition":
				crds = append(crds, u)
			default:
				rest = append(rest, u)
			}
		}
		for _, crd := range crds {
			createForTest(ctx, t, crd)
		}
		waitEstablished(ctx, t, crds)
		for _, u := range rest {
			if err := serverVerdict(ctx, t, ns, u); err != nil {
				t.Errorf("%s: the server rejects %s %s: %v (the shape is wrong)", s.name, u.GetKind(), u.GetName(), err)
			}
		}
		v, err := schemas.Offline(set, nil, release, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range set {
			total++
			if err := v.Validate(ctx, withNamespace(u)); err != nil {
				t.Errorf("%s: offline rejects what the server accepts: %v", s.name, err)
			}
		}
		// The command, as a pull request's workflow runs it.
		args := []string{"validate", s.dir, "--offline", "--kubernetes-version", release.Version}
		for k, v := range s.substitute {
			args = append(args, "--substitute", k+"="+v)
		}
		if s.substitute != nil && len(s.substitute) == 0 {
			args = append(args, "--substitute", "UNUSED=") // substitution on, defaults only
		}
		r := gantry(t, args...)
		if r.code != 0 || r.res == nil || r.res.Counts()[result.Valid] != len(set) {
			t.Errorf("%s: gantry validate --offline: exit %d, want 0 with %d objects valid\n%s", s.name, r.code, len(set), r.stderr)
		}
	}
	t.Logf("offline validation accepted all %d objects of %d real-world shapes that the API server accepts", total, len(sets))
}

// The CRDs of custom resources the set does not define come from a folder
// or from an artifact, pulled from a real registry; without them the
// custom resource is an unknown kind, and allow-unknown-kinds lets it
// through unchecked.
func TestOfflineCRDsFromAFolderOrAnArtifact(t *testing.T) {
	t.Parallel()
	host, creds := realRegistry(t)
	crds := filepath.Join("testdata", "offline", "crds")
	ref := "oci://" + host + "/offline/crds:v1"
	if r := gantry(t, append([]string{"push", crds, "--artifact", ref}, creds...)...); r.code != 0 {
		t.Fatalf("push: exit %d\n%s", r.code, r.stderr)
	}
	dir := t.TempDir()
	for _, c := range readOfflineCases(t) {
		if c.name == "cel-min-max" {
			writeFile(t, filepath.Join(dir, "gadget.yaml"), mustYAML(t, c.invalid))
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"folder", []string{"--crds", crds}, entrypoint.ExitFailed, "minReplicas must not exceed maxReplicas"},
		{"artifact", append([]string{"--crds", ref}, creds...), entrypoint.ExitFailed, "minReplicas must not exceed maxReplicas"},
		{"neither", nil, entrypoint.ExitFailed, "no CRD in the set or in crds defines offline.gantry.test/v1 Gadget"},
		{"allowed", []string{"--allow-unknown-kinds", "offline.gantry.test"}, entrypoint.ExitOK, ""},
	} {
		r := gantry(t, append([]string{"validate", dir, "--offline"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, want %d with %q\n%s", tc.name, r.code, tc.code, tc.want, r.stderr)
		}
	}
}

func mustYAML(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// validate --offline takes a run file: every unit is checked, each in its
// own section, and the run fails when one unit has an invalid object.
func TestOfflineValidationOfARunFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, sub := range []string{"bad", "good"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range readOfflineCases(t) {
		if c.name == "rule-negative-replicas" {
			writeFile(t, filepath.Join(dir, "bad", "app.yaml"), mustYAML(t, c.invalid))
			writeFile(t, filepath.Join(dir, "good", "app.yaml"), mustYAML(t, c.valid))
		}
	}
	runFile := filepath.Join(dir, "gantry.yaml")
	writeFile(t, runFile, "units:\n  - {name: good, path: good}\n  - {name: bad, path: bad, depends-on: [good]}\n")
	report := filepath.Join(dir, "report.json")
	var stdout, stderr strings.Builder
	code := entrypoint.Run(context.Background(), []string{"validate", "--offline", "--run-file", runFile, "--report", report}, []string{"HOME=" + os.Getenv("HOME"), "GANTRY_WORKSPACE=" + dir}, &stdout, &stderr)
	if code != entrypoint.ExitFailed {
		t.Errorf("exit %d, want %d\n%s", code, entrypoint.ExitFailed, stderr.String())
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var run result.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]result.Reason{}
	for _, u := range run.Units {
		reasons[u.Name] = u.Reason
	}
	if run.Command != "validate" || reasons["good"] != result.ReasonValidated || reasons["bad"] != result.ReasonValidationFailed {
		t.Errorf("run %s %s: units %v", run.Command, run.Reason, reasons)
	}
	if !strings.Contains(stderr.String(), "[bad]") || !strings.Contains(stderr.String(), "spec.replicas: Invalid value: -1") {
		t.Errorf("the failing unit's problem is not named:\n%s", stderr.String())
	}
}
