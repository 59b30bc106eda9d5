// Package cluster starts and stops the Kubernetes clusters that gantry's
// integration and end-to-end tests run against.
//
// Three providers sit behind one interface:
//
//   - local: a real control plane (etcd, kube-apiserver,
//     kube-controller-manager, kube-scheduler) with kwok playing the kubelet
//     of fake nodes, all built by `make tools` into bin/. No container engine
//     is needed. This is the default.
//   - kind: a kind cluster, for machines where a Docker engine answers (the
//     GitHub workflows).
//   - existing: whatever KUBECONFIG points at, used as is and never torn down.
//
// The provider is chosen by the GANTRY_TEST_CLUSTER environment variable.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// EnvProvider names the environment variable that selects the provider.
const EnvProvider = "GANTRY_TEST_CLUSTER"

// EnvBinDir names the environment variable that points at the directory
// holding the control-plane binaries; by default the bin/ directory at the
// root of this module is used.
const EnvBinDir = "GANTRY_BIN_DIR"

// Provider starts clusters of one kind.
type Provider interface {
	// Name is the value of GANTRY_TEST_CLUSTER that selects this provider.
	Name() string
	// Start brings a cluster up and returns once it can run workloads: the
	// API server answers, at least one node is Ready and the default
	// service account exists. If Start fails, nothing it started is left
	// running.
	Start(ctx context.Context, opts Options) (*Cluster, error)
}

// Options tune a cluster. The zero value is a good default.
type Options struct {
	// Name distinguishes clusters (kind cluster name, data dir prefix).
	Name string
	// Nodes is the number of worker nodes to register (local provider: kwok
	// nodes). Default 1.
	Nodes int
	// BinDir holds the binaries built by `make tools` (local provider).
	// Default: $GANTRY_BIN_DIR, else bin/ at the module root.
	BinDir string
	// Logf, when set, receives one line per step of start-up and teardown.
	Logf func(format string, args ...any)
	// ControlPlaneOnly starts etcd and kube-apiserver only (local
	// provider): enough for tests that write objects but run no
	// workloads, and quick to start. Namespaces cannot finish deleting
	// without the controller manager.
	ControlPlaneOnly bool
	// Profiling serves the API server's /debug/pprof (local provider),
	// for `kubectl get --raw /debug/pprof/profile?seconds=N`.
	Profiling bool
	// RealNode adds, beside the kwok nodes, a node run by a real kubelet
	// (local provider), with containerd, runc and the CNI plugins of the
	// machine's packages, pulling only from a registry of its own. It is
	// tainted: only pods that tolerate it (OnRealNode) run there. `make
	// node-tools` builds and installs what it needs.
	RealNode bool
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = "gantry"
	}
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Process is one operating-system process that a cluster started.
type Process struct {
	Name  string
	PID   int
	Ports []int // TCP ports it listens on, as configured
}

// Cluster is a running cluster.
type Cluster struct {
	// Provider is the name of the provider that started it.
	Provider string
	// RESTConfig reaches the cluster with full (cluster-admin) rights.
	RESTConfig *rest.Config
	// Kubeconfig is the path of a kubeconfig file with the same identity,
	// for kubectl and for gantry itself.
	Kubeconfig string
	// DataDir holds everything the cluster wrote (local provider); it is
	// removed on Stop.
	DataDir string
	// Processes lists what the local provider started; empty otherwise.
	Processes []Process
	// ServingCert and ServingKey are the API server's TLS certificate (for
	// 127.0.0.1, signed by the cluster's CA) and key: a test proxy in front
	// of the API server can serve with them (local provider only).
	ServingCert, ServingKey string
	// RealNode describes the real node, when Options.RealNode started one.
	RealNode *RealNode

	apiServer *apiServerControl

	stop     func(ctx context.Context) error
	stopOnce sync.Once
	stopErr  error
}

// Stop tears the cluster down and waits until every process it started has
// exited. It is safe to call more than once and from several goroutines
// (a signal handler and the normal end of a test run): later calls wait for
// the first to finish.
func (c *Cluster) Stop(ctx context.Context) error {
	if c == nil || c.stop == nil {
		return nil
	}
	c.stopOnce.Do(func() { c.stopErr = c.stop(ctx) })
	return c.stopErr
}

// ErrUnsupported says that a provider cannot do what was asked.
var ErrUnsupported = errors.New("not supported by this cluster provider")

// KillAPIServer kills kube-apiserver outright (SIGKILL, as a crash or an
// out-of-memory kill does) and returns once it has exited. Local provider
// only; others return ErrUnsupported.
func (c *Cluster) KillAPIServer() error {
	if c.apiServer == nil {
		return fmt.Errorf("killing the API server: %w (%s)", ErrUnsupported, c.Provider)
	}
	return c.apiServer.kill()
}

// StartAPIServer starts kube-apiserver again, with the flags it first ran
// with, and returns once it is ready. Local provider only.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if c.apiServer == nil {
		return fmt.Errorf("starting the API server: %w (%s)", ErrUnsupported, c.Provider)
	}
	return c.apiServer.start(ctx)
}

var providers = map[string]func() Provider{
	"local":    func() Provider { return &Local{} },
	"kind":     func() Provider { return &Kind{} },
	"existing": func() Provider { return &Existing{} },
}

// For returns the provider with the given name; the error lists the valid
// names.
func For(name string) (Provider, error) {
	if f, ok := providers[name]; ok {
		return f(), nil
	}
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("unknown cluster provider %q (valid: %s)", name, strings.Join(names, ", "))
}

// FromEnv returns the provider named by GANTRY_TEST_CLUSTER, "local" when it
// is unset.
func FromEnv() (Provider, error) {
	name := os.Getenv(EnvProvider)
	if name == "" {
		name = "local"
	}
	p, err := For(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvProvider, err)
	}
	return p, nil
}
