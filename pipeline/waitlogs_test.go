package pipeline

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/redact"
	"github.com/gantry-dev/gantry/sources"
)

// logServer is an API server of one namespace's pods, Secrets and
// containers' logs, as kube-apiserver answers them (a log is the
// kubelet's, cut at limitBytes), which records the reads made.
type logServer struct {
	t       *testing.T
	pods    []corev1.Pod
	secrets map[string]*corev1.Secret // nil: forbidden
	logs    map[string]string         // by pod/container/previous
	mu      sync.Mutex
	reads   []string
}

func (s *logServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	s.reads = append(s.reads, req.URL.Path+"?"+req.URL.RawQuery)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	const ns = "/api/v1/namespaces/shop/"
	path, ok := strings.CutPrefix(req.URL.Path, ns)
	if !ok || req.Method != http.MethodGet {
		http.Error(w, "unexpected", http.StatusNotFound)
		return
	}
	q := req.URL.Query()
	switch {
	case path == "pods":
		_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: s.pods})
	case path == "events":
		_ = json.NewEncoder(w).Encode(corev1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}})
	case strings.HasPrefix(path, "secrets/"):
		name := strings.TrimPrefix(path, "secrets/")
		sec, known := s.secrets[name]
		switch {
		case !known:
			failWith(w, http.StatusNotFound, metav1.StatusReasonNotFound)
		case sec == nil:
			failWith(w, http.StatusForbidden, metav1.StatusReasonForbidden)
		default:
			_ = json.NewEncoder(w).Encode(sec)
		}
	case strings.HasPrefix(path, "pods/") && strings.HasSuffix(path, "/log"):
		pod := strings.TrimSuffix(strings.TrimPrefix(path, "pods/"), "/log")
		text, known := s.logs[pod+"/"+q.Get("container")+"/"+q.Get("previous")]
		if !known {
			failWith(w, http.StatusBadRequest, metav1.StatusReasonBadRequest)
			return
		}
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n < len(lines) {
			lines = lines[len(lines)-n:]
		}
		out := strings.Join(lines, "")
		if n, err := strconv.Atoi(q.Get("limitBytes")); err == nil && n < len(out) {
			out = out[:n]
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(out))
	default:
		http.Error(w, "unexpected", http.StatusNotFound)
	}
}

func failWith(w http.ResponseWriter, code int, reason metav1.StatusReason) {
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: reason, Code: int32(code)})
}

func (s *logServer) logReads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.reads {
		if strings.Contains(r, "/log?") {
			out = append(out, r)
		}
	}
	return out
}

// logRun is a run of the wait against srv, masking as gantry's output
// does, with lines of log asked for.
func logRun(t *testing.T, srv *logServer, lines int, runSecrets ...string) *run {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	red := redact.New(runSecrets...)
	add := func(v []string) { red.Add(v...) }
	r := newRun("apply", Options{PodLogLines: lines, Mask: red.String, Secrets: add, Build: sources.BuildOptions{SecretValues: add}}, nil, &infos{})
	r.clients = &kube.Clients{Kube: kubernetes.NewForConfigOrDie(&rest.Config{Host: hs.URL, QPS: 1000, Burst: 1000})}
	return r
}

// webSet is a StatefulSet whose pod web-0 crash-loops, given Secret db
// through its env, Secret tls through a mounted volume and Secret sidecar
// through one it does not mount.
func webSet() (*unstructured.Unstructured, corev1.Pod) {
	set := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "uid-web"},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
	}}
	pod := crashingPod("web-0", "10s")
	pod.UID = "uid-web-0"
	pod.Status.ContainerStatuses[0].RestartCount = 3
	controlledBy(&pod, set)
	pod.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{Name: "web",
			Env:          []corev1.EnvVar{{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}}}},
		Volumes: []corev1.Volume{
			{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}}}}}},
			// Not mounted by web: a container of the pod could write
			// it to a volume they share.
			{Name: "other", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sidecar"}}},
		},
	}
	return set, pod
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// A crash loop's last log line is said when the workflow asks for it,
// read from the container's earlier instance, with the values of the
// Secrets the container is given masked: the run did not hold them.
func TestCrashLoopSaysItsLastLogLineMasked(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{
			"db":      secret("db", map[string]string{"password": "hunter2-Zq9"}),
			"tls":     secret("tls", map[string]string{"tls.key": "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\n-----END KEY-----"}),
			"sidecar": secret("sidecar", nil),
		},
		logs: map[string]string{"web-0/web/true": "starting\nusing MIIEvQIBADANBgkq\ndial db:5432 as app/hunter2-Zq9: db-42-unreachable\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	want := "1 pod waiting in container web (CrashLoopBackOff): last ended Error, exit code 1; last log line: dial db:5432 as app/***: db-42-unreachable"
	if got != want {
		t.Errorf("causes:\n%s\nwant %q", got, want)
	}
	reads := srv.logReads()
	if len(reads) != 1 || !strings.Contains(reads[0], "container=web") || !strings.Contains(reads[0], "previous=true") || !strings.Contains(reads[0], "tailLines=1") {
		t.Errorf("log reads %q, want one of web's earlier instance, its last line", reads)
	}
	read := false
	for _, r := range srv.reads {
		read = read || strings.Contains(r, "/secrets/sidecar")
	}
	if !read {
		t.Errorf("Secret sidecar, of a volume web does not mount, was not read: the pod's containers share their volumes")
	}

	// Three lines: the tls key's line among them is masked too.
	srv.logs["web-0/web/true"] = "using MIIEvQIBADANBgkq\nretrying\ngiving up\n"
	pod.Status.ContainerStatuses[0].RestartCount = 4
	srv.pods = []corev1.Pod{pod}
	r3 := logRun(t, srv, 3)
	got = strings.Join(r3.podReasons(context.Background(), set, true), "\n")
	if !strings.HasSuffix(got, "exit code 1; last 3 log lines: using *** | retrying | giving up") {
		t.Errorf("causes:\n%s\nwant its last three lines, the key's masked", got)
	}
}

// The wait looks every second: a container's earlier instance logs no
// more, so its log is read once.
func TestALogIsReadOncePerInstance(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod}, secrets: map[string]*corev1.Secret{"db": secret("db", nil), "tls": secret("tls", nil), "sidecar": secret("sidecar", nil)},
		logs: map[string]string{"web-0/web/true": "db-42-unreachable\n"}}
	r := logRun(t, srv, 1)
	for range 3 {
		r.podReasons(context.Background(), set, true)
	}
	if n := len(srv.logReads()); n != 1 {
		t.Errorf("%d log reads of one instance, want 1", n)
	}
	// Restarted: a new instance, read again.
	pod.Status.ContainerStatuses[0].RestartCount++
	srv.mu.Lock()
	srv.pods = []corev1.Pod{pod}
	srv.mu.Unlock()
	r.podReasons(context.Background(), set, true)
	if n := len(srv.logReads()); n != 2 {
		t.Errorf("%d log reads after a restart, want 2", n)
	}
}

// Without the workflow asking, no log is read at all.
func TestNoLogIsReadUnlessAsked(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod}, secrets: map[string]*corev1.Secret{}, logs: map[string]string{"web-0/web/true": "db-42-unreachable\n"}}
	r := logRun(t, srv, 0)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if strings.Contains(got, "db-42") || len(srv.logReads()) != 0 {
		t.Errorf("causes %q after %q: a log read that was not asked for", got, srv.logReads())
	}
	for _, r := range srv.reads {
		if strings.Contains(r, "/secrets/") {
			t.Errorf("read %s unasked", r)
		}
	}
}

// A Secret the container is given that gantry cannot read cannot mask
// the log: the log is not read, and the line says why.
func TestALogIsNotShownWhenItsSecretsCannotBeRead(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	srv := &logServer{t: t, pods: []corev1.Pod{pod},
		secrets: map[string]*corev1.Secret{"db": nil, "tls": secret("tls", nil), "sidecar": secret("sidecar", nil)},
		logs:    map[string]string{"web-0/web/true": "dial as app/hunter2-Zq9: db-42-unreachable\n"}}
	r := logRun(t, srv, 1)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	want := "1 pod waiting in container web (CrashLoopBackOff): last ended Error, exit code 1; log not shown: Secret db, which the pod is given, could not be read to mask its values (forbidden)"
	if !strings.Contains(got, want) || strings.Contains(got, "hunter2") || len(srv.logReads()) != 0 {
		t.Errorf("causes:\n%s\nafter log reads %q; want %q and no read", got, srv.logReads(), want)
	}
}

// A log cut at the read's bound ends inside a line: that line is not
// shown, as cutting it could cut a secret the mask then misses.
func TestALogsCutLineIsNotShown(t *testing.T) {
	t.Parallel()
	set, pod := webSet()
	long := strings.Repeat("x", maxLogBytes)
	srv := &logServer{t: t, pods: []corev1.Pod{pod}, secrets: map[string]*corev1.Secret{"db": secret("db", nil), "tls": secret("tls", nil), "sidecar": secret("sidecar", nil)},
		logs: map[string]string{"web-0/web/true": "first\nsecond " + long + "\n"}}
	r := logRun(t, srv, 2)
	got := strings.Join(r.podReasons(context.Background(), set, true), "\n")
	if !strings.HasSuffix(got, "exit code 1; last 2 log lines: first") || strings.Contains(got, "second") {
		t.Errorf("causes:\n%.300s\nwant the whole line alone", got)
	}
	srv.logs["web-0/web/true"] = long + long + "\n"
	pod.Status.ContainerStatuses[0].RestartCount++
	srv.pods = []corev1.Pod{pod}
	got = strings.Join(logRun(t, srv, 1).podReasons(context.Background(), set, true), "\n")
	if !strings.HasSuffix(got, "exit code 1; last log line longer than 64 KiB, not shown") || strings.Contains(got, "xxxx") {
		t.Errorf("causes:\n%.300s\nwant the line said too long", got)
	}
}
