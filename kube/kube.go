// Package kube owns gantry's connection to the Kubernetes API: which
// kubeconfig and context, which identity (impersonating a service account
// bounds what a run may touch), and the client-side rate limits.
package kube

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Options say how to reach the cluster.
type Options struct {
	// Kubeconfig is a kubeconfig file; empty means $KUBECONFIG, then the
	// in-cluster configuration.
	Kubeconfig string
	// Context is the kubeconfig context; empty means the current one.
	Context string
	// ServiceAccount, as namespace/name, is impersonated for every request.
	ServiceAccount string
	// Concurrency is the number of requests gantry keeps in flight; the
	// rate limits are set from it.
	Concurrency int
	// MaxConcurrency, when more than Concurrency, is the most the bound
	// may grow to while answers show that they wait on the wire, not on
	// the server (a cluster in another region); see inFlight.
	MaxConcurrency int
	// Bound, when not nil, is shared with the other runs given it: their
	// requests count against one bound. Nil: the run's own.
	Bound *Bound
	// Trace, when not nil, records every request sent.
	Trace *Trace
}

// Clients are the API clients of one run, sharing one HTTP transport and
// one REST mapper.
type Clients struct {
	Config *rest.Config
	Client client.Client
	Kube   kubernetes.Interface
	// Metadata lists objects without their bodies.
	Metadata metadata.Interface
	Mapper   meta.RESTMapper
	// Fence refuses the run's writes once it may no longer make them.
	Fence *WriteFence

	openapiOnce  sync.Once
	openapiPaths map[string]openapi.GroupVersion
	openapiErr   error

	// mappings caches the REST mappings requests are addressed with: the
	// mapper's own lookup walks several mappers under locks, and a run
	// asks it twice for every object. A kind it does not serve is not
	// cached, so a CRD established later is found.
	mappings sync.Map // schema.GroupVersionKind -> *meta.RESTMapping

	// shared is what these clients share with other runs' on the same
	// cluster: a Cluster of their own when they share nothing.
	shared *Cluster
}

// RESTConfig loads the configuration that opts describe.
func RESTConfig(opts Options) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if opts.Kubeconfig != "" {
		rules.ExplicitPath = opts.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: opts.Context}
	var cfg *rest.Config
	var err error
	if opts.Kubeconfig == "" && os.Getenv("KUBECONFIG") == "" && opts.Context == "" {
		// Neither given: in a pod, the in-cluster configuration; on a
		// laptop, ~/.kube/config.
		if cfg, err = rest.InClusterConfig(); err != nil {
			cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		}
	} else {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	}
	if clientcmd.IsEmptyConfig(err) {
		return nil, noConfig(opts)
	}
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	if opts.Trace != nil {
		// Innermost, below the fence and the retries: what goes on the
		// wire, each retry as a request of its own.
		cfg.Wrap(opts.Trace.wrap)
	}
	if opts.Concurrency > 0 {
		// One bound for the run, its clients made again after new CRDs
		// included (they copy this configuration), and for the other runs
		// given the same Bound.
		bound := opts.Bound
		if bound == nil {
			bound = &Bound{}
		}
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return bound.wrap(rt, opts.Concurrency, opts.MaxConcurrency)
		})
	}
	if opts.ServiceAccount != "" {
		// namespace/name -> system:serviceaccount:namespace:name
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + strings.Replace(opts.ServiceAccount, "/", ":", 1)}
	}
	// client-go's defaults (5 QPS, burst 10) cap a 1000-object apply at
	// minutes, and any token bucket becomes the bottleneck of a concurrent
	// apply (measured: 320 QPS made a no-op of 1000 objects 8x slower than
	// the raw requests). The limit gantry sets is the concurrency: at most
	// that many requests in flight, each stage's workers bounded by it;
	// the API server's priority and fairness protects the server.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "gantry"
	return cfg, nil
}

// Scheme knows the built-in types and CRDs, for typed reads. It is made
// once and shared by every client of the process (building it takes
// about 2 ms of CPU, once per unit of a run file before); nothing adds to
// it.
var Scheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
})

// Connect builds the clients for cfg, with a write fence of their own
// that nothing holds yet.
func Connect(cfg *rest.Config) (*Clients, error) {
	return ConnectTo(cfg, nil)
}

// Cluster is what the runs of one invocation share on one cluster, as
// one identity sees it: the kinds it serves (the REST mapper, which reads
// them from discovery as it needs them), its version, the schemas of its
// built-in kinds, and the bounds on requests in flight. Units on one
// cluster ask for them once, not once each.
type Cluster struct {
	mapperOnce sync.Once
	mapper     meta.RESTMapper
	mapperErr  error

	versionOnce sync.Once
	versionErr  error

	boundsMu sync.Mutex
	bounds   map[[2]int]*Bound
}

// Bound is the bound on requests in flight that the runs on this cluster
// with the same concurrency (start and most) share.
func (c *Cluster) Bound(concurrency, most int) *Bound {
	c.boundsMu.Lock()
	defer c.boundsMu.Unlock()
	key := [2]int{concurrency, most}
	if c.bounds[key] == nil {
		if c.bounds == nil {
			c.bounds = map[[2]int]*Bound{}
		}
		c.bounds[key] = &Bound{}
	}
	return c.bounds[key]
}

// ConnectTo builds the clients for cfg, with a write fence of their own,
// sharing the REST mapper and the version check of shared.
func ConnectTo(cfg *rest.Config, shared *Cluster) (*Clients, error) {
	return connect(cfg, &WriteFence{}, shared)
}

// Reconnect builds new clients for the same cluster (a fresh REST mapper,
// not shared, learns the kinds that new CRDs serve), behind the same
// write fence.
func (c *Clients) Reconnect() (*Clients, error) {
	return connect(c.Config, c.Fence, nil)
}

// Reachable asks the API server for its version, once per shared cluster:
// an unreachable cluster fails here, with its address, instead of once per
// object later.
func (c *Clients) Reachable() error {
	ask := func() error {
		if _, err := c.Kube.Discovery().ServerVersion(); err != nil {
			if status := apierrors.APIStatus(nil); errors.As(err, &status) {
				// It answered, with an error (401, 403, 500...).
				return fmt.Errorf("cannot reach the cluster at %s: %w", c.Config.Host, err)
			}
			return &NotReachedError{Host: c.Config.Host, Err: err}
		}
		return nil
	}
	c.shared.versionOnce.Do(func() { c.shared.versionErr = ask() })
	return c.shared.versionErr
}

func connect(cfg *rest.Config, fence *WriteFence, shared *Cluster) (*Clients, error) {
	wrapped := rest.CopyConfig(cfg)
	wrapped.Wrap(fence.wrap)
	// An API server that restarts, or a connection that breaks, fails
	// no request that can be sent again: see WithRetries. The fence is
	// below the retries, so that each retry of a write is checked too.
	wrapped.Wrap(func(rt http.RoundTripper) http.RoundTripper { return WithRetries(rt, DefaultRetryPolicy()) })
	wrapped.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &discoveryTogether{next: rt} })
	httpClient, err := rest.HTTPClientFor(wrapped)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	if shared == nil {
		shared = &Cluster{}
	}
	// The mapper only reads: the fence of the run that made it never
	// holds up another's.
	shared.mapperOnce.Do(func() { shared.mapper, shared.mapperErr = apiutil.NewDynamicRESTMapper(wrapped, httpClient) })
	mapper := shared.mapper
	if err := shared.mapperErr; err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	c, err := client.New(wrapped, client.Options{HTTPClient: httpClient, Mapper: mapper, Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	kc, err := kubernetes.NewForConfigAndClient(wrapped, httpClient)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfigAndClient(wrapped, httpClient)
	if err != nil {
		return nil, err
	}
	return &Clients{Config: cfg, Client: c, Kube: kc, Metadata: md, Mapper: mapper, Fence: fence, shared: shared}, nil
}

// DefaultNamespace is the namespace that objects without one get: the
// kubeconfig context's namespace, the pod's own in a cluster, else
// "default".
func DefaultNamespace(opts Options) string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if opts.Kubeconfig != "" {
		rules.ExplicitPath = opts.Kubeconfig
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: opts.Context}).Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// OpenAPIV3 returns the cluster's OpenAPI v3 document of one group version,
// as JSON. The list of group versions is read once per Clients.
func (c *Clients) OpenAPIV3(gv schema.GroupVersion) ([]byte, error) {
	c.openapiOnce.Do(func() {
		c.openapiPaths, c.openapiErr = c.Kube.Discovery().OpenAPIV3().Paths()
	})
	if c.openapiErr != nil {
		return nil, c.openapiErr
	}
	p := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		p = "api/" + gv.Version
	}
	doc, ok := c.openapiPaths[p]
	if !ok {
		return nil, fmt.Errorf("the cluster publishes no OpenAPI v3 schema for %s", gv)
	}
	return doc.Schema(runtime.ContentTypeJSON)
}

// NoConfigError is a run with no cluster to talk to: no kubeconfig was
// given or found, and gantry is not in a pod. It is the input's fault.
type NoConfigError struct{ msg string }

// NotReachedError says that the cluster's API server did not answer at
// all: the connection was refused, timed out or found no such host.
type NotReachedError struct {
	Host string
	Err  error
}

func (e *NotReachedError) Error() string {
	return fmt.Sprintf("cannot reach the cluster at %s: %v", e.Host, e.Err)
}

func (e *NotReachedError) Unwrap() error { return e.Err }

// IsUnreachable reports whether err says that the API server did not
// answer: a failed first contact, or an outage the retries gave up on.
func IsUnreachable(err error) bool {
	var notReached *NotReachedError
	var down *UnreachableError
	return errors.As(err, &notReached) || errors.As(err, &down)
}

func (e *NoConfigError) Error() string { return e.msg }

func noConfig(opts Options) error {
	if list := os.Getenv("KUBECONFIG"); list != "" && opts.Kubeconfig == "" {
		return &NoConfigError{fmt.Sprintf("no cluster to talk to: KUBECONFIG names %s, which holds no kubeconfig (a file that does not exist, or an empty one)", list)}
	}
	return &NoConfigError{"no cluster to talk to: no kubeconfig given, KUBECONFIG is not set, there is no ~/.kube/config and gantry is not in a pod; give kubeconfig, or check without a cluster: validate --offline, diff --offline --base"}
}
