package sources

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// billionLaughs is a ConfigMap whose nested aliases expand to 9^9 strings:
// a few lines that kustomize would expand into gigabytes.
const billionLaughs = `apiVersion: v1
kind: ConfigMap
metadata:
  name: bomb
data:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

// writeFiles writes files into a new folder and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, files)
	return dir
}

// A YAML bomb is refused before kustomize expands it, naming the file,
// wherever the build reads it: a plain folder, a kustomization's
// resource, a patch, the wrapper a target namespace needs.
func TestYAMLBombRefused(t *testing.T) {
	t.Parallel()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n"
	for name, tc := range map[string]struct {
		files map[string]string
		opts  BuildOptions
		file  string
	}{
		"plain folder":     {files: map[string]string{"ok.yaml": cm, "bomb.yaml": billionLaughs}, file: "bomb.yaml"},
		"resource":         {files: map[string]string{"kustomization.yaml": "resources: [app/bomb.yaml]\n", "app/bomb.yaml": billionLaughs}, file: "app/bomb.yaml"},
		"patch":            {files: map[string]string{"kustomization.yaml": "resources: [ok.yaml]\npatches: [{path: bomb.yaml}]\n", "ok.yaml": cm, "bomb.yaml": billionLaughs}, file: "bomb.yaml"},
		"kustomization":    {files: map[string]string{"kustomization.yaml": "resources: [ok.yaml]\n" + strings.Replace(billionLaughs, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n", "", 1), "ok.yaml": cm}, file: "kustomization.yaml"},
		"target namespace": {files: map[string]string{"bomb.yaml": billionLaughs}, opts: BuildOptions{TargetNamespace: "x"}, file: "bomb.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := writeFiles(t, tc.files)
			opts := tc.opts
			opts.Path, opts.WorkDir = dir, dir
			_, err := Build(opts)
			var limit *LimitError
			if !errors.As(err, &limit) || !strings.Contains(err.Error(), tc.file+": its YAML aliases expand out of proportion") {
				t.Errorf("got %v", err)
			}
		})
	}
	// An anchor that contains an alias of itself, hidden behind
	// duplicate keys (found by FuzzManifestDecoding: kustomize recursed
	// until the stack overflowed and the process died).
	for name, data := range map[string]string{
		"self":            "a: &a [*a]\n",
		"behind dup keys": "  0: &b\n  0: &c [*b]\n  0: &d [*b,*b,*b,0000, 0*d,*d]",
		"in a mapping":    "apiVersion: v1\nkind: ConfigMap\nmetadata: &m\n  name: x\n  labels: {loop: *m}\n",
	} {
		dir := writeFiles(t, map[string]string{"loop.yaml": data})
		_, err := Build(BuildOptions{Path: dir, WorkDir: dir})
		var limit *LimitError
		if !errors.As(err, &limit) || !strings.Contains(err.Error(), "loop.yaml: a YAML anchor contains an alias of itself") {
			t.Errorf("%s: got %v", name, err)
		}
	}
	// Anchors and aliases in proportion, as people use them, build.
	dir := writeFiles(t, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n shared\n  labels:\n    app: *n\ndata:\n  a: &v x\n  b: *v\n"})
	objects, err := Build(BuildOptions{Path: dir, WorkDir: dir})
	if err != nil || objects[0].GetLabels()["app"] != "shared" {
		t.Fatalf("anchors in proportion: %v", err)
	}
}

func TestFileAndObjectLimits(t *testing.T) {
	t.Parallel()
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  a: " + strings.Repeat("x", 4096) + "\n"
	dir := writeFiles(t, map[string]string{"big.yaml": big, "small.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: small\n"})
	_, err := Build(BuildOptions{Path: dir, WorkDir: dir, MaxFileBytes: 1024})
	if err == nil || !strings.Contains(err.Error(), "big.yaml: 4161 bytes, over the limit of 1024 bytes for one file (max-file-bytes)") {
		t.Errorf("file limit: %v", err)
	}
	_, err = Build(BuildOptions{Path: dir, WorkDir: dir, MaxObjects: 1})
	if err == nil || !strings.Contains(err.Error(), "2 objects, over the limit of 1 (max-objects)") {
		t.Errorf("object limit: %v", err)
	}
	if objects, err := Build(BuildOptions{Path: dir, WorkDir: dir}); err != nil || len(objects) != 2 {
		t.Errorf("defaults: %d objects, %v", len(objects), err)
	}
}

// A build reads nothing but the workspace: no remote base is fetched
// (nothing is sent over the network), and no file reached through a
// symbolic link out of the workspace is read. A sibling folder inside the
// workspace (an overlay's ../base) keeps working.
func TestBuildStaysInTheWorkspace(t *testing.T) {
	t.Parallel()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base\n"
	for name, tc := range map[string]struct {
		kustomization, want string
	}{
		"git base":  {"resources:\n- github.com/acme/config//base?ref=v1\n", `overlay/kustomization.yaml: "github.com/acme/config//base?ref=v1" is remote; gantry fetches no remote bases unless allow-remote-bases is set`},
		"https":     {"resources: [https://example.com/app.yaml]\n", `"https://example.com/app.yaml" is remote`},
		"component": {"resources: [../base]\ncomponents: [git@github.com:acme/c.git]\n", `"git@github.com:acme/c.git" is remote`},
		// A kustomization reads anywhere in the workspace, as Flux
		// builds, and nothing outside it, links resolved.
		"symlink":       {"resources: [../base, outside.yaml]\n", "overlay/outside.yaml: resolves to "},
		"relative path": {"resources: [../base, ../../outside/secret.yaml]\n", "outside the workspace"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			ws := filepath.Join(parent, "ws")
			write(t, ws, map[string]string{".git/HEAD": "x\n", "base/kustomization.yaml": "resources: [cm.yaml]\n", "base/cm.yaml": cm, "overlay/kustomization.yaml": tc.kustomization})
			outside := filepath.Join(parent, "outside")
			write(t, outside, map[string]string{"secret.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stolen\n"})
			if err := os.Symlink(filepath.Join(outside, "secret.yaml"), filepath.Join(ws, "overlay", "outside.yaml")); err != nil {
				t.Fatal(err)
			}
			_, err := Build(BuildOptions{Path: filepath.Join(ws, "overlay"), WorkDir: ws})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	ws := writeFiles(t, map[string]string{"base/kustomization.yaml": "resources: [cm.yaml]\n", "base/cm.yaml": cm, "overlay/kustomization.yaml": "resources: [../base]\nnamePrefix: prod-\n"})
	objects, err := Build(BuildOptions{Path: filepath.Join(ws, "overlay"), WorkDir: ws})
	if err != nil || len(objects) != 1 || objects[0].GetName() != "prod-base" {
		t.Fatalf("sibling base: %v", err)
	}
}

// The read boundary under kustomize's own: a link that resolves out of
// the workspace is refused, whatever reads it.
func TestBoundedFSRefusesLinksOut(t *testing.T) {
	t.Parallel()
	ws := writeFiles(t, map[string]string{"in.yaml": "a: b\n"})
	outside := writeFiles(t, map[string]string{"secret": "canary"})
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	f := newBoundedFS(workspaceRoot(ws, ws), DefaultMaxFileBytes, nil)
	if _, err := f.ReadFile(filepath.Join(ws, "in.yaml")); err != nil {
		t.Errorf("inside: %v", err)
	}
	var limit *LimitError
	if b, err := f.ReadFile(filepath.Join(ws, "link.yaml")); !errors.As(err, &limit) || b != nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("link out: %q, %v", b, err)
	}
}

// The workspace is the outermost of the path's git repository and the
// working directory holding it: a CI workspace with two checkouts side by
// side can share a base across them.
func TestWorkspaceRoot(t *testing.T) {
	t.Parallel()
	ws := writeFiles(t, map[string]string{"app/.git/HEAD": "ref", "app/deploy/x.yaml": "", "shared/base/x.yaml": ""})
	ws, _ = filepath.EvalSymlinks(ws)
	for _, tc := range []struct{ path, workDir, want string }{
		{"app/deploy", ".", "."},            // CI: the workspace holds both checkouts
		{"app/deploy", "app/deploy", "app"}, // run from inside the repository
		{"shared/base", "app", "shared/base"},
	} {
		got := workspaceRoot(filepath.Join(ws, tc.path), filepath.Join(ws, tc.workDir))
		if want := filepath.Join(ws, tc.want); got != want {
			t.Errorf("path %s from %s: root %s, want %s", tc.path, tc.workDir, got, want)
		}
	}
}

// A plain folder reads a link that stays in the workspace, to a file or a
// folder, as kubectl and kustomize do; a link out of it fails the build
// naming the link; and whatever the folder leaves out is said once.
func TestPlainFolderFollowsLinksInTheWorkspace(t *testing.T) {
	t.Parallel()
	cm := func(name string) string { return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" }
	ws := writeFiles(t, map[string]string{
		".git/HEAD":               "ref: refs/heads/main\n",
		"common/linked.yaml":      cm("linked"),
		"shared/a.yaml":           cm("shared-a"),
		"shared/b.yaml":           cm("shared-b"),
		"apps/web/own.yaml":       cm("own"),
		"apps/web/README.md":      "# web\n",
		"apps/web/.hidden.yaml":   cm("hidden"),
		"apps/web/.config/x.yaml": cm("x"),
	})
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("../../common/linked.yaml", "apps/web/linked.yaml")
	link("../../shared", "apps/web/shared")
	// A link in a loop is walked once, not for ever.
	link(".", "shared/self")
	web := filepath.Join(ws, "apps", "web")
	var skipped [][]string
	objects, err := Build(BuildOptions{Path: web, WorkDir: ws, Skipped: func(f []string) { skipped = append(skipped, f) }})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objects {
		names = append(names, o.GetName()+" from "+o.Source)
	}
	want := []string{"linked from apps/web/linked.yaml", "own from apps/web/own.yaml", "shared-a from shared/a.yaml", "shared-b from shared/b.yaml"}
	if strings.Join(names, "; ") != strings.Join(want, "; ") {
		t.Errorf("built %q, want %q", names, want)
	}
	if len(skipped) != 1 || strings.Join(skipped[0], ", ") != "apps/web/.config/, apps/web/.hidden.yaml, apps/web/README.md" {
		t.Errorf("left out %q, want each hidden or non-manifest file said once", skipped)
	}

	outside := writeFiles(t, map[string]string{"secret.yaml": cm("stolen")})
	for name, target := range map[string]string{"file": filepath.Join(outside, "secret.yaml"), "folder": outside} {
		t.Run(name, func(t *testing.T) {
			ws := writeFiles(t, map[string]string{".git/HEAD": "x\n", "app/own.yaml": cm("own")})
			if err := os.Symlink(target, filepath.Join(ws, "app", "out.yaml")); err != nil {
				t.Fatal(err)
			}
			_, err := Build(BuildOptions{Path: filepath.Join(ws, "app"), WorkDir: ws})
			var be *BuildError
			if !errors.As(err, &be) || be.File != "app/out.yaml" || !strings.Contains(err.Error(), "outside the workspace") {
				t.Errorf("a link out of the workspace: %v, want a build error naming app/out.yaml", err)
			}
		})
	}
}

// A folder linked from its sibling is walked once, also when the path
// given reaches the workspace through a link of its own (a CI workspace
// mounted behind one): the walk compares folders by where they really are.
func TestPlainFolderBehindALinkWalksALinkedFolderOnce(t *testing.T) {
	t.Parallel()
	cm := func(name string) string { return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" }
	ws := writeFiles(t, map[string]string{".git/HEAD": "x\n", "app/base/cm.yaml": cm("base")})
	// "a-link" sorts before "base": the link is walked first.
	if err := os.Symlink("base", filepath.Join(ws, "app", "a-link")); err != nil {
		t.Fatal(err)
	}
	mount := filepath.Join(t.TempDir(), "workspace")
	if err := os.Symlink(ws, mount); err != nil {
		t.Fatal(err)
	}
	objects, err := Build(BuildOptions{Path: filepath.Join(mount, "app"), WorkDir: mount})
	if err != nil {
		t.Fatalf("a folder reached twice, once through a link: %v", err)
	}
	if len(objects) != 1 || objects[0].GetName() != "base" {
		t.Errorf("built %d objects, want the one ConfigMap once", len(objects))
	}
}

// The files that hold the run's credentials are refused to every read,
// whatever names them: a generator, a resource, a link, a hard link, a
// plain folder's walk. The workflow's kubeconfig written into the
// checkout is the case: a pull request's generator would print it.
func TestBuildRefusesCredentialFiles(t *testing.T) {
	t.Parallel()
	const kubeconfig = "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: canary-token-1234}\n"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: placeholder}\n"
	for name, files := range map[string]map[string]string{
		"generator":       {"app/kustomization.yaml": "resources: [cm.yaml]\nconfigMapGenerator:\n- {name: leak, files: [../kubeconfig]}\n", "app/cm.yaml": cm},
		"generator, link": {"app/kustomization.yaml": "resources: [cm.yaml]\nconfigMapGenerator:\n- {name: leak, files: [kc]}\n", "app/cm.yaml": cm, "link app/kc": "../kubeconfig"},
		"hard link":       {"app/kustomization.yaml": "resources: [cm.yaml]\nconfigMapGenerator:\n- {name: leak, files: [kc]}\n", "app/cm.yaml": cm, "hardlink app/kc": "kubeconfig"},
		"resource":        {"app/kustomization.yaml": "resources: [cm.yaml, ../kubeconfig]\n", "app/cm.yaml": cm},
		"plain folder":    {"app/cm.yaml": cm, "link app/kc.yaml": "../kubeconfig"},
	} {
		t.Run(name, func(t *testing.T) {
			ws := t.TempDir()
			write(t, ws, map[string]string{".git/HEAD": "x\n", "kubeconfig": kubeconfig})
			for p, c := range files {
				switch {
				case strings.HasPrefix(p, "link "):
					p = strings.TrimPrefix(p, "link ")
					os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
					if err := os.Symlink(c, filepath.Join(ws, p)); err != nil {
						t.Fatal(err)
					}
				case strings.HasPrefix(p, "hardlink "):
					p = strings.TrimPrefix(p, "hardlink ")
					os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755)
					if err := os.Link(filepath.Join(ws, c), filepath.Join(ws, p)); err != nil {
						t.Fatal(err)
					}
				default:
					write(t, ws, map[string]string{p: c})
				}
			}
			// Without being told, the build reads it (the case this
			// closes); told, it refuses it, naming the file.
			opts := BuildOptions{Path: filepath.Join(ws, "app"), WorkDir: ws}
			if name != "resource" && name != "plain folder" {
				objects, err := Build(opts)
				var all []any
				for _, o := range objects {
					all = append(all, o.Object)
				}
				if err != nil || !strings.Contains(fmt.Sprint(all), "canary-token-1234") {
					t.Fatalf("the build without credential files: %v", err)
				}
			}
			opts.CredentialFiles = []string{filepath.Join(ws, "kubeconfig")}
			objects, err := Build(opts)
			if err == nil || !strings.Contains(err.Error(), "holds credentials this run uses") {
				t.Fatalf("built %d objects (%v), want the kubeconfig refused", len(objects), err)
			}
			if strings.Contains(err.Error(), "canary-token-1234") {
				t.Errorf("the refusal quotes the credential: %v", err)
			}
		})
	}
}

// A folder of credentials (~/.aws, ~/.ssh) refuses every file in it; a
// path that exists yet does not resolve (a link to a deleted file a
// process still holds open, through /proc) is refused, not read.
func TestBuildRefusesCredentialFoldersAndUnresolvablePaths(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: placeholder}\n"
	write(t, ws, map[string]string{".git/HEAD": "x\n", "home/.aws/credentials": "aws-canary-secret\n",
		"app/kustomization.yaml": "resources: [cm.yaml]\nconfigMapGenerator:\n- {name: leak, files: [../home/.aws/credentials]}\n", "app/cm.yaml": cm})
	_, err := Build(BuildOptions{Path: filepath.Join(ws, "app"), WorkDir: ws, CredentialFiles: []string{filepath.Join(ws, "home", ".aws")}})
	if err == nil || !strings.Contains(err.Error(), "holds credentials") || strings.Contains(err.Error(), "aws-canary") {
		t.Errorf("a file in a credential folder: %v", err)
	}

	outside := filepath.Join(t.TempDir(), "held")
	if err := os.WriteFile(outside, []byte("deleted-canary-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(outside)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := os.Remove(outside); err != nil {
		t.Fatal(err)
	}
	ws2 := t.TempDir()
	write(t, ws2, map[string]string{".git/HEAD": "x\n", "app/kustomization.yaml": "resources: [cm.yaml]\nconfigMapGenerator:\n- {name: leak, files: [held]}\n", "app/cm.yaml": cm})
	if err := os.Symlink(fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), held.Fd()), filepath.Join(ws2, "app", "held")); err != nil {
		t.Fatal(err)
	}
	objects, err := Build(BuildOptions{Path: filepath.Join(ws2, "app"), WorkDir: ws2})
	var all []any
	for _, o := range objects {
		all = append(all, o.Object)
	}
	if err == nil || strings.Contains(fmt.Sprint(all), "deleted-canary") || !strings.Contains(err.Error(), "cannot be resolved") {
		t.Errorf("a link to a deleted file still open: %v %v", err, all)
	}
}
