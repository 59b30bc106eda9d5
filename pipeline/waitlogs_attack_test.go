package pipeline

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/redact"
)

func (s *logServer) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// A Secret rotated during the wait (by a controller, re-created by
// external-secrets), whose new value the restarted container logs: each
// instance's mask is read for it, so the new value is masked too.
func TestAttackSecretRotatedDuringWaitIsMasked(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{
			"db":      secret("db", map[string]string{"password": "first-Value-0001"}),
			"tls":     secret("tls", nil),
			"sidecar": secret("sidecar", nil),
		},
		logs: map[string]string{"web-0/web/true": "dial as app/first-Value-0001: refused\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "first-Value-0001") {
		t.Fatalf("first look leaked: %s", got)
	}
	// The Secret is rotated; the container restarts with the new value
	// and logs it.
	pod.Status.ContainerStatuses[0].RestartCount++
	srv.set(func() {
		srv.secrets["db"] = secret("db", map[string]string{"password": "second-Value-0002"})
		srv.pods = []corev1.Pod{pod}
		srv.logs["web-0/web/true"] = "dial as app/second-Value-0002: refused\n"
	})
	got = strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "second-Value-0002") {
		t.Errorf("the rotated Secret's value is said unmasked:\n%s", got)
	}
	if !strings.Contains(got, "; last log line: ") {
		t.Errorf("the log is not shown, masked:\n%s", got)
	}
}

// A Secret not there at a first look and created later (an optional
// ref, an operator that makes it), whose value the restarted container
// logs: masked, as the mask is read again for the new instance.
func TestAttackSecretNotFoundThenCreatedIsMasked(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{"tls": secret("tls", nil), "sidecar": secret("sidecar", nil)}, // db: not found yet
		logs:    map[string]string{"web-0/web/true": "no password given\n"}}
	r := logRun(t, srv, 1)
	r.podReasons(context.Background(), set, true)
	pod.Status.ContainerStatuses[0].RestartCount++
	srv.set(func() {
		srv.secrets["db"] = secret("db", map[string]string{"password": "late-Created-Pw9"})
		srv.pods = []corev1.Pod{pod}
		srv.logs["web-0/web/true"] = "dial as app/late-Created-Pw9: refused\n"
	})
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "late-Created-Pw9") {
		t.Errorf("a Secret created after the first look is said unmasked:\n%s", got)
	}
}

// A Secret deleted since the container was given it (pruned by this very
// run, deleted by hand) whose value the container still holds: the log is
// not shown, as no mask can know that value.
func TestAttackDeletedSecretTheContainerWasGivenWithholdsTheLog(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{"tls": secret("tls", nil), "sidecar": secret("sidecar", nil)}, // db: deleted (pruned)
		logs:    map[string]string{"web-0/web/true": "dial postgres as app/pruned-Db-Pass77: refused\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "pruned-Db-Pass77") || !strings.Contains(got, "log not shown: Secret db, which the pod is given, is not there to mask its values") {
		t.Errorf("the value of a Secret the container was given, now deleted, is said unmasked:\n%s", got)
	}
}

// A Secret changed after the pod started (the run applies a new value;
// the old ReplicaSet's pods crash-loop with the old one, which may still
// be valid): the log is not shown, as the pod may hold the earlier value.
func TestAttackOldSecretValueInARunningPodWithholdsTheLog(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	started := metav1.NewTime(time.Now().Add(-time.Hour))
	pod.Status.StartTime = &started
	rotated := secret("db", map[string]string{"password": "new-Rotated-Pw-2"})
	rotated.CreationTimestamp = metav1.NewTime(started.Add(-time.Hour))
	now := metav1.Now()
	rotated.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "gantry", Operation: metav1.ManagedFieldsOperationApply, Time: &now}}
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{
			"db":      rotated,
			"tls":     secret("tls", nil),
			"sidecar": secret("sidecar", nil),
		},
		logs: map[string]string{"web-0/web/true": "dial as app/old-Still-Valid-1: refused\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "old-Still-Valid-1") || !strings.Contains(got, "log not shown: Secret db changed after the pod started") {
		t.Errorf("the value the container was given (the Secret's earlier one) is said unmasked:\n%s", got)
	}
}

// An init container given a Secret (a template renderer, a vault agent)
// writes it to an emptyDir; the app container, given none, prints the
// rendered config when it fails: every Secret of the pod masks its log.
func TestAttackSecretSharedThroughEmptyDirIsMasked(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	pod.Spec = corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "render",
			Env:          []corev1.EnvVar{{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/conf"}}}},
		Containers: []corev1.Container{{Name: "web", VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/conf"}}}},
		Volumes:    []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{"db": secret("db", map[string]string{"password": "rendered-Pw-4242"})},
		logs:    map[string]string{"web-0/web/true": "bad config /conf/app.ini: password = rendered-Pw-4242\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "rendered-Pw-4242") {
		t.Errorf("a Secret of the pod's init container, shared through a volume, is said unmasked:\n%s", got)
	}
	if !strings.Contains(got, "; last log line: ") {
		t.Errorf("the log is not shown, masked:\n%s", got)
	}
}

// A password with URL-special characters, as every DSN writes it
// (url.UserPassword, url.QueryEscape), which an ordinary application
// prints: masked in its escaped forms.
func TestAttackURLEncodedSecretIsMasked(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	pw := "s3cr3t/p@ss+w0rd"
	dsn := (&url.URL{Scheme: "postgres", User: url.UserPassword("app", pw), Host: "db:5432", Path: "/shop"}).String()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{"db": secret("db", map[string]string{"password": pw}), "tls": secret("tls", nil), "sidecar": secret("sidecar", nil)},
		logs:    map[string]string{"web-0/web/true": "failed to connect to " + dsn + ": connection refused\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	enc := url.QueryEscape(pw) // s3cr3t%2Fp%40ss%2Bw0rd; the DSN holds s3cr3t%2Fp@ss+w0rd or similar
	if strings.Contains(got, "s3cr3t") {
		t.Errorf("the password in its URL-encoded form (%s) is said unmasked:\n%s", enc, got)
	}
	if !strings.Contains(got, "; last log line: ") {
		t.Errorf("the log is not shown, masked:\n%s", got)
	}
}

// A container the pull request brings prints, hex-encoded, a Secret of
// the namespace it is given: masked in that form too.
func TestAttackHexEncodedSecretIsMasked(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	pw := "prod-Db-Password"
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{"db": secret("db", map[string]string{"password": pw}), "tls": secret("tls", nil), "sidecar": secret("sidecar", nil)},
		logs:    map[string]string{"web-0/web/true": "x " + hex.EncodeToString([]byte(pw)) + "\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, hex.EncodeToString([]byte(pw))) {
		t.Errorf("the Secret, hex-encoded, is said:\n%s", got)
	}
	if !strings.Contains(got, "; last log line: ") {
		t.Errorf("the log is not shown, masked:\n%s", got)
	}
}

// Any writer of the namespace can make a Secret whose values are ordinary
// words and give it to a workload's container: its values mask that
// container's log alone, not the wait's own words nor the rest of the
// run's output (nor are they told to GitHub's ::add-mask::).
func TestAttackClusterSecretDoesNotMaskTheRunsWords(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{
			"db":      secret("db", map[string]string{"a": "exit code", "b": "Error", "c": "Deployment"}),
			"tls":     secret("tls", nil),
			"sidecar": secret("sidecar", nil),
		},
		logs: map[string]string{"web-0/web/true": "boom\n"}}
	red := redact.New()
	r := logRun(t, srv, 1)
	r.opts.Mask, r.opts.Secrets, r.opts.Build.SecretValues = red.String, func(v []string) { red.Add(v...) }, func(v []string) { red.Add(v...) }
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if !strings.Contains(got, "last ended Error, exit code 1") {
		t.Errorf("the wait's own words are masked by a cluster Secret's values:\n%s", got)
	}
	if m := red.String("Deployment/shop/web failed"); m != "Deployment/shop/web failed" {
		t.Errorf("every later output masks ordinary words: %q", m)
	}
}

// Restart counts are any status writer's to change, and a crash loop
// changes them too: what the run keeps of the logs it read stays bounded
// however many instances it sees.
func TestAttackLogCacheIsBounded(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	line := strings.Repeat("y", 3000) + "\n"
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{"db": secret("db", nil), "tls": secret("tls", nil), "sidecar": secret("sidecar", nil)},
		logs:    map[string]string{"web-0/web/true": strings.Repeat(line, 20)}}
	r := logRun(t, srv, 20)
	const looks = 40
	for i := range looks {
		pod.Status.ContainerStatuses[0].RestartCount = int32(100 + i)
		srv.set(func() { srv.pods = []corev1.Pod{pod} })
		r.podReasons(context.Background(), set, true)
	}
	held := 0
	for _, c := range r.logs.said {
		held += len(c)
	}
	t.Logf("%d entries, %d bytes held", len(r.logs.said), held)
	if held > 64<<10 {
		t.Errorf("after %d looks the run holds %d entries, %s of log text, of which at most %d runes each are ever said",
			looks, len(r.logs.said), fmt.Sprintf("%d KiB", held>>10), maxCauseLen)
	}
}

// A Secret that holds a whole file (application.yaml, a
// dockerconfigjson) whose fields the application logs alone, as it uses
// them: each field is masked.
func TestAttackSecretFileFieldIsMasked(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{
			"db":      secret("db", map[string]string{"application.yaml": "db:\n  host: db\n  user: app\n  password: Sup3r-S3cret-99\n"}),
			"tls":     secret("tls", map[string]string{".dockerconfigjson": `{"auths":{"ghcr.io":{"username":"bot","password":"ghp_R3gistryT0ken"}}}`}),
			"sidecar": secret("sidecar", nil),
		},
		logs: map[string]string{"web-0/web/true": "login ghcr.io bot:ghp_R3gistryT0ken ok; connect app@db (pw=Sup3r-S3cret-99): refused\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "Sup3r-S3cret-99") || strings.Contains(got, "ghp_R3gistryT0ken") {
		t.Errorf("a field of a Secret's file is said unmasked:\n%s", got)
	}
	if !strings.Contains(got, "; last log line: ") {
		t.Errorf("the log is not shown, masked:\n%s", got)
	}
}

// A container given secrets through a volume that is no Kubernetes Secret
// (the Secrets Store CSI driver mounting Vault or a cloud secret manager,
// a flexVolume): no mask knows them, so the log is not shown.
func TestAttackCSISecretsStoreVolumeWithholdsTheLog(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	pod.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{Name: "web", VolumeMounts: []corev1.VolumeMount{{Name: "vault", MountPath: "/mnt/secrets"}}}},
		Volumes: []corev1.Volume{{Name: "vault", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "vault-db"}}}}},
	}
	srv := &logServer{t: t, pods: []corev1.Pod{pod}, secrets: map[string]*corev1.Secret{},
		logs: map[string]string{"web-0/web/true": "read /mnt/secrets/db-password: v4ult-Db-Passw0rd, connect failed\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "v4ult-Db-Passw0rd") || !strings.Contains(got, "log not shown: the pod mounts volume vault through a driver (secrets-store.csi.k8s.io)") {
		t.Errorf("a secret mounted through a CSI secrets-store volume is said unmasked:\n%s", got)
	}
}
