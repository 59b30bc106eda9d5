package charts

import (
	"os"
	"regexp"
	"testing"
)

// Every build of gantry tells Helm's packages the Helm version go.mod
// pins, as the helm CLI's build does, so that a chart's
// .Capabilities.HelmVersion is what that helm CLI says: the Makefile
// reads it from go.mod; the Dockerfile and the release workflow name it.
func TestBuildsSetTheHelmVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v4 (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod pins no helm.sh/helm/v4")
	}
	want := "helm.sh/helm/v4/internal/version.version=" + string(m[1])
	for _, f := range []string{"../../Dockerfile", "../../.github/workflows/release.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(regexp.QuoteMeta(want) + `\b`).Match(b) {
			t.Errorf("%s does not set %s", f, want)
		}
	}
}
