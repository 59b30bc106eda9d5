package entrypoint

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/google/go-cmp/cmp"

	"github.com/gantry-dev/gantry/pipeline"
)

func TestPrecedenceFlagInputGantryDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{
		"INPUT_TIMEOUT":              "2m",
		"GANTRY_TIMEOUT":             "3m",
		"GANTRY_CONCURRENCY":         "4",
		"INPUT_INVENTORY-NAMESPACE":  "from-input",
		"GANTRY_INVENTORY_NAMESPACE": "from-gantry",
		"INPUT_PATH":                 dir,
	}
	c, err := Load([]string{"apply", "--timeout=1m", "--inventory=web"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		Timeout     time.Duration
		Concurrency int
		InvNS, Path string
		Prune       bool
	}{c.Timeout, c.Concurrency, c.InventoryNamespace, c.Path, c.Prune}
	want := struct {
		Timeout     time.Duration
		Concurrency int
		InvNS, Path string
		Prune       bool
	}{time.Minute, 4, "from-input", dir, true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestCommandFromInput(t *testing.T) {
	t.Parallel()
	c, err := Load(nil, map[string]string{"INPUT_COMMAND": "diff", "INPUT_PATH": t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Command != "diff" {
		t.Errorf("command %q, want diff", c.Command)
	}
}

func TestBareBoolFlagAndExplicitFalse(t *testing.T) {
	t.Parallel()
	c, err := Load([]string{"apply", "--inventory=x", "--force", "--prune=false", "--path=" + t.TempDir()}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Force || c.Prune {
		t.Errorf("force=%v prune=%v, want true false", c.Force, c.Prune)
	}
}

func TestEveryProblemReportedAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"INPUT_TIMEOUT":       "abc",
		"GANTRY_CONCURRENCY":  "0",
		"INPUT_PRUNE":         "maybe",
		"INPUT_SUBSTITUTE":    "GOOD=1\nnot a pair s3cr3t-value\n",
		"INPUT_HEALTH-CHECKS": "Deployment/web\nnonsense",
	}
	_, err := Load([]string{"apply", "--path=/does/not/exist", "--inventory=Bad_Name"}, env, io.Discard)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"timeout (from INPUT_TIMEOUT)",
		"concurrency (from GANTRY_CONCURRENCY)",
		"prune (from INPUT_PRUNE)",
		"path (from --path): /does/not/exist does not exist",
		"inventory (from --inventory)",
		"substitute (from INPUT_SUBSTITUTE): line 2",
		`health-checks (from INPUT_HEALTH-CHECKS): "nonsense"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "s3cr3t-value") {
		t.Errorf("error echoes a substitute line:\n%s", msg)
	}
}

func TestInventoryRequiredForApplyAndDelete(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"apply", "delete"} {
		_, err := Load([]string{cmd}, map[string]string{"GANTRY_PATH": t.TempDir()}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "inventory (from default): required for "+cmd+": give --inventory NAME (GANTRY_INVENTORY") {
			t.Errorf("%s: %v", cmd, err)
		}
	}
	if _, err := Load([]string{"diff", "--path=" + t.TempDir()}, nil, io.Discard); err != nil {
		t.Errorf("diff without inventory: %v", err)
	}
}

func TestHealthChecksParsed(t *testing.T) {
	t.Parallel()
	c, err := Load([]string{"apply", t.TempDir(), "--inventory=x", "--health-checks=Deployment/apps/web\n# comment\nClusterRole/view", "--health-checks", "Deployment.apps/shop/api"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []pipeline.ObjectRef{{Kind: "Deployment", Namespace: "apps", Name: "web"}, {Kind: "ClusterRole", Name: "view"}, {Kind: "Deployment.apps", Namespace: "shop", Name: "api"}}
	if diff := cmp.Diff(want, c.HealthChecks); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestRevisionFromCI(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GITHUB_SHA": "abc123", "GITHUB_REF_NAME": "main", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r"}
	c, err := Load([]string{"build", "--path=" + t.TempDir()}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Revision != "main@sha1:abc123" || c.Source != "https://github.com/o/r" {
		t.Errorf("revision %q source %q", c.Revision, c.Source)
	}
}

func TestUnknownCommandListsValidOnes(t *testing.T) {
	t.Parallel()
	_, err := Load([]string{"deploy"}, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `"deploy" is not one of build, diff, validate, apply, rollback, history, drift, delete, release, inventory, push, pull, tag, list, inspect, diff-artifact, plan, version`) {
		t.Errorf("got %v", err)
	}
}

func TestExitCodeForInvalidConfig(t *testing.T) {
	t.Parallel()
	var stderr strings.Builder
	code := Run(t.Context(), []string{"apply", "--timeout=abc"}, nil, io.Discard, &stderr)
	if code != ExitInvalid {
		t.Errorf("exit %d, want %d", code, ExitInvalid)
	}
	if !strings.Contains(stderr.String(), "timeout (from --timeout)") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// Two runs must never share a lock holder identity, even in one process.
func TestHolderIsUniquePerRun(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GITHUB_RUN_ID": "42", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r"}
	a, b := holder(env), holder(env)
	if a == b {
		t.Errorf("two runs got the same holder %q", a)
	}
	if !strings.Contains(a, "https://github.com/o/r/actions/runs/42") {
		t.Errorf("holder %q does not link the workflow run", a)
	}
}

func TestSigningInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := []string{"push", "--path=" + dir, "--artifact=oci://127.0.0.1:5000/acme/app:v1"}
	// Keyless signing needs the CI's OIDC identity.
	if _, err := Load(append(base, "--sign=cosign"), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "id-token: write") {
		t.Errorf("keyless without OIDC: %v", err)
	}
	oidc := map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": "https://example/token", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "req-token"}
	c, err := Load(append(base, "--sign=cosign"), oidc, io.Discard)
	if err != nil || c.Sign == nil || c.Sign.KeyRef != "" || c.Sign.FulcioURL != "https://fulcio.sigstore.dev" {
		t.Errorf("keyless with OIDC: %+v, %v", c, err)
	}
	found := false
	for _, s := range c.Secrets {
		found = found || s == "req-token"
	}
	if !found {
		t.Error("the OIDC request token is not masked")
	}
	// Keyless verification needs identity and issuer.
	_, err = Load([]string{"apply", "--artifact=oci://127.0.0.1:5000/acme/app:v1", "--inventory=x", "--verify=cosign"}, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "certificate-identity") || !strings.Contains(err.Error(), "certificate-oidc-issuer") {
		t.Errorf("keyless verify without identity: %v", err)
	}
	if _, err := Load([]string{"apply", "--artifact=oci://127.0.0.1:5000/acme/app:v1", "--inventory=x", "--verify=cosign",
		"--certificate-identity-regexp=^https://github.com/acme/", "--certificate-oidc-issuer=https://token.actions.githubusercontent.com"}, nil, io.Discard); err != nil {
		t.Errorf("keyless verify: %v", err)
	}
	if _, err := Load(append(base, "--sign=gpg"), nil, io.Discard); err == nil || !strings.Contains(err.Error(), `"gpg" is not cosign or empty`) {
		t.Errorf("unknown signer: %v", err)
	}
}

// age-identities and sops-age-key take the key text or a file holding it
// (age-keygen's output, comments included), through flags, INPUT_* and
// GANTRY_* alike; a value that is neither fails without echoing it.
func TestAgeKeysAsFiles(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "keys.txt")
	content := "# created: 2026-11-23T00:00:00Z\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n"
	if err := os.WriteFile(keyFile, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flag text", []string{"apply", "--inventory=x", "--path=" + dir, "--sops-age-key=" + id.String(), "--age-identities=" + id.String()}, nil},
		{"flag file", []string{"apply", "--inventory=x", "--path=" + dir, "--sops-age-key=" + keyFile, "--age-identities=" + keyFile}, nil},
		{"INPUT file", nil, map[string]string{"INPUT_COMMAND": "apply", "INPUT_INVENTORY": "x", "INPUT_PATH": dir, "INPUT_SOPS-AGE-KEY": keyFile, "INPUT_AGE-IDENTITIES": keyFile}},
		{"GANTRY file", []string{"apply", "--inventory=x", "--path=" + dir}, map[string]string{"GANTRY_SOPS_AGE_KEY": keyFile, "GANTRY_AGE_IDENTITIES": keyFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, tc.env, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.SOPSIdentities) != 1 || len(c.AgeIdentities) != 1 {
				t.Fatalf("%d SOPS and %d age identities, want one each", len(c.SOPSIdentities), len(c.AgeIdentities))
			}
			if !slices.ContainsFunc(c.Secrets, func(s string) bool { return strings.Contains(s, id.String()) }) {
				t.Error("the key read from the file is not masked")
			}
		})
	}
	mistyped := "AGE-SECRET-KEX-1QQQCANARY"
	_, err = Load([]string{"apply", "--inventory=x", "--path=" + dir, "--sops-age-key=" + mistyped}, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "sops-age-key") || strings.Contains(err.Error(), "CANARY") {
		t.Errorf("a value that is neither a key nor a file: %v", err)
	}
}

// concurrency is auto by default (start at 64, grow to 1024 far away) or a
// fixed bound; anything else is refused, naming the input.
func TestConcurrencyAutoOrFixed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value       string
		most, start int
		bad         bool
	}{
		{"", 1024, 64, false},
		{"auto", 1024, 64, false},
		{"8", 8, 8, false},
		{"1024", 1024, 1024, false},
		{"0", 0, 0, true},
		{"1025", 0, 0, true},
		{"fast", 0, 0, true},
	} {
		env := map[string]string{"INPUT_PATH": t.TempDir()}
		if tc.value != "" {
			env["GANTRY_CONCURRENCY"] = tc.value
		}
		c, err := Load([]string{"apply", "--inventory=web"}, env, io.Discard)
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), "concurrency") || !strings.Contains(err.Error(), "auto or a whole number from 1 to 1024") {
				t.Errorf("concurrency %q: error %v, want one naming the input and what it takes", tc.value, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("concurrency %q: %v", tc.value, err)
			continue
		}
		if c.Concurrency != tc.most || c.ConcurrencyStart != tc.start {
			t.Errorf("concurrency %q: most %d, start %d; want %d, %d", tc.value, c.Concurrency, c.ConcurrencyStart, tc.most, tc.start)
		}
	}
}

func TestRevisionOffCIIsTheCheckedOutCommit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to make the repository with")
	}
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "first"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "main@sha1:" + strings.TrimSpace(string(out))
	for _, command := range []string{"apply", "diff"} {
		c, err := Load([]string{command, "--path=" + repo, "--inventory=app"}, map[string]string{}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.Revision != want {
			t.Errorf("%s: revision %q, want %q", command, c.Revision, want)
		}
	}
	c, err := Load([]string{"apply", "--path=" + repo, "--inventory=app", "--revision=given"}, map[string]string{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Revision != "given" {
		t.Errorf("revision input: got %q", c.Revision)
	}
}
