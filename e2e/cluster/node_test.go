package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/gantry-dev/gantry/e2e/cluster"
)

// A cluster with a real node runs a pod there (its sandbox from the
// cluster's own registry, its network from the CNI bridge), and leaves
// nothing behind when it stops: no mount under its data dir, no network
// namespace, no bridge, no cgroup, no shim. Twice in a row, so that the
// second start meets what the first left, if anything.
func TestNodeStartsCleanTwice(t *testing.T) {
	if os.Getenv("GANTRY_NODE") != "1" {
		t.Skip("the real node: make test-node (GANTRY_NODE=1)")
	}
	netnsBefore := dirNames("/var/run/netns")
	for round := 1; round <= 2; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		began := time.Now()
		c, err := (&cluster.Local{}).Start(ctx, cluster.Options{Name: "node-twice", RealNode: true, Logf: t.Logf})
		if err != nil {
			cancel()
			t.Fatalf("round %d: %v", round, err)
		}
		t.Logf("round %d: cluster with a real node ready in %s", round, time.Since(began).Round(100*time.Millisecond))
		node := *c.RealNode
		stopped := false
		defer func() {
			if !stopped {
				_ = c.Stop(context.Background())
			}
		}()
		client, err := kubernetes.NewForConfig(c.RESTConfig)
		if err != nil {
			t.Fatal(err)
		}
		image := node.Registry + "/gantry-test/busybox:1"
		if _, err := cluster.PushImage(ctx, cluster.Image{Ref: image, Busybox: node.Busybox}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "sleeper", Image: image, Command: []string{"/bin/sh", "-c", "echo up; exec sleep 3600"},
			}}},
		}
		cluster.OnRealNode(&pod.Spec)
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var ip string
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := client.CoreV1().Pods("default").Get(ctx, "sleeper", metav1.GetOptions{})
			if err != nil || p.Status.Phase != corev1.PodRunning {
				return false, nil //nolint:nilerr // poll again
			}
			ip = p.Status.PodIP
			return p.Spec.NodeName == cluster.RealNodeName, nil
		})
		if err != nil {
			t.Fatalf("round %d: the pod did not run on the real node: %v", round, err)
		}
		// What a running pod has made, and Stop must undo.
		if _, err := os.Stat("/sys/class/net/" + node.Bridge); err != nil {
			t.Errorf("round %d: bridge %s: %v", round, node.Bridge, err)
		}
		if len(cluster.MountsUnder(c.DataDir)) == 0 {
			t.Errorf("round %d: nothing mounted under %s while a pod runs", round, c.DataDir)
		}
		if cg := cgroupsOf(node.CgroupRoot); len(cg) == 0 {
			t.Errorf("round %d: no cgroup %s while a pod runs", round, node.CgroupRoot)
		}
		if added := newNames(netnsBefore, dirNames("/var/run/netns")); len(added) == 0 {
			t.Errorf("round %d: no network namespace while a pod runs", round)
		}
		t.Logf("round %d: pod at %s on %s", round, ip, cluster.RealNodeName)

		stopBegan := time.Now()
		err = c.Stop(context.Background())
		stopped = true
		cancel()
		if err != nil {
			t.Fatalf("round %d: stop: %v", round, err)
		}
		t.Logf("round %d: stopped in %s", round, time.Since(stopBegan).Round(100*time.Millisecond))
		if _, err := os.Stat(c.DataDir); !os.IsNotExist(err) {
			t.Errorf("round %d: data dir %s still there (%v)", round, c.DataDir, err)
		}
		if m := cluster.MountsUnder(c.DataDir); len(m) > 0 {
			t.Errorf("round %d: still mounted: %v", round, m)
		}
		if _, err := os.Stat("/sys/class/net/" + node.Bridge); !os.IsNotExist(err) {
			t.Errorf("round %d: bridge %s still there", round, node.Bridge)
		}
		if cg := cgroupsOf(node.CgroupRoot); len(cg) > 0 {
			t.Errorf("round %d: cgroups left: %v", round, cg)
		}
		if added := newNames(netnsBefore, dirNames("/var/run/netns")); len(added) > 0 {
			t.Errorf("round %d: network namespaces left: %v", round, added)
		}
		if shims := processesNaming(node.ContainerdSocket); len(shims) > 0 {
			t.Errorf("round %d: processes of its containerd left: %v", round, shims)
		}
	}
}

func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func newNames(before, after []string) []string {
	seen := map[string]bool{}
	for _, b := range before {
		seen[b] = true
	}
	var out []string
	for _, a := range after {
		if !seen[a] {
			out = append(out, a)
		}
	}
	return out
}

// cgroupsOf lists the cgroup named root in each hierarchy.
func cgroupsOf(root string) []string {
	found, _ := filepath.Glob("/sys/fs/cgroup/*/" + root)
	return found
}

// processesNaming lists the command lines that name s.
func processesNaming(s string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
