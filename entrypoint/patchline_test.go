package entrypoint

import (
	"path/filepath"
	"strings"
	"testing"
)

// A mistake a patch makes is reported in the patch, at the field's line,
// in the console and in GitHub's annotation: a pull request that adds a
// patch gets its annotation on the file it touched, not on the base the
// patch changed. Both kinds of patch file: a strategic merge patch (its
// list elements matched by name) and a JSON patch.
func TestMistakeOfAPatchIsReportedInThePatch(t *testing.T) {
	t.Parallel()
	const base = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
spec:
  selector: {matchLabels: {app: d}}
  template:
    metadata: {labels: {app: d}}
    spec:
      containers:
      - name: sidecar
        image: busybox
      - name: app
        image: nginx
`
	for name, tc := range map[string]struct {
		kustomization, patchFile, patch, want string
	}{
		"strategic merge": {"resources: [../base]\npatches:\n- path: fix.yaml\n", "fix.yaml",
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        imagePullPolicy: Sometimes\n",
			"overlay/fix.yaml:10"},
		"JSON patch": {"resources: [../base]\npatches:\n- path: fix.yaml\n  target: {kind: Deployment, name: d}\n", "fix.yaml",
			"- op: add\n  path: /spec/template/spec/containers/1/imagePullPolicy\n  value: Sometimes\n",
			"overlay/fix.yaml:3"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := writeFiles(t, map[string]string{
				".git/HEAD": "ref: refs/heads/main\n", "base/d.yaml": base, "base/kustomization.yaml": "resources: [d.yaml]\n",
				"overlay/kustomization.yaml": tc.kustomization, "overlay/" + tc.patchFile: tc.patch,
			})
			code, _, stderr := ghRun(t, ws, "validate", "--offline", filepath.Join(ws, "overlay"))
			if code == ExitOK {
				t.Fatalf("valid:\n%s", stderr)
			}
			if !strings.Contains(stderr, tc.want+": spec.template.spec.containers[") || !strings.Contains(stderr, "(overlay/fix.yaml:") && !strings.Contains(stderr, "/overlay/fix.yaml:"+strings.TrimPrefix(tc.want, "overlay/fix.yaml:")+")") {
				t.Errorf("the console does not say %s:\n%s", tc.want, stderr)
			}
			file, line, _ := strings.Cut(tc.want, ":")
			if !strings.Contains(stderr, "file="+file+",line="+line) {
				t.Errorf("the annotation is not on %s:\n%s", tc.want, stderr)
			}
		})
	}
}
