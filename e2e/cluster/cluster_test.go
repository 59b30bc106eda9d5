package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/e2e/cluster"
	"github.com/gantry-dev/gantry/e2e/cluster/clustertest"
)

var env = clustertest.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "pause",
					Image: "registry.k8s.io/pause:3.10",
				}}},
			},
		},
	}
}

// waitForDeployment polls until cond holds for the Deployment, failing the
// test with the last status seen when timeout passes.
func waitForDeployment(t *testing.T, ns, name string, timeout time.Duration, cond func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	var last *appsv1.Deployment
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not there yet: poll again
		}
		last = d
		return cond(d), nil
	})
	if err != nil {
		status, _ := json.Marshal(last.Status)
		t.Fatalf("Deployment %s/%s: condition not reached within %s; last status: %s", ns, name, timeout, status)
	}
	return last
}

func condition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func TestDeploymentBecomesAvailable(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, deployment("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := waitForDeployment(t, ns, "web", 60*time.Second, func(d *appsv1.Deployment) bool {
		c := condition(d, appsv1.DeploymentAvailable)
		return d.Status.AvailableReplicas == 2 && c != nil && c.Status == corev1.ConditionTrue
	})
	// The pods were made by the controllers, bound by the scheduler to a
	// kwok node, and marked Ready by kwok.
	pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("got %d pods, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") && env.Cluster.Provider == "local" {
			t.Errorf("pod %s scheduled to %q, want a kwok node", p.Name, p.Spec.NodeName)
		}
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s phase %s, want Running", p.Name, p.Status.Phase)
		}
	}
	t.Logf("Deployment %s/web available: %d/%d replicas", ns, d.Status.AvailableReplicas, *d.Spec.Replicas)
}

func TestProgressDeadlineExceeded(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	d := deployment("stuck", 1)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](10)
	d.Spec.Template.Spec.NodeSelector = map[string]string{"gantry.dev/no-such-node": "true"}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForDeployment(t, ns, "stuck", 60*time.Second, func(d *appsv1.Deployment) bool {
		c := condition(d, appsv1.DeploymentProgressing)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded"
	})
}

func TestNamespaceDeletionCompletes(t *testing.T) {
	t.Parallel()
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AppsV1().Deployments(ns).Create(ctx, deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForDeployment(t, ns, "web", 60*time.Second, func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 1 })

	if err := env.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		n, _ := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		t.Fatalf("namespace %s still exists after 60s: phase %s, conditions %v", ns, n.Status.Phase, n.Status.Conditions)
	}
	t.Logf("namespace %s deleted in %s", ns, time.Since(start).Round(time.Millisecond))
}

// The teardown tests run this test binary again as a child whose TestMain
// starts its own cluster; the child records what it started in a state file
// and then fails (t.Fatal) or waits to be interrupted. The parent then checks
// that nothing the child's cluster started is left.
const (
	envHelperMode  = "GANTRY_TEARDOWN_HELPER"
	envHelperState = "GANTRY_TEARDOWN_STATE"
)

type helperState struct {
	DataDir   string
	Processes []cluster.Process
}

func TestTeardownHelper(t *testing.T) {
	mode := os.Getenv(envHelperMode)
	if mode == "" {
		t.Skip("run by TestTeardown* as a child process")
	}
	env.Require(t)
	b, err := json.Marshal(helperState{DataDir: env.Cluster.DataDir, Processes: env.Cluster.Processes})
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv(envHelperState)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "fatal":
		t.Fatal("failing on purpose, to check that teardown still runs")
	case "interrupt":
		time.Sleep(5 * time.Minute) // the parent sends SIGINT long before
		t.Fatal("was not interrupted")
	}
}

func startHelper(t *testing.T, mode string) (*exec.Cmd, string, *strings.Builder) {
	t.Helper()
	env.Require(t)
	if env.Cluster.Provider != "local" {
		t.Skip("teardown of processes applies to the local provider")
	}
	state := filepath.Join(t.TempDir(), "state.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestTeardownHelper$", "-test.v")
	cmd.Env = append(os.Environ(), envHelperMode+"="+mode, envHelperState+"="+state)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, state, out
}

func readState(t *testing.T, path string, out fmt.Stringer) helperState {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the child did not record its cluster: %v\nchild output:\n%s", err, out)
	}
	var s helperState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Processes) != 5 {
		t.Fatalf("child recorded %d processes, want 5 (etcd, apiserver, kcm, scheduler, kwok): %+v", len(s.Processes), s.Processes)
	}
	return s
}

// assertNothingLeft checks that no process the child's cluster started is
// alive, that no process at all mentions its data dir, that none of its ports
// accepts connections, and that the data dir is gone.
func assertNothingLeft(t *testing.T, s helperState) {
	t.Helper()
	for _, p := range s.Processes {
		if alive(p.PID) {
			t.Errorf("%s (pid %d) is still running", p.Name, p.PID)
		}
		for _, port := range p.Ports {
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
			if err == nil {
				conn.Close()
				t.Errorf("%s's port %d still accepts connections", p.Name, port)
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), s.DataDir) {
			t.Errorf("process %s still refers to %s: %s", filepath.Base(filepath.Dir(f)), s.DataDir, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	if _, err := os.Stat(s.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s still exists (stat: %v)", s.DataDir, err)
	}
}

// alive reports whether pid names a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestTeardownAfterFatal(t *testing.T) {
	t.Parallel()
	cmd, state, out := startHelper(t, "fatal")
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("child exit: %v, want exit status 1 from its failing test\n%s", err, out)
	}
	if !strings.Contains(out.String(), "failing on purpose") {
		t.Fatalf("the child's test did not reach t.Fatal:\n%s", out)
	}
	assertNothingLeft(t, readState(t, state, out))
}

func TestTeardownAfterInterrupt(t *testing.T) {
	t.Parallel()
	cmd, state, out := startHelper(t, "interrupt")
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		_, err := os.Stat(state)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("child cluster did not come up:\n%s", out)
	}
	s := readState(t, state, out)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGINT) {
		t.Fatalf("child exit: %v, want %d after SIGINT\n%s", err, 128+int(syscall.SIGINT), out)
	}
	assertNothingLeft(t, s)
}
