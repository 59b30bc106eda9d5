package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/crane"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/entrypoint"
	"github.com/gantry-dev/gantry/inventory"
)

// registryProxy stands between gantry and a registry and fails the
// requests fail picks: with a 500, or by holding them unanswered.
type registryProxy struct {
	host  string
	mu    sync.Mutex
	fail  func(r *http.Request) string // "", "500" or "hang"
	count map[string]int               // failed requests by "METHOD kind"
}

func newRegistryProxy(t *testing.T, upstream string) *registryProxy {
	t.Helper()
	target, err := url.Parse("http://" + upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &registryProxy{count: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	closing := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		fail := p.fail
		p.mu.Unlock()
		how := ""
		if fail != nil {
			how = fail(r)
		}
		if how != "" {
			p.mu.Lock()
			p.count[r.Method+" "+registryKind(r.URL.Path)]++
			p.mu.Unlock()
		}
		switch how {
		case "500":
			http.Error(w, `{"errors":[{"code":"UNKNOWN","message":"storage backend failed"}]}`, http.StatusInternalServerError)
		case "hang":
			select {
			case <-r.Context().Done():
			case <-closing:
			}
			panic(http.ErrAbortHandler)
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() {
		close(closing)
		srv.CloseClientConnections()
		srv.Close()
	})
	p.host = strings.TrimPrefix(srv.URL, "http://")
	return p
}

func (p *registryProxy) set(fail func(r *http.Request) string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = fail
	p.count = map[string]int{}
}

func (p *registryProxy) failed(what string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count[what]
}

// registryKind names what a registry request addresses.
func registryKind(path string) string {
	switch {
	case strings.Contains(path, "/manifests/"):
		return "manifest"
	case strings.Contains(path, "/blobs/"):
		return "blob"
	}
	return "other"
}

// A registry that fails while gantry pushes, or while it pulls to apply:
// the run fails after a bounded number of retries (or at its timeout,
// when the registry hangs), says which reference and why, leaves the tag
// as it was (a push writes the manifest last, so a failed push changes no
// tag) and applies nothing.
func TestRegistryFailuresLeaveNoHalfWrittenTagAndApplyNothing(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	reg, creds := realRegistry(t)
	proxy := newRegistryProxy(t, reg)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "first"))
	ref := "oci://" + proxy.host + "/acme/app:v1"
	first := gantryAuth(t, creds, "push", "--path="+dir, "--artifact="+ref)
	if first.code != 0 {
		t.Fatalf("first push: exit %d\n%s", first.code, first.stderr)
	}
	tagged := func(tag string) string {
		d, err := crane.Digest(reg+"/acme/app:"+tag, crane.Insecure, crane.WithAuth(registryAuth(creds)))
		if err != nil {
			return ""
		}
		return d
	}

	for _, tc := range []struct {
		name, what string
		fail       func(r *http.Request) string
		args       []string
	}{
		{"manifest-500", "PUT manifest", func(r *http.Request) string {
			if r.Method == http.MethodPut && registryKind(r.URL.Path) == "manifest" {
				return "500"
			}
			return ""
		}, nil},
		{"upload-500", "POST blob", func(r *http.Request) string {
			if r.Method == http.MethodPost && registryKind(r.URL.Path) == "blob" {
				return "500"
			}
			return ""
		}, nil},
		{"hang", "", func(r *http.Request) string {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				return "hang"
			}
			return ""
		}, []string{"--timeout=5s"}},
	} {
		t.Run("push-"+tc.name, func(t *testing.T) {
			// Content of its own: blobs the registry already has are
			// not uploaded again.
			writeFile(t, filepath.Join(dir, "a.yaml"), configMap(ns, "second-"+tc.name))
			proxy.set(tc.fail)
			defer proxy.set(nil)
			start := time.Now()
			for _, tag := range []string{"v1", "v2-" + tc.name} {
				r := gantryAuth(t, creds, append([]string{"push", "--path=" + dir, "--artifact=oci://" + proxy.host + "/acme/app:" + tag}, tc.args...)...)
				if r.code != entrypoint.ExitFailed {
					t.Fatalf("push to %s: exit %d, want %d\n%s", tag, r.code, entrypoint.ExitFailed, r.stderr)
				}
				if !strings.Contains(r.stderr, proxy.host+"/acme/app:"+tag) {
					t.Errorf("the error does not name the reference:\n%s", r.stderr)
				}
			}
			if tc.what != "" {
				// go-containerregistry retries a 500 a bounded number of
				// times: more than once, not without end.
				if n := proxy.failed(tc.what); n < 2 || n > 16 {
					t.Errorf("%d failed %s requests for two pushes, want bounded retries", n, tc.what)
				}
			}
			t.Logf("%s: two failed pushes took %s", tc.name, time.Since(start).Round(time.Millisecond))
			if got := tagged("v1"); got != first.res.Artifact.Digest {
				t.Errorf("tag v1 is %q after the failed push, want the first push's %s", got, first.res.Artifact.Digest)
			}
			if got := tagged("v2-" + tc.name); got != "" {
				t.Errorf("a failed push left tag v2-%s at %s", tc.name, got)
			}
		})
	}

	for _, tc := range []struct {
		name string
		fail func(r *http.Request) string
		args []string
	}{
		{"manifest-500", func(r *http.Request) string {
			if registryKind(r.URL.Path) == "manifest" {
				return "500"
			}
			return ""
		}, nil},
		{"layer-500", func(r *http.Request) string {
			if r.Method == http.MethodGet && registryKind(r.URL.Path) == "blob" {
				return "500"
			}
			return ""
		}, nil},
		{"hang", func(r *http.Request) string { return "hang" }, []string{"--timeout=5s"}},
	} {
		t.Run("apply-"+tc.name, func(t *testing.T) {
			proxy.set(tc.fail)
			defer proxy.set(nil)
			inv := "pull-" + tc.name
			r := gantryAuth(t, creds, append([]string{"apply", "--artifact=" + ref, "--inventory=" + inv, "--inventory-namespace=" + ns}, tc.args...)...)
			if r.code != entrypoint.ExitFailed {
				t.Fatalf("exit %d, want %d\n%s", r.code, entrypoint.ExitFailed, r.stderr)
			}
			if !strings.Contains(r.stderr, proxy.host+"/acme/app") {
				t.Errorf("the error does not name the artifact:\n%s", r.stderr)
			}
			ctx := context.Background()
			if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "first", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("the artifact's ConfigMap was applied: %v", err)
			}
			if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, inventory.ConfigMapName(inv), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("an inventory was written: %v", err)
			}
			t.Logf("%s: failed in %s: %s", tc.name, r.took.Round(time.Millisecond), lastLines(r.stderr, 1))
		})
	}
}

// registryAuth turns realRegistry's flags into credentials for crane.
func registryAuth(creds []string) authn.Authenticator {
	var basic authn.Basic
	for _, c := range creds {
		if v, ok := strings.CutPrefix(c, "--registry-username="); ok {
			basic.Username = v
		}
		if v, ok := strings.CutPrefix(c, "--registry-password="); ok {
			basic.Password = v
		}
	}
	return &basic
}
