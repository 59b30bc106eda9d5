package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"
)

// Existing uses the cluster that KUBECONFIG (or ~/.kube/config) points at,
// as it is. Stop leaves it running.
type Existing struct{}

var _ Provider = (*Existing)(nil)

// Name implements Provider.
func (*Existing) Name() string { return "existing" }

// Start implements Provider: it loads the kubeconfig and checks that the API
// server answers.
func (*Existing) Start(ctx context.Context, opts Options) (*Cluster, error) {
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, errors.New("existing cluster: KUBECONFIG is not set and there is no home directory")
		}
		path = filepath.Join(home, ".kube", "config")
	}
	if filepath.SplitList(path)[0] != path {
		return nil, fmt.Errorf("existing cluster: KUBECONFIG must name one file, got %q", path)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("existing cluster: loading %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := dc.ServerVersion(); err != nil {
		return nil, fmt.Errorf("existing cluster: %s does not answer: %w", cfg.Host, err)
	}
	return &Cluster{Provider: "existing", RESTConfig: cfg, Kubeconfig: path}, nil
}
