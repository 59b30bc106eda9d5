package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/reporters/fakeapi"
	"github.com/gantry-dev/gantry/result"
)

// The GitLab plan run by gitlab-ci-local's Docker executor: each job in a
// container of gantry's image, on the host network, against the local
// control plane. gitlab-ci-local does not run a trigger job's child
// pipeline, so a pipeline here is the parent's plan job (the docs'
// gantry-plan job, as written), then the child pipeline it wrote, run as
// its own pipeline with what the trigger passes (GANTRY_PIPELINE_SOURCE,
// and CI_PIPELINE_SOURCE=parent_pipeline, a child's own).

// gitlabUtilImage is the helper image gitlab-ci-local's Docker executor
// copies a job's files into its volume and its artifacts out with: it
// runs sh, chown, chmod, mkdir, bash and rsync in it.
const gitlabUtilImage = "docker.io/firecow/gitlab-ci-local-util:latest"

// gitlabCILocal is the gitlab-ci-local make tools builds, and the images
// its Docker executor runs besides the job's: the helper, built from this
// machine's files when the engine lacks it (nothing is pulled here).
func gitlabCILocal(t *testing.T) string {
	t.Helper()
	bin, err := cluster.Tool("gitlab-ci-local")
	if err != nil {
		t.Skipf("%v: make tools builds it (make test-image does)", err)
	}
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skip("gitlab-ci-local copies files with rsync, which make tools installs")
	}
	if exec.Command("docker", "image", "inspect", gitlabUtilImage).Run() == nil {
		return bin
	}
	busybox, err := cluster.Tool("busybox")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	addDir := func(d string, mode int64) {
		for _, p := range []string{filepath.Dir(d), d} {
			if p == "." || p == "/" || dirs[p] {
				continue
			}
			dirs[p] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode}); err != nil {
				t.Fatal(err)
			}
		}
	}
	addFile := func(name, from string, mode int64) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		addDir(filepath.Dir(name), 0o755)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "usr/bin", "etc", "root"} {
		addDir(d, 0o755)
	}
	addDir("tmp", 0o1777)
	addFile("bin/busybox", busybox, 0o755)
	for _, applet := range []string{"sh", "chown", "chmod", "mkdir", "cp", "rm", "ls", "cat", "mv", "id", "env"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "/bin/busybox", Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	libs := map[string]bool{}
	libPath := regexp.MustCompile(`(?m)^\s*(?:\S+ => )?(/\S+) \(0x`)
	for name, from := range map[string]string{"bin/bash": "bash", "usr/bin/rsync": "rsync"} {
		p, err := exec.LookPath(from)
		if err != nil {
			t.Skipf("the helper image of gitlab-ci-local's Docker executor is built from this machine's %s: %v", from, err)
		}
		addFile(name, p, 0o755)
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", p, err)
		}
		for _, m := range libPath.FindAllStringSubmatch(string(out), -1) {
			libs[m[1]] = true
		}
	}
	for lib := range libs {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			t.Fatal(err)
		}
		addFile(strings.TrimPrefix(lib, "/"), real, 0o755)
	}
	for name, content := range map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker", "import", "--change", "ENV PATH=/usr/bin:/bin", "-", gitlabUtilImage)
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import %s: %v\n%s", gitlabUtilImage, err, out)
	}
	return bin
}

// asRelease tags the image under test as the release the GitLab template
// and gantry plan name, so that their files run as shipped, until the
// test ends.
func asRelease(t *testing.T, image string) string {
	t.Helper()
	b, err := os.ReadFile("../ci/gitlab/gantry.gitlab-ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tmpl map[string]struct {
		Image struct{ Name string } `json:"image"`
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	release := tmpl[".gantry"].Image.Name
	if release == "" {
		t.Fatal("the template names no image")
	}
	if out, err := exec.Command("docker", "tag", image, release).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The tag alone: the image keeps its own.
		if out, err := exec.Command("docker", "rmi", release).CombinedOutput(); err != nil {
			t.Logf("docker rmi %s: %v\n%s", release, err, out)
		}
	})
	return release
}

// gitlabProject is a project of a three-unit run file: base makes the
// namespace the two apps deploy into, and a Deployment that becomes
// available only after minReadySeconds, so that base's job lasts a few
// seconds; app-a and app-b each a ConfigMap in that namespace, so that
// neither can apply before base has.
type gitlabProject struct {
	bin, repo     string
	gl            *fakeapi.GitLab
	api, token    string
	ns, appNS     string
	runs          int
	planPipelines int
}

// planParent is the parent pipeline docs/units.md gives for the GitLab
// plan: its gantry-plan job and the trigger of the child pipeline.
func planParent(t *testing.T) string {
	t.Helper()
	units, _, ok := strings.Cut(readText(t, "../docs/units.md"), "  ```\n\n  A `GANTRY_COMMAND` the parent sets wins")
	_, parent, ok2 := strings.Cut(units, "so the trigger job passes the parent's on:\n\n  ```yaml\n")
	if !ok || !ok2 {
		t.Fatal("docs/units.md has no parent pipeline for the GitLab plan")
	}
	return regexp.MustCompile(`(?m)^  `).ReplaceAllString(parent, "")
}

// newGitLabProject makes the project, with ci as its .gitlab-ci.yml and
// the files given besides.
func newGitLabProject(t *testing.T, bin, ci string, extra map[string]string) *gitlabProject {
	t.Helper()
	ns := env.Namespace(t)
	p := &gitlabProject{bin: bin, repo: t.TempDir(), ns: ns, appNS: ns + "-apps", token: "glpat-" + canary("token")}
	p.gl = &fakeapi.GitLab{T: t, Token: p.token, Me: 77}
	p.api = hostServer(t, p.gl)
	t.Cleanup(func() {
		err := env.Client.CoreV1().Namespaces().Delete(context.Background(), p.appNS, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", p.appNS, err)
		}
	})
	kc, err := os.ReadFile(env.Cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	vars := "KUBECONFIG:\n  type: file\n  values:\n    '*': |\n"
	for _, l := range strings.SplitAfter(strings.TrimSuffix(string(kc), "\n"), "\n") {
		vars += "      " + l
	}
	files := map[string]string{
		".gitlab-ci.yml": ci,
		// What the runs leave in the project's folder stays out of it.
		".gitignore": ".gcl-*/\nchild-*.yml\n",
		// The project's CI/CD variables, as the plan's comment says.
		".gitlab-ci-local-variables.yml": vars + "\nGANTRY_GITLAB_TOKEN: " + p.token + "\n",
		"gantry.yaml": fmt.Sprintf(`defaults:
  inventory-namespace: %s
  timeout: 2m
units:
  - {name: base, path: base, inventory: base}
  - {name: app-a, depends-on: [base], path: apps/a, inventory: app-a}
  - {name: app-b, depends-on: [base], path: apps/b, inventory: app-b}
`, ns),
		"base/base.yaml": fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 1
  minReadySeconds: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
`, p.appNS),
		"apps/a/a.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: %s}\ndata: {greeting: hello}\n", p.appNS),
		"apps/b/b.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: %s}\ndata: {greeting: hello}\n", p.appNS),
	}
	for name, content := range extra {
		files[name] = content
	}
	for name, content := range files {
		path := filepath.Join(p.repo, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, content)
	}
	p.git(t, "init", "-q", "-b", "main")
	p.commit(t, "the project")
	return p
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (p *gitlabProject) git(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("git", append([]string{"-C", p.repo}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func (p *gitlabProject) commit(t *testing.T, msg string) {
	t.Helper()
	p.git(t, "add", ".")
	p.git(t, "-c", "user.email=ci@example.com", "-c", "user.name=ci", "commit", "-q", "-m", msg)
}

// gitlabRun is one run of gitlab-ci-local: its exit code, its output,
// and its state folder, which holds each job's log and artifacts.
type gitlabRun struct {
	code  int
	out   string
	state string
}

// log is what the job printed, as its job log shows it.
func (r gitlabRun) log(t *testing.T, job string) string {
	t.Helper()
	return ansiColor.ReplaceAllString(readAll(t, filepath.Join(r.state, "output", job+".log")), "")
}

// dotenv is the job's dotenv report.
func (r gitlabRun) dotenv(t *testing.T, job string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(readAll(t, filepath.Join(r.state, "artifacts", job, ".gitlab-ci-reports", "dotenv", "gantry.env")), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			out[k] = v
		}
	}
	return out
}

// report is the JSON report the job kept as an artifact.
func (r gitlabRun) report(t *testing.T, job string) *result.Run {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.state, "artifacts", job, ".gantry", "report.json"))
	if err != nil {
		t.Errorf("%s kept no report: %v", job, err)
		return nil
	}
	var run result.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatalf("%s's report: %v", job, err)
	}
	return &run
}

// run runs gitlab-ci-local in the project: the pipeline file (the
// parent's when empty) with the variables given, on the host network, in
// a state folder of its own.
func (p *gitlabProject) run(t *testing.T, file string, vars []string, jobs ...string) gitlabRun {
	t.Helper()
	p.runs++
	state := fmt.Sprintf(".gcl-%d", p.runs)
	args := []string{"--state-dir", state, "--home", t.TempDir(), "--network", "host",
		"--pull-policy", "if-not-present", "--max-job-name-padding", "0", "--no-artifacts-to-source"}
	// What GitLab sets and gitlab-ci-local sets otherwise (GITLAB_CI is
	// false there, and the API is gitlab.com's), with the project fakeapi
	// answers for.
	for _, v := range []string{"GITLAB_CI=true", "CI_DEFAULT_BRANCH=main", "CI_PROJECT_ID=123", "CI_API_V4_URL=" + p.api + "/api/v4"} {
		args = append(args, "--variable", v)
	}
	if file != "" {
		args = append(args, "--file", file)
	}
	for _, v := range vars {
		args = append(args, "--variable", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.bin, append(args, jobs...)...)
	cmd.Dir = p.repo
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GANTRY_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gitlab-ci-local: %v", err)
	}
	r := gitlabRun{code: code, out: ansiColor.ReplaceAllString(string(out), ""), state: filepath.Join(p.repo, state)}
	t.Logf("gitlab-ci-local %s: exit %d in %s\n%s", strings.Join(append(vars, jobs...), " "), code, time.Since(start).Round(100*time.Millisecond), r.out)
	return r
}

// pipeline runs a pipeline of the given source on the branch checked
// out: the parent's plan job, then the child pipeline it wrote, as the
// trigger runs it. It returns the child's run and the plan.
func (p *gitlabProject) pipeline(t *testing.T, source string, vars ...string) (gitlabRun, []byte) {
	t.Helper()
	parent := p.run(t, "", append([]string{"CI_PIPELINE_SOURCE=" + source}, vars...), "gantry-plan")
	if parent.code != 0 {
		t.Fatalf("the parent's gantry-plan job: exit %d", parent.code)
	}
	// The artifact, as the trigger includes it.
	plan, err := os.ReadFile(filepath.Join(parent.state, "artifacts", "gantry-plan", "gantry-plan.yml"))
	if err != nil {
		t.Fatalf("the gantry-plan job's artifact: %v", err)
	}
	return p.child(t, plan, source, vars...), plan
}

// child runs a child pipeline as the parent's trigger job starts it: the
// parent's source passed on, the child's own CI_PIPELINE_SOURCE.
func (p *gitlabProject) child(t *testing.T, plan []byte, source string, vars ...string) gitlabRun {
	t.Helper()
	p.planPipelines++
	child := fmt.Sprintf("child-%d.yml", p.planPipelines)
	writeFile(t, filepath.Join(p.repo, child), string(plan))
	return p.run(t, child, append([]string{"CI_PIPELINE_SOURCE=parent_pipeline", "GANTRY_PIPELINE_SOURCE=" + source}, vars...))
}

// planUnits are the project's units and those each depends on.
var planUnits = map[string][]string{"base": nil, "app-a": {"base"}, "app-b": {"base"}}

// orderViolations says where the jobs of a child pipeline did not run as
// the run file orders them: a unit's job that failed, or that started
// before a job it depends on had finished (each job's report gives when
// its run started and finished).
func orderViolations(t *testing.T, r gitlabRun) []string {
	t.Helper()
	var out []string
	reports := map[string]*result.Run{}
	for unit := range planUnits {
		rep := r.report(t, "gantry-"+unit)
		if rep == nil {
			out = append(out, unit+": no report")
			continue
		}
		reports[unit] = rep
		if !rep.Reason.Succeeded() && rep.Reason != result.ReasonDriftDetected {
			out = append(out, fmt.Sprintf("%s: %s: %s", unit, rep.Reason, rep.Message))
		}
	}
	for unit, deps := range planUnits {
		for _, dep := range deps {
			u, d := reports[unit], reports[dep]
			if u != nil && d != nil && u.Started.Before(d.Finished) {
				out = append(out, fmt.Sprintf("%s started at %s, before %s, which it depends on, finished at %s",
					unit, u.Started.Format(time.RFC3339Nano), dep, d.Finished.Format(time.RFC3339Nano)))
			}
		}
	}
	slices.Sort(out)
	return out
}

// failedWithDriftOnly: the run passed, or job is the one job that failed,
// with exit 3. GitLab lets a drift job fail with exit 3 (allow_failure:
// exit_codes [3], on the template's and the plan's jobs); gitlab-ci-local
// 4.52.0 drops a job's allow_failure when one of its rules matches
// without one of its own, and fails the job.
func failedWithDriftOnly(r gitlabRun, job string) bool {
	if r.code == 0 {
		return true
	}
	return regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(job)+` finished in .* FAIL 3 *$`).MatchString(r.out) &&
		slices.Equal(r.ran("FAIL"), []string{job})
}

// ran lists the jobs gitlab-ci-local reported with that outcome (PASS,
// WARN or FAIL), or every job it ran when outcome is empty.
func (r gitlabRun) ran(outcome string) []string {
	var jobs []string
	for _, m := range regexp.MustCompile(`(?m)^ (PASS|WARN|FAIL) +(\S+)`).FindAllStringSubmatch(r.out, -1) {
		if outcome == "" || m[1] == outcome {
			jobs = append(jobs, m[2])
		}
	}
	slices.Sort(jobs)
	return jobs
}

// inventoryIDs are the ids an inventory lists.
func inventoryIDs(t *testing.T, ns, name string) []string {
	t.Helper()
	inv, err := (&inventory.Store{Client: env.Client}).Load(context.Background(), ns, name)
	if err != nil {
		t.Fatalf("inventory %s/%s: %v", ns, name, err)
	}
	var ids []string
	for _, e := range inv.Entries {
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	return ids
}

// The GitLab plan of a three-unit run file, run as GitLab's Docker
// executor runs it: on the default branch each unit's job applies its
// unit after the units it depends on; on a merge request each job diffs
// and the cluster is left as it was; on a schedule each job reports
// drift, and nothing is put back. Checked by what the cluster holds and
// what each job printed and kept (its log, its dotenv report, its JSON
// report).
func TestImageRunsTheGitLabPlan(t *testing.T) {
	image := imageUnderTest(t)
	env.Require(t)
	bin := gitlabCILocal(t)
	asRelease(t, image)
	ctx := context.Background()
	p := newGitLabProject(t, bin, planParent(t), nil)

	// The default branch: apply, in the order of the run file.
	push, plan := p.pipeline(t, "push")
	if push.code != 0 {
		t.Fatalf("the child pipeline on the default branch: exit %d", push.code)
	}
	if v := orderViolations(t, push); len(v) > 0 {
		t.Errorf("the units did not run in their order:\n%s", strings.Join(v, "\n"))
	}
	created := map[string]string{"base": "2", "app-a": "1", "app-b": "1"}
	for unit := range planUnits {
		job := "gantry-" + unit
		if rep := push.report(t, job); rep != nil && (rep.Command != "apply" || len(rep.Units) != 1 || rep.Units[0].Name != unit) {
			t.Errorf("%s ran gantry %s on %d units", job, rep.Command, len(rep.Units))
		}
		d := push.dotenv(t, job)
		if d["GANTRY_REASON"] != string(result.ReasonSucceeded) || d["GANTRY_CREATED"] != created[unit] {
			t.Errorf("%s's dotenv report: %v", job, d)
		}
		if log := push.log(t, job); !strings.Contains(log, "["+unit+"] gantry apply: ReconciliationSucceeded: "+created[unit]+" created") {
			t.Errorf("%s's log:\n%s", job, log)
		}
	}
	want := map[string][]string{
		"base":  {"_" + p.appNS + "__Namespace", p.appNS + "_web_apps_Deployment"},
		"app-a": {p.appNS + "_a__ConfigMap"},
		"app-b": {p.appNS + "_b__ConfigMap"},
	}
	for inv, ids := range want {
		if got := inventoryIDs(t, p.ns, inv); !slices.Equal(got, ids) {
			t.Errorf("inventory %s lists %v, want %v", inv, got, ids)
		}
	}
	for _, name := range []string{"a", "b"} {
		if _, err := env.Client.CoreV1().ConfigMaps(p.appNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("ConfigMap %s: %v", name, err)
		}
	}

	// A merge request that changes app-a: each job diffs and keeps a note
	// of its own, app-a's shows the change, and the cluster keeps what the
	// default branch applied.
	p.git(t, "checkout", "-q", "-b", "feature")
	replaceInFile(t, filepath.Join(p.repo, "apps/a/a.yaml"), "greeting: hello", "greeting: hola")
	p.commit(t, "a change")
	mr, _ := p.pipeline(t, "merge_request_event", "CI_MERGE_REQUEST_IID=9")
	if mr.code != 0 {
		t.Fatalf("the child pipeline on a merge request: exit %d", mr.code)
	}
	notes := map[string]string{}
	for _, n := range p.gl.Notes() {
		first, _, _ := strings.Cut(n.Body, "\n")
		notes[first] = n.Body
	}
	for unit := range planUnits {
		job := "gantry-" + unit
		if rep := mr.report(t, job); rep != nil && rep.Command != "diff" {
			t.Errorf("%s ran gantry %s", job, rep.Command)
		}
		log, d := mr.log(t, job), mr.dotenv(t, job)
		note, ok := notes["<!-- gantry:comment run-file=gantry.yaml unit="+unit+" -->"]
		if !ok {
			t.Errorf("no merge request note of %s (%d notes)", unit, len(notes))
		}
		if unit == "app-a" {
			if !strings.Contains(log, "+  greeting: hola") || d["GANTRY_CHANGED"] != "true" || !strings.Contains(note, "+  greeting: hola") {
				t.Errorf("%s: dotenv %v, log:\n%s\nnote:\n%s", job, d, log, note)
			}
		} else if d["GANTRY_REASON"] != string(result.ReasonNoChanges) || !strings.Contains(note, unit+"</b>: no changes") {
			t.Errorf("%s: dotenv %v, log:\n%s\nnote:\n%s", job, d, log, note)
		}
	}
	if len(notes) != 3 {
		t.Errorf("%d merge request notes, want one per unit: %v", len(notes), p.gl.Writes())
	}
	if cm, err := env.Client.CoreV1().ConfigMaps(p.appNS).Get(ctx, "a", metav1.GetOptions{}); err != nil || cm.Data["greeting"] != "hello" {
		t.Errorf("after the merge request's diff, ConfigMap a holds %v (%v), want hello", cm.Data, err)
	}
	p.git(t, "checkout", "-q", "main")

	// A schedule after a change by hand to app-b's ConfigMap: each job
	// runs drift, app-b's reports the field (exit 3) and opens an issue,
	// and the change stays.
	cm, err := env.Client.CoreV1().ConfigMaps(p.appNS).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "by hand"
	if _, err := env.Client.CoreV1().ConfigMaps(p.appNS).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	sched, _ := p.pipeline(t, "schedule")
	if !failedWithDriftOnly(sched, "gantry-app-b") {
		t.Fatalf("the child pipeline on a schedule: exit %d", sched.code)
	}
	if !strings.Contains(string(plan), "allow_failure:\n    exit_codes:\n    - 3\n") {
		t.Errorf("the plan's jobs do not allow exit 3:\n%s", plan)
	}
	for unit := range planUnits {
		job := "gantry-" + unit
		if rep := sched.report(t, job); rep != nil && rep.Command != "drift" {
			t.Errorf("%s ran gantry %s", job, rep.Command)
		}
		log, d := sched.log(t, job), sched.dotenv(t, job)
		wantReason := result.ReasonNoDrift
		if unit == "app-b" {
			wantReason = result.ReasonDriftDetected
			if !strings.Contains(log, `.data.greeting changed by kubectl-edit`) {
				t.Errorf("%s's log names no drifted field:\n%s", job, log)
			}
		}
		if d["GANTRY_REASON"] != string(wantReason) {
			t.Errorf("%s: dotenv %v, log:\n%s", job, d, log)
		}
	}
	issues := p.gl.Issues()
	if len(issues) != 1 || issues[0].State != "opened" || issues[0].Title != "Drift in run file gantry.yaml, unit app-b (gantry)" ||
		!strings.Contains(issues[0].Description, ".data.greeting") {
		t.Errorf("drift issues: %+v", issues)
	}
	if cm, err := env.Client.CoreV1().ConfigMaps(p.appNS).Get(ctx, "b", metav1.GetOptions{}); err != nil || cm.Data["greeting"] != "by hand" {
		t.Errorf("after the schedule, ConfigMap b holds %v (%v), want the change by hand kept", cm.Data, err)
	}

	// The same plan with a needs removed by hand: app-a's job no longer
	// waits for base's, and the check of the order catches it.
	t.Run("a needs removed", func(t *testing.T) {
		var doc map[string]any
		if err := yaml.Unmarshal(plan, &doc); err != nil {
			t.Fatal(err)
		}
		job, _ := doc["gantry-app-a"].(map[string]any)
		if _, ok := job["needs"]; !ok {
			t.Fatal("gantry-app-a has no needs to remove")
		}
		delete(job, "needs")
		broken, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		p := newGitLabProject(t, bin, planParent(t), nil)
		v := orderViolations(t, p.child(t, broken, "push"))
		if !slices.ContainsFunc(v, func(s string) bool { return strings.HasPrefix(s, "app-a") }) {
			t.Errorf("with gantry-app-a's needs removed, the check found nothing about app-a: %v", v)
		}
		t.Logf("with gantry-app-a's needs removed: %s", strings.Join(v, "; "))
	})
}

// The GitLab template on the same three-unit run file, given as
// GANTRY_RUN_FILE at the top of .gitlab-ci.yml, run by gitlab-ci-local's
// Docker executor as GitLab runs a pipeline of each source: only the job
// the template's rules pick runs. On the default branch gantry-apply
// applies the three units in one run, each after those it depends on; on a
// merge request gantry-diff diffs them, in one note for the run file; on
// a schedule gantry-drift reports app-b's drift in one issue and puts
// nothing back.
func TestImageRunsTheGitLabTemplate(t *testing.T) {
	image := imageUnderTest(t)
	env.Require(t)
	bin := gitlabCILocal(t)
	asRelease(t, image)
	ctx := context.Background()
	p := newGitLabProject(t, bin, "include:\n  - local: gantry.gitlab-ci.yml\nvariables:\n  GANTRY_RUN_FILE: gantry.yaml\n",
		map[string]string{"gantry.gitlab-ci.yml": readText(t, "../ci/gitlab/gantry.gitlab-ci.yml")})

	push := p.run(t, "", []string{"CI_PIPELINE_SOURCE=push"})
	if push.code != 0 || !slices.Equal(push.ran(""), []string{"gantry-apply"}) {
		t.Fatalf("the pipeline on the default branch: exit %d, ran %v", push.code, push.ran(""))
	}
	rep := push.report(t, "gantry-apply")
	if rep == nil {
		t.FailNow()
	}
	finished := map[string]time.Time{}
	for _, u := range rep.Units {
		finished[u.Name] = u.Finished
		if u.Reason != result.ReasonSucceeded {
			t.Errorf("%s: %s: %s", u.Name, u.Reason, u.Message)
		}
	}
	for _, u := range rep.Units {
		for _, dep := range planUnits[u.Name] {
			if f, ok := finished[dep]; !ok || u.Started.Before(f) {
				t.Errorf("%s started at %s, before %s finished (%s)", u.Name, u.Started.Format(time.RFC3339Nano), dep, f.Format(time.RFC3339Nano))
			}
		}
	}
	if len(rep.Units) != 3 || rep.Command != "apply" {
		t.Errorf("gantry %s of %d units", rep.Command, len(rep.Units))
	}
	if d := push.dotenv(t, "gantry-apply"); d["GANTRY_REASON"] != string(result.ReasonSucceeded) || d["GANTRY_CREATED"] != "4" || d["GANTRY_APP_A_REASON"] != string(result.ReasonSucceeded) {
		t.Errorf("gantry-apply's dotenv report: %v", d)
	}
	if log := push.log(t, "gantry-apply"); !strings.Contains(log, "gantry apply: ReconciliationSucceeded: 3 units") {
		t.Errorf("gantry-apply's log:\n%s", log)
	}
	for inv, id := range map[string]string{"base": p.appNS + "_web_apps_Deployment", "app-a": p.appNS + "_a__ConfigMap", "app-b": p.appNS + "_b__ConfigMap"} {
		if got := inventoryIDs(t, p.ns, inv); !slices.Contains(got, id) {
			t.Errorf("inventory %s lists %v, not %s", inv, got, id)
		}
	}

	p.git(t, "checkout", "-q", "-b", "feature")
	replaceInFile(t, filepath.Join(p.repo, "apps/a/a.yaml"), "greeting: hello", "greeting: hola")
	p.commit(t, "a change")
	mr := p.run(t, "", []string{"CI_PIPELINE_SOURCE=merge_request_event", "CI_MERGE_REQUEST_IID=9"})
	if mr.code != 0 || !slices.Equal(mr.ran(""), []string{"gantry-diff"}) {
		t.Fatalf("the pipeline on a merge request: exit %d, ran %v", mr.code, mr.ran(""))
	}
	if log := mr.log(t, "gantry-diff"); !strings.Contains(log, "+  greeting: hola") || !strings.Contains(log, "gantry diff: Progressing: 3 units") {
		t.Errorf("gantry-diff's log:\n%s", log)
	}
	if notes := p.gl.Notes(); len(notes) != 1 || !strings.HasPrefix(notes[0].Body, "<!-- gantry:comment run-file=gantry.yaml -->\n") || !strings.Contains(notes[0].Body, "+  greeting: hola") {
		t.Errorf("merge request notes: %+v", notes)
	}
	if cm, err := env.Client.CoreV1().ConfigMaps(p.appNS).Get(ctx, "a", metav1.GetOptions{}); err != nil || cm.Data["greeting"] != "hello" {
		t.Errorf("after the merge request's diff, ConfigMap a holds %v (%v), want hello", cm.Data, err)
	}
	p.git(t, "checkout", "-q", "main")

	cm, err := env.Client.CoreV1().ConfigMaps(p.appNS).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "by hand"
	if _, err := env.Client.CoreV1().ConfigMaps(p.appNS).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	sched := p.run(t, "", []string{"CI_PIPELINE_SOURCE=schedule"})
	if !failedWithDriftOnly(sched, "gantry-drift") || !slices.Equal(sched.ran(""), []string{"gantry-drift"}) {
		t.Fatalf("the pipeline on a schedule: exit %d, ran %v", sched.code, sched.ran(""))
	}
	if d := sched.dotenv(t, "gantry-drift"); d["GANTRY_REASON"] != string(result.ReasonDriftDetected) || d["GANTRY_APP_B_REASON"] != string(result.ReasonDriftDetected) || d["GANTRY_APP_A_REASON"] != string(result.ReasonNoDrift) {
		t.Errorf("gantry-drift's dotenv report: %v", d)
	}
	if log := sched.log(t, "gantry-drift"); !strings.Contains(log, ".data.greeting changed by kubectl-edit") {
		t.Errorf("gantry-drift's log:\n%s", log)
	}
	if issues := p.gl.Issues(); len(issues) != 1 || issues[0].State != "opened" || issues[0].Title != "Drift in run file gantry.yaml (gantry)" {
		t.Errorf("drift issues: %+v", issues)
	}
	if cm, err := env.Client.CoreV1().ConfigMaps(p.appNS).Get(ctx, "b", metav1.GetOptions{}); err != nil || cm.Data["greeting"] != "by hand" {
		t.Errorf("after the schedule, ConfigMap b holds %v (%v), want the change by hand kept", cm.Data, err)
	}
}
