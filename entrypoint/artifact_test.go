package entrypoint

import (
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

func TestDiffArtifact(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/acme/app:v1"
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata:\n  greeting: hello\n")
	write("secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: shop}\nstringData:\n  password: canary-old-7f3\n")
	run := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		code := Run(t.Context(), args, nil, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, _, stderr := run("push", "--path="+dir, "--artifact="+ref); code != 0 {
		t.Fatalf("push: exit %d\n%s", code, stderr)
	}
	if code, out, stderr := run("diff-artifact", "--artifact="+ref, "--compare-to="+dir, "--detailed-exitcode"); code != ExitOK || out != "0 changed, 0 only in "+ref+", 0 only in "+dir+", 2 the same\n" {
		t.Errorf("unchanged: exit %d\n%s%s", code, out, stderr)
	}
	write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata:\n  greeting: hi\n")
	write("secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: shop}\nstringData:\n  password: canary-new-9c2\n")
	code, out, stderr := run("diff-artifact", "--artifact="+ref, "--compare-to="+dir, "--detailed-exitcode")
	if code != ExitChanges {
		t.Fatalf("changed: exit %d, want 3\n%s", code, stderr)
	}
	// The sides are labelled for what they are, and objects come by kind.
	from, to := strings.TrimPrefix(ref, "oci://"), dir
	for _, want := range []string{"--- " + from + "/ConfigMap/shop/settings", "+++ " + to + "/ConfigMap/shop/settings", "-  greeting: hello", "+  greeting: hi", "+  password: '*** (changed)'"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+stderr, "canary") {
		t.Errorf("a Secret value was printed:\n%s", out)
	}
	if strings.Contains(out, "live/") || strings.Index(out, "ConfigMap/shop/settings") > strings.Index(out, "Secret/shop/creds") {
		t.Errorf("sides mislabelled, or objects not sorted by kind:\n%s", out)
	}
	if !strings.Contains(stderr, "2 of 2 objects differ") {
		t.Errorf("stderr: %s", stderr)
	}
	if !strings.HasSuffix(out, "\n2 changed, 0 only in "+ref+", 0 only in "+dir+", 0 the same\n") {
		t.Errorf("no summary line at the end:\n%s", out)
	}
	// For machines: every object with its state, Secret values masked.
	code, out, _ = run("diff-artifact", "--artifact="+ref, "--compare-to="+dir, "-o", "json") // kubectl's shorthand
	var got struct {
		Objects []struct{ Kind, Name, State, Diff string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != ExitOK || len(got.Objects) != 2 || got.Objects[0].State != "changed" || got.Objects[1].Kind != "Secret" || strings.Contains(out, "canary") {
		t.Errorf("json: exit %d, %v:\n%s", code, err, out)
	}
	// Two artifacts.
	ref2 := strings.Replace(ref, ":v1", ":v2", 1)
	if code, _, stderr := run("push", "--path="+dir, "--artifact="+ref2); code != 0 {
		t.Fatalf("push v2: exit %d\n%s", code, stderr)
	}
	if code, out, _ := run("diff-artifact", "--artifact="+ref, "--compare-to="+ref2); code != ExitOK || !strings.Contains(out, "+  greeting: hi") {
		t.Errorf("artifact against artifact: exit %d\n%s", code, out)
	}
}
