// Command controller is Tekton Pipelines' controller as the module's
// cmd/controller wires it (the TaskRun, PipelineRun and ResolutionRequest
// reconcilers on knative's sharedmain), from the packages of the pinned
// module, for tests that run it as a process on a shared machine. One
// difference: knative's own probe server, which listens on the fixed port
// 8080 beside the controller's (PROBES_PORT), is off; a second test or
// program on 8080 would otherwise stop the controller. No webhook: the
// reconcilers apply the defaults themselves.
package main

import (
	"flag"
	"log"
	"net/http"
	"os"
	"strconv"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline"
	"github.com/tektoncd/pipeline/pkg/apis/pipeline/v1beta1"
	"github.com/tektoncd/pipeline/pkg/reconciler/pipelinerun"
	"github.com/tektoncd/pipeline/pkg/reconciler/resolutionrequest"
	"github.com/tektoncd/pipeline/pkg/reconciler/taskrun"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	filteredinformerfactory "knative.dev/pkg/client/injection/kube/informers/factory/filtered"
	"knative.dev/pkg/controller"
	"knative.dev/pkg/injection"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/signals"
)

func main() {
	if val, ok := os.LookupEnv("THREADS_PER_CONTROLLER"); ok {
		n, err := strconv.Atoi(val)
		if err != nil {
			log.Fatalf("failed to parse value %q of THREADS_PER_CONTROLLER: %v", val, err)
		}
		controller.DefaultThreadsPerController = n
	}
	flag.IntVar(&controller.DefaultThreadsPerController, "threads-per-controller", controller.DefaultThreadsPerController, "Threads (goroutines) to create per controller")
	namespace := flag.String("namespace", corev1.NamespaceAll, "Namespace to restrict informer to. Optional, defaults to all namespaces.")
	disableHighAvailability := flag.Bool("disable-ha", false, "Whether to disable high-availability functionality for this component.")

	opts := &pipeline.Options{}
	flag.StringVar(&opts.Images.EntrypointImage, "entrypoint-image", "", "The container image containing our entrypoint binary.")
	flag.StringVar(&opts.Images.SidecarLogResultsImage, "sidecarlogresults-image", "", "The container image containing the binary for accessing results.")
	flag.StringVar(&opts.Images.NopImage, "nop-image", "", "The container image used to stop sidecars")
	flag.StringVar(&opts.Images.ShellImage, "shell-image", "", "The container image containing a shell")
	flag.StringVar(&opts.Images.ShellImageWin, "shell-image-win", "", "The container image containing a windows shell")
	flag.StringVar(&opts.Images.WorkingDirInitImage, "workingdirinit-image", "", "The container image containing our working dir init binary.")
	flag.DurationVar(&opts.ResyncPeriod, "resync-period", controller.DefaultResyncPeriod, "The period between two resync run (going through all objects)")

	cfg := injection.ParseAndGetRESTConfigOrDie()
	if err := opts.Images.Validate(); err != nil {
		log.Fatal(err)
	}
	if cfg.QPS == 0 {
		cfg.QPS = 2 * rest.DefaultQPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = rest.DefaultBurst
	}
	// As cmd/controller: two controllers share the client.
	cfg.QPS = 2 * cfg.QPS
	cfg.Burst = 2 * cfg.Burst

	ctx := injection.WithNamespaceScope(signals.NewContext(), *namespace)
	if *disableHighAvailability {
		ctx = sharedmain.WithHADisabled(ctx)
	}
	ctx = sharedmain.WithHealthProbesDisabled(ctx)

	port := os.Getenv("PROBES_PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	mux.HandleFunc("/", ok)
	mux.HandleFunc("/health", ok)
	mux.HandleFunc("/readiness", ok)
	go func() {
		log.Printf("Readiness and health check server listening on port %s", port)
		log.Fatal(http.ListenAndServe(":"+port, mux)) //nolint:gosec // a test's probe server
	}()

	ctx = filteredinformerfactory.WithSelectors(ctx, v1beta1.ManagedByLabelKey)
	ctx = controller.WithResyncPeriod(ctx, opts.ResyncPeriod)

	sharedmain.MainWithConfig(ctx, "tekton-pipelines-controller", cfg,
		taskrun.NewController(opts, clock.RealClock{}),
		pipelinerun.NewController(opts, clock.RealClock{}),
		resolutionrequest.NewController(clock.RealClock{}),
	)
}
