package reporters

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/health"
	"github.com/gantry-dev/gantry/redact"
)

// Attack: ObjectMessage now shows status.phase + ": " + status.phaseReason
// (cluster-written), cut at 4096 bytes BEFORE anything masks it. Text that
// carries a secret value (a controller echoing a spec field the PR filled
// from a secret-named substitution, or anyone who writes status) placed so
// the cut falls inside the value leaves all but its tail in the message;
// the redact.Redactor only knows whole values and their encodings, so the
// prefix is printed (wait progress lines, failure, summary, report).
func TestPhaseReasonCutLeaksSecretPrefixAttack(t *testing.T) {
	secret := "s3cr3t-T0ken-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	r := redact.New(secret)
	phase := "Failed"
	pad := strings.Repeat("x", 4096-len(phase+": ")-len(secret)+4) // cut leaves all but 4 bytes
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
		"metadata": map[string]any{"name": "db", "namespace": "ns"},
		"status":   map[string]any{"phase": phase, "phaseReason": pad + " " + secret},
	}}
	msg := r.String(health.ObjectMessage(u, false))
	if leaked := secret[:len(secret)-5]; strings.Contains(msg, leaked) {
		t.Fatalf("printed message holds %q of the secret (len %d): ...%s", leaked, len(secret), msg[len(msg)-80:])
	}
}

// Attack: a secret with a run of spaces (or a tab) and a character JSON
// escapes for HTML (<, >, &). A message from the cluster is printed on one
// line (result.OneLine collapses the run) and the JSON report is
// json.MarshalIndent (HTML-escaping) then masked. The redact.Redactor knows the
// one-line form and the JSON-escaped form of the raw value, but not the
// JSON-escaped one-line form, so the value is written unmasked.
func TestOneLineThenJSONEscapedSecretLeaksAttack(t *testing.T) {
	secret := "pa<ss  w0rd&Secret"
	r := redact.New(secret)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
		"metadata": map[string]any{"name": "db", "namespace": "ns"},
		"status":   map[string]any{"phase": "Setting up primary", "phaseReason": "bad password " + secret},
	}}
	b, err := json.MarshalIndent(map[string]string{"message": health.ObjectMessage(u, false)}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out := r.String(string(b))
	if strings.Contains(out, "w0rd") {
		t.Fatalf("JSON report holds the secret: %s", out)
	}
}

// The one-line form of a value, as Markdown and HTML text write it.
func TestOneLineThenMarkdownEscapedSecretIsMasked(t *testing.T) {
	secret := "p*ss  w0rd_<Secret>"
	one := "p*ss w0rd_<Secret>"
	r := redact.New(secret)
	for _, escaped := range []string{redact.MarkdownText(one), strings.TrimPrefix(redact.MarkdownText("a"+one), "a"), redact.HTMLText(one)} {
		if out := r.String("probe failed: " + escaped); strings.Contains(out, "w0rd") {
			t.Errorf("%q escaped as %q: %s", secret, escaped, out)
		}
	}
}
