package entrypoint

import (
	"io"
	"strings"
	"testing"
)

// Whatever the flags and INPUT_* values, Load returns a configuration or
// an error, never panics, and never returns both nothing and no error.
func FuzzLoad(f *testing.F) {
	f.Add("apply --inventory=shop --timeout=2m --concurrency=8", "INPUT_PRUNE", "false")
	f.Add("diff --prune false --health-checks=Deployment/apps/web", "INPUT_TIMEOUT", "-1")
	f.Add("push --artifact=oci://ghcr.io/acme/app:v1 --tags=a\nb", "INPUT_SIGN", "cosign")
	f.Add("--no-such-flag", "INPUT_NO-SUCH", "x")
	f.Add("apply --substitute=A=1\nB", "INPUT_MAX-OBJECTS", "0")
	f.Fuzz(func(t *testing.T, args, envName, envValue string) {
		env := map[string]string{envName: envValue}
		cfg, err := Load(strings.Fields(args), env, io.Discard)
		if err == nil && cfg == nil {
			t.Fatal("no configuration and no error")
		}
		if err == nil && (cfg.Timeout <= 0 || cfg.Concurrency < 1 || cfg.MaxFileBytes < 1 || cfg.MaxObjects < 1) {
			t.Fatalf("accepted out-of-range settings: %+v", cfg)
		}
	})
}
