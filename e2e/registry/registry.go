// Package registry runs a real container registry for end-to-end tests:
// Debian's docker-registry (the CNCF distribution registry), installed by
// `make tools`, on a free loopback port with htpasswd (bcrypt) auth and a
// temporary storage directory. Nothing outlives Stop.
package registry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Binary is where Debian's package installs the registry.
const Binary = "/usr/bin/docker-registry"

// Registry is a running registry.
type Registry struct {
	// Host is 127.0.0.1:port.
	Host               string
	Username, Password string

	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// Start runs a registry that requires Username and Password.
func Start(ctx context.Context) (*Registry, error) { return start(ctx, true) }

// StartOpen runs a registry that asks for no credentials (Username and
// Password are empty): what a container runtime pulls from without being
// given any.
func StartOpen(ctx context.Context) (*Registry, error) { return start(ctx, false) }

func start(ctx context.Context, withAuth bool) (*Registry, error) {
	bin := Binary
	if _, err := os.Stat(bin); err != nil {
		p, lookErr := exec.LookPath("docker-registry")
		if lookErr != nil {
			return nil, errors.New("docker-registry is not installed (run make tools)")
		}
		bin = p
	}
	dir, err := os.MkdirTemp("", "gantry-registry-")
	if err != nil {
		return nil, err
	}
	r := &Registry{dir: dir, done: make(chan struct{})}
	if withAuth {
		r.Username, r.Password = "gantry", rand.Text()
	}
	fail := func(err error) (*Registry, error) {
		r.Stop()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r.Host = "127.0.0.1:" + strconv.Itoa(port)

	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
	if err != nil {
		return fail(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(r.Username+":"+string(hash)+"\n"), 0o600); err != nil {
		return fail(err)
	}
	auth := ""
	if withAuth {
		auth = "auth:\n  htpasswd:\n    realm: gantry-test\n    path: " + htpasswd + "\n"
	}
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
%s`, filepath.Join(dir, "data"), r.Host, rand.Text(), auth)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return fail(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return fail(err)
	}
	r.cmd = exec.Command(bin, "serve", cfgPath)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logFile.Close()
		return fail(err)
	}
	go func() {
		_ = r.cmd.Wait()
		logFile.Close()
		close(r.done)
	}()

	// Ready when /v2/ asks for credentials, or answers without.
	ready := http.StatusUnauthorized
	if !withAuth {
		ready = http.StatusOK
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		resp, err := http.Get("http://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == ready {
				return r, nil
			}
		}
		select {
		case <-r.done:
			b, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
			return fail(fmt.Errorf("docker-registry exited: %s", b))
		case <-ctx.Done():
			return fail(fmt.Errorf("docker-registry did not answer on %s", r.Host))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// BlobPath is where the registry stores a blob (sha256:...), so a test
// can tamper with what it serves.
func (r *Registry) BlobPath(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(r.dir, "data", "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}

// Stop ends the registry and removes its storage.
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
	}
	os.RemoveAll(r.dir)
}
