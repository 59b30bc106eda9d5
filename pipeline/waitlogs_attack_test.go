package pipeline

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gantry-dev/gantry/reporters"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (s *logServer) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// A Secret's values are read once per run and cached by namespace/name:
// when the Secret changes during the wait (rotated by a controller,
// re-created by external-secrets, updated by anyone) and the crash-looping
// container restarts with the new value, the new value is never masked.
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

// A Secret not found at the first look is cached as "nothing to mask" for
// the whole run; created later (an optional ref, an operator that makes it),
// the container restarts with its value and logs it unmasked.
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

// NotFound is taken as "the container could not have read it", but a
// container that ran with a non-optional secretKeyRef was given the
// Secret when it started: a Secret deleted since (pruned by this very run,
// deleted by hand) still has its value in the container's env, and the
// log that prints it is shown unmasked.
func TestAttackDeletedSecretTheContainerWasGivenWithholdsTheLog(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{"tls": secret("tls", nil), "sidecar": secret("sidecar", nil)}, // db: deleted (pruned)
		logs:    map[string]string{"web-0/web/true": "dial postgres as app/pruned-Db-Pass77: refused\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "pruned-Db-Pass77") {
		t.Errorf("the value of a Secret the container was given, now deleted, is said unmasked:\n%s", got)
	}
}

// The mask is the Secret's value now, not the value the container holds:
// a pod started before the Secret was updated (the run applies a new
// value; the old ReplicaSet's pods still crash-loop with the old one, which
// may still be valid) logs the old value unmasked.
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

// Only the Secrets of the crashed container are read; the containers of a
// pod share its volumes. An init container given the Secret (a template
// renderer, a vault agent) writes it to an emptyDir; the app container,
// given no Secret, prints the rendered config when it fails.
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
// (url.UserPassword, url.QueryEscape): no form the Redactor knows.
// An ordinary application, not an attacker, prints it this way.
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

// A container the pull request brings is given a Secret of the namespace
// the author cannot read and prints it hex-encoded (or reversed, or one
// character per line): the mask knows none of these forms, and the PR
// comment publishes it.
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

// Any writer of the namespace can make a Secret whose value is an ordinary
// word and name it in a workload's container (or the pull request's
// Deployment names one): gantry reads it and masks it everywhere from
// then on (and, through Options.Secrets = Session.Decrypted, tells it to
// GitHub's ::add-mask::, which masks it in the rest of the job's log).
// A run file may not mask a value shorter than config.MinMaskLength (8)
// for exactly this reason; a cluster's Secret masks any value of 4 bytes.
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
	red := reporters.NewRedactor()
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

// The run keeps, for its whole length, every log it read, each up to
// 64 KiB (only 300 runes of it are ever said), keyed by a restart count
// that any writer of the pod's status (or a fast crash loop) changes at
// will, with no bound on the entries: up to maxLogReads x 64 KiB per look,
// for every look of a wait that may last the whole timeout.
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

// A Secret that holds a whole file (application.yaml, .env, a
// dockerconfigjson, a kubeconfig) is masked as its lines, "password:
// Sup3r-S3cret-99"; the application logs the password alone, as it uses it.
// Neither the line nor its 16-byte pieces are in the log: unmasked.
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

// A container given secrets through a volume that is no Kubernetes
// Secret (the Secrets Store CSI driver mounting Vault or a cloud secret
// manager, a flexVolume) has secrets no mask knows; its log is shown.
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
	if strings.Contains(got, "v4ult-Db-Passw0rd") {
		t.Errorf("a secret mounted through a CSI secrets-store volume is said unmasked:\n%s", got)
	}
}
