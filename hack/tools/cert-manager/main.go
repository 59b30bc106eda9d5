// Command cert-manager-controller runs cert-manager's own controllers for
// self-signed and CA issuance, from the packages of the cert-manager
// module, against a cluster: what make test-certmanager proves gantry's
// health rules against. cert-manager's controller binary is a module of
// its own that the Go module proxy does not serve, so this main wires the
// same public packages: the controllers register themselves in
// pkg/controller's registry when imported, and run on the informers of
// one context factory. No leader election, no metrics or health servers,
// no ACME: a test runs one of it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// The controllers a Certificate needs, from trigger to Ready.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"

	// CertificateRequests: approved by cert-manager's own approver, signed
	// by the self-signed and CA issuers.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"

	// Issuers and ClusterIssuers get their Ready condition from the
	// implementations of their types.
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()

	var (
		opts       controller.ContextOptions
		workers    int
		minBackoff time.Duration
		maxBackoff time.Duration
		only       string
	)
	fs := flag.CommandLine
	klog.InitFlags(fs) // -v and the rest of klog's: the logs go to stderr
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "the kubeconfig of the cluster (empty: in-cluster configuration or KUBECONFIG)")
	fs.StringVar(&opts.APIServerHost, "master", "", "the API server's address, overriding the kubeconfig's")
	fs.StringVar(&opts.Namespace, "namespace", "", "the one namespace to watch (empty: all; the clusterissuers controller then does not run)")
	fs.StringVar(&opts.ClusterResourceNamespace, "cluster-resource-namespace", "cert-manager", "the namespace of the Secrets that ClusterIssuers reference")
	fs.IntVar(&workers, "concurrent-workers", 5, "workers of each controller")
	fs.DurationVar(&minBackoff, "certificate-request-minimum-backoff-duration", time.Hour, "the first delay before a failed issuance is retried")
	fs.DurationVar(&maxBackoff, "certificate-request-maximum-backoff-duration", 32*time.Hour, "the longest delay before a failed issuance is retried")
	fs.StringVar(&only, "controllers", "", "comma-separated names of the controllers to run (empty: every one this binary holds)")
	fs.Parse(os.Args[1:]) //nolint:errcheck // ExitOnError
	opts.KubernetesAPIQPS, opts.KubernetesAPIBurst = 50, 100
	opts.CertificateRequestMinimumBackoffDuration = minBackoff
	opts.CertificateRequestMaximumBackoffDuration = maxBackoff

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, opts, workers, only); err != nil {
		logf.Log.Error(err, "cert-manager-controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(ctx context.Context, opts controller.ContextOptions, workers int, only string) error {
	log := logf.FromContext(ctx)
	factory, err := controller.NewContextFactory(ctx, opts)
	if err != nil {
		return err
	}
	// The base context shares the informer factories every controller's
	// context is built on: they start once all controllers registered
	// their informers.
	base, err := factory.Build()
	if err != nil {
		return err
	}

	known := controller.Known()
	var names []string
	if only != "" {
		names = strings.Split(only, ",")
		for _, n := range names {
			if known[n] == nil {
				return fmt.Errorf("--controllers: no controller %q in this binary", n)
			}
		}
	} else {
		for n := range known {
			names = append(names, n)
		}
	}
	slices.Sort(names)

	g, ctx := errgroup.WithContext(ctx)
	for _, n := range names {
		if opts.Namespace != "" && n == "clusterissuers" {
			log.Info("not running the clusterissuers controller: watching one namespace")
			continue
		}
		c, err := known[n](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", n, err)
		}
		log.Info("starting controller", "controller", n)
		g.Go(func() error {
			if err := c.Run(workers, ctx); err != nil {
				return fmt.Errorf("controller %s: %w", n, err)
			}
			return nil
		})
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	if err != nil {
		return err
	}
	log.Info("controllers stopped")
	return nil
}
