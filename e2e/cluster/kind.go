package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
)

// EnvKindNodeImage optionally names the kind node image to use.
const EnvKindNodeImage = "GANTRY_KIND_NODE_IMAGE"

// Kind runs the tests on a kind cluster, through kind's Go API. It needs a
// Docker engine, which the GitHub runners have and these machines do not.
//
// A kind cluster that already exists under the same name is reused and left
// running on Stop, so a workflow can create one cluster for every test
// package; a cluster this provider created is deleted on Stop.
type Kind struct{}

var _ Provider = (*Kind)(nil)

// Name implements Provider.
func (*Kind) Name() string { return "kind" }

// Start implements Provider.
func (*Kind) Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := dockerEngineAnswers(ctx); err != nil {
		return nil, fmt.Errorf("kind: %w; use %s=local on machines without one", err, EnvProvider)
	}
	provider := kindcluster.NewProvider(kindcluster.ProviderWithDocker())
	existing, err := provider.List()
	if err != nil {
		return nil, fmt.Errorf("kind: listing clusters: %w", err)
	}
	created := false
	if !slices.Contains(existing, opts.Name) {
		opts.Logf("kind: creating cluster %s", opts.Name)
		createOpts := []kindcluster.CreateOption{
			kindcluster.CreateWithWaitForReady(3 * time.Minute),
			kindcluster.CreateWithDisplayUsage(false),
			kindcluster.CreateWithDisplaySalutation(false),
		}
		if img := os.Getenv(EnvKindNodeImage); img != "" {
			createOpts = append(createOpts, kindcluster.CreateWithNodeImage(img))
		}
		if err := provider.Create(opts.Name, createOpts...); err != nil {
			return nil, fmt.Errorf("kind: creating cluster %s: %w", opts.Name, err)
		}
		created = true
	}
	dir, err := os.MkdirTemp("", "gantry-kind-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Provider: "kind", DataDir: dir}
	c.stop = func(context.Context) error {
		defer os.RemoveAll(dir)
		if created {
			return provider.Delete(opts.Name, "")
		}
		return nil
	}
	kc, err := provider.KubeConfig(opts.Name, false)
	if err != nil {
		_ = c.Stop(ctx)
		return nil, fmt.Errorf("kind: reading kubeconfig: %w", err)
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, []byte(kc), 0o600); err != nil {
		_ = c.Stop(ctx)
		return nil, err
	}
	if c.RESTConfig, err = clientcmd.RESTConfigFromKubeConfig([]byte(kc)); err != nil {
		_ = c.Stop(ctx)
		return nil, err
	}
	c.RESTConfig.QPS, c.RESTConfig.Burst = 200, 400
	if err := waitForDefaultServiceAccount(ctx, c.RESTConfig); err != nil {
		_ = c.Stop(ctx)
		return nil, fmt.Errorf("kind: %w", err)
	}
	return c, nil
}

// dockerEngineAnswers checks for a running engine, not just the client
// binary (kind's own detection only runs `docker -v`).
func dockerEngineAnswers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("no Docker engine answers (docker info: %w: %s)", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func waitForDefaultServiceAccount(ctx context.Context, cfg *rest.Config) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the default service account: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
