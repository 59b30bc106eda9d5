// Package clustertest wires a test package to one shared cluster: started
// once in TestMain, torn down when the tests end or the run is interrupted,
// with a fresh namespace for each test.
//
//	var env = clustertest.New()
//
//	func TestMain(m *testing.M) { os.Exit(env.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		ns := env.Namespace(t) // skips under -short
//		...
//	}
//
// Under -short there is no cluster: Client, Dynamic and Cluster are nil.
// Namespace, Require and Mapper skip the test then; a test that reaches
// the cluster otherwise calls Require first.
package clustertest

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

// Env is the cluster of one test package.
type Env struct {
	// Cluster is nil under -short.
	Cluster *cluster.Cluster
	Client  kubernetes.Interface
	Dynamic dynamic.Interface

	// running is what the signal handler stops; it is set as soon as the
	// cluster is up, before the tests start.
	running atomic.Pointer[cluster.Cluster]
}

// New returns an Env to be started by Run.
func New() *Env { return &Env{} }

// Run starts the cluster chosen by GANTRY_TEST_CLUSTER, runs the tests and
// stops the cluster, also on SIGINT or SIGTERM. Under -short no cluster is
// started and tests that need one skip. It returns the exit code for
// os.Exit.
func (e *Env) Run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	provider, err := cluster.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "clustertest:", err)
		return 1
	}

	// Take the signals before starting anything, so that an interrupt during
	// start-up is not lost and cannot leave a half-started cluster behind.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interrupted := make(chan os.Signal, 1)
	go func() {
		s := <-sigs
		interrupted <- s
		cancel()
		if c := e.running.Load(); c != nil {
			fmt.Fprintf(os.Stderr, "clustertest: %v: stopping the cluster\n", s)
			_ = c.Stop(context.Background())
			os.Exit(exitCode(s))
		}
	}()

	start := time.Now()
	// GANTRY_NODE=1 (make test-node) adds the real node.
	c, err := provider.Start(ctx, cluster.Options{Name: "gantry-test", RealNode: os.Getenv("GANTRY_NODE") == "1"})
	if err != nil {
		select {
		case s := <-interrupted:
			return exitCode(s)
		default:
		}
		fmt.Fprintf(os.Stderr, "clustertest: starting the %s cluster: %v\n", provider.Name(), err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "clustertest: %s cluster ready in %s\n", provider.Name(), time.Since(start).Round(time.Millisecond))
	}
	if e.Client, err = kubernetes.NewForConfig(c.RESTConfig); err == nil {
		e.Dynamic, err = dynamic.NewForConfig(c.RESTConfig)
	}
	if err != nil {
		_ = c.Stop(context.Background())
		fmt.Fprintln(os.Stderr, "clustertest:", err)
		return 1
	}
	e.Cluster = c
	e.running.Store(c)
	select {
	case s := <-interrupted: // arrived while e.Cluster was still nil
		_ = c.Stop(context.Background())
		return exitCode(s)
	default:
	}

	code := m.Run()
	if err := c.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "clustertest: stopping the cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func exitCode(s os.Signal) int {
	if sig, ok := s.(syscall.Signal); ok {
		return 128 + int(sig)
	}
	return 1
}

// Mapper returns a REST mapper that knows the cluster's kinds as of now
// (CRDs included). It skips t when no cluster is running (under -short).
func (e *Env) Mapper(t testing.TB) meta.RESTMapper {
	t.Helper()
	e.Require(t)
	dc := discovery.NewDiscoveryClientForConfigOrDie(e.Cluster.RESTConfig)
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
}

// Require skips t when no cluster is running (under -short).
func (e *Env) Require(t testing.TB) {
	t.Helper()
	if e.Cluster == nil {
		t.Skip("needs a cluster; skipped under -short")
	}
}

// Namespace creates a namespace for t alone and deletes it when t ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	e.Require(t)
	name := namespaceName(t.Name())
	ctx := context.Background()
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gantry.dev/test": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// namespaceName turns a test name into a valid, unique namespace name.
func namespaceName(test string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(test) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	return fmt.Sprintf("%s-%s", base, strings.ToLower(rand.Text()[:6]))
}
