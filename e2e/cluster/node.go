package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/gantry-dev/gantry/e2e/registry"
)

// The real node: a kubelet built from the same Kubernetes module as the
// control plane, running pods in Debian's containerd and runc, with the
// CNI plugins of Debian's containernetworking-plugins. Options.RealNode
// starts it.
const (
	// RealNodeName is the real node's name.
	RealNodeName = "real-node"
	// RealNodeKey is the label the real node carries, with the value
	// "real", and the key of its NoSchedule taint: only pods that
	// tolerate it run there, so the kwok nodes keep every other pod.
	RealNodeKey = "gantry.dev/node"
	// PauseImage is the sandbox image's repository in the node's
	// registry.
	PauseImage = "gantry/pause:1"
)

// CNIBinDir is where Debian's containernetworking-plugins installs the
// plugins.
const CNIBinDir = "/usr/lib/cni"

// RealNode describes the real node of a cluster started with
// Options.RealNode.
type RealNode struct {
	// Registry is host:port of the registry the node pulls from (plain
	// HTTP, no credentials): the sandbox image is there, and tests push
	// theirs with PushImage.
	Registry string
	// Busybox is the static busybox the images are made of.
	Busybox string
	// BinDir holds the tools, the node's programs among them.
	BinDir string
	// Bridge is the network interface the CNI bridge plugin made.
	Bridge string
	// CgroupRoot is the cgroup (in each v1 hierarchy) under which the
	// kubelet puts its pods.
	CgroupRoot string
	// ContainerdSocket is the CRI endpoint of the node's containerd.
	ContainerdSocket string
}

// OnRealNode makes spec schedule on the real node only.
func OnRealNode(spec *corev1.PodSpec) {
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[RealNodeKey] = "real"
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: RealNodeKey, Operator: corev1.TolerationOpEqual, Value: "real", Effect: corev1.TaintEffectNoSchedule})
}

// nodeBinaries are what the real node needs beyond the control plane.
func nodeBinaries(binDir string) (map[string]string, error) {
	bins := map[string]string{
		"kubelet":                 filepath.Join(binDir, "kubelet"),
		"gantry-pause":            filepath.Join(binDir, "gantry-pause"),
		"busybox":                 filepath.Join(binDir, "busybox"),
		"containerd":              "/usr/bin/containerd",
		"runc":                    "/usr/sbin/runc",
		"containerd-shim-runc-v2": "/usr/bin/containerd-shim-runc-v2",
		"bridge":                  filepath.Join(CNIBinDir, "bridge"),
		"host-local":              filepath.Join(CNIBinDir, "host-local"),
		"loopback":                filepath.Join(CNIBinDir, "loopback"),
		"portmap":                 filepath.Join(CNIBinDir, "portmap"),
		"ip":                      "/usr/sbin/ip",
	}
	var missing []string
	for _, p := range bins {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the real node needs %s (run `make node-tools`)", strings.Join(missing, ", "))
	}
	return bins, nil
}

// nodeCluster is the real node's part of a local cluster: what it started
// and made, so that stop undoes exactly that.
type nodeCluster struct {
	lc   *localCluster
	dir  string
	info RealNode
	reg  *registry.Registry
}

// startRealNode starts the registry, containerd and the kubelet, and
// returns once the node is Ready.
func (lc *localCluster) startRealNode(ctx context.Context, binDir string, certs *pki, apiHost string, client kubernetes.Interface) (*nodeCluster, error) {
	bins, err := nodeBinaries(binDir)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	suffix := hex.EncodeToString(id)
	dir := filepath.Join(lc.dir, "node")
	n := &nodeCluster{lc: lc, dir: dir, info: RealNode{
		Busybox:          bins["busybox"],
		BinDir:           binDir,
		Bridge:           "gantry" + suffix,
		CgroupRoot:       "gantry-" + suffix,
		ContainerdSocket: filepath.Join(dir, "containerd", "containerd.sock"),
	}}
	lc.node = n
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/certs.d", "containerd/opt", "cni/net.d", "cni/ipam", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}

	// The registry, and the sandbox image in it.
	n.reg, err = registry.StartOpen(ctx)
	if err != nil {
		return nil, fmt.Errorf("the real node's registry: %w", err)
	}
	n.info.Registry = n.reg.Host
	pause := n.reg.Host + "/" + PauseImage
	if _, err := PushImage(ctx, Image{Ref: pause, Files: []ImageFile{{Path: "pause", Source: bins["gantry-pause"]}}, Entrypoint: []string{"/pause"}}); err != nil {
		return nil, err
	}
	lc.logf("registry %s, sandbox image pushed", n.reg.Host)

	// containerd trusts that registry, over plain HTTP, through a hosts.toml
	// of its own.
	hostsDir := filepath.Join(dir, "containerd", "certs.d", n.reg.Host)
	if err := os.MkdirAll(hostsDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), fmt.Appendf(nil, `server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
`, n.reg.Host), 0o600); err != nil {
		return nil, err
	}

	// The pods' network: a bridge of ours, addresses from a subnet of
	// ours, no masquerading (the pods talk to the node only).
	subnet := fmt.Sprintf("10.244.%d.0/24", int(id[0]))
	cni := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "gantry-" + suffix,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": n.info.Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": subnet}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(dir, "cni", "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	cniJSON, _ := json.MarshalIndent(cni, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "cni", "net.d", "10-gantry.conflist"), cniJSON, 0o600); err != nil {
		return nil, err
	}

	// containerd, with its own root, state, socket and plugins' dirs.
	cdir := filepath.Join(dir, "containerd")
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = ""

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = %[6]q

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = %[7]q
  conf_dir = %[8]q
  max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = %[9]q
`, filepath.Join(cdir, "root"), filepath.Join(cdir, "state"), n.info.ContainerdSocket, filepath.Join(cdir, "opt"),
		pause, bins["runc"], CNIBinDir, filepath.Join(dir, "cni", "net.d"), filepath.Join(cdir, "certs.d"))
	cfgPath := filepath.Join(cdir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	if err := lc.start("containerd", bins["containerd"], []string{"--config=" + cfgPath}); err != nil {
		return nil, err
	}
	if err := lc.waitFor(ctx, "containerd answers", func(ctx context.Context) (bool, error) {
		return criReady(ctx, n.info.ContainerdSocket), nil
	}); err != nil {
		return nil, err
	}

	// The kubelet: a client certificate of the cluster's CA in the group
	// system:nodes, which RBAC's system:node role is bound to.
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gantry:nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("binding system:node: %w", err)
	}
	nodeCert, nodeKey, err := certs.issueClient("kubelet", "system:node:"+RealNodeName, "system:nodes")
	if err != nil {
		return nil, err
	}
	kdir := filepath.Join(dir, "kubelet")
	kubeconfig := filepath.Join(kdir, "kubeconfig")
	if err := writeKubeconfigFiles(kubeconfig, apiHost, certs.CACert, nodeCert, nodeKey); err != nil {
		return nil, err
	}
	// The cgroup the kubelet puts its pods under, in each hierarchy.
	for _, h := range cgroupHierarchies() {
		if err := os.MkdirAll(filepath.Join(h, n.info.CgroupRoot), 0o755); err != nil {
			return nil, fmt.Errorf("creating cgroup %s: %w", n.info.CgroupRoot, err)
		}
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	// The kubelet listens on the machine's address, the one of the
	// default route's interface: a node's address cannot be loopback.
	nodeIP, err := defaultRouteIP()
	if err != nil {
		return nil, err
	}
	resolv := filepath.Join(kdir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return nil, err
	}
	kcfg := map[string]any{
		"apiVersion":                    "kubelet.config.k8s.io/v1beta1",
		"kind":                          "KubeletConfiguration",
		"address":                       nodeIP,
		"port":                          ports[0],
		"readOnlyPort":                  0,
		"healthzPort":                   0,
		"containerRuntimeEndpoint":      "unix://" + n.info.ContainerdSocket,
		"cgroupDriver":                  "cgroupfs",
		"cgroupRoot":                    "/" + n.info.CgroupRoot,
		"failCgroupV1":                  false,
		"failSwapOn":                    false,
		"makeIPTablesUtilChains":        false,
		"localStorageCapacityIsolation": false,
		"podLogsDir":                    filepath.Join(dir, "pod-logs"),
		"resolvConf":                    resolv,
		"clusterDomain":                 "cluster.local",
		"clusterDNS":                    []string{"10.96.0.10"},
		"serializeImagePulls":           false,
		"imageGCHighThresholdPercent":   100,
		"imageGCLowThresholdPercent":    99,
		"evictionHard":                  map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%"},
		"mergeDefaultEvictionSettings":  false,
		"shutdownGracePeriod":           "0s",
		"nodeStatusReportFrequency":     "10s",
		"authentication": map[string]any{
			"anonymous": map[string]bool{"enabled": false},
			"webhook":   map[string]bool{"enabled": false},
			"x509":      map[string]string{"clientCAFile": certs.CACert},
		},
		"authorization":      map[string]string{"mode": "AlwaysAllow"},
		"registerWithTaints": []corev1.Taint{{Key: RealNodeKey, Value: "real", Effect: corev1.TaintEffectNoSchedule}},
	}
	kcfgJSON, _ := json.MarshalIndent(kcfg, "", "  ")
	kcfgPath := filepath.Join(kdir, "config.json")
	if err := os.WriteFile(kcfgPath, kcfgJSON, 0o600); err != nil {
		return nil, err
	}
	if err := lc.start("kubelet", bins["kubelet"], []string{
		"--config=" + kcfgPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(kdir, "root"),
		"--cert-dir=" + filepath.Join(kdir, "pki"),
		"--hostname-override=" + RealNodeName,
		"--node-ip=" + nodeIP,
		"--node-labels=" + RealNodeKey + "=real",
		"--v=2",
	}, ports[0]); err != nil {
		return nil, err
	}
	if err := lc.waitFor(ctx, "real node Ready", func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not registered yet: poll again
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return nil, err
	}
	return n, nil
}

// defaultRouteIP is the IPv4 address of the interface of the default
// route.
func defaultRouteIP() (string, error) {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] != "00000000" {
			continue
		}
		iface, err := net.InterfaceByName(f[0])
		if err != nil {
			return "", err
		}
		addrs, err := iface.Addrs()
		if err != nil {
			return "", err
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("the real node needs an IPv4 default route (its address cannot be loopback)")
}

// writeKubeconfigFiles writes a kubeconfig that names its certificate
// files.
func writeKubeconfigFiles(path, server, ca, cert, key string) error {
	return os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: node
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: local
  context: {cluster: local, user: node}
current-context: local
`, server, ca, cert, key), 0o600)
}

// cgroupHierarchies are the mounted cgroup hierarchies: the v1 ones (cpu,
// memory, pids, name=systemd...) and the unified (v2) one, which a hybrid
// machine has beside them and the kubelet writes to as well.
func cgroupHierarchies() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var v1, v2 []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		switch fields[sep+1] {
		case "cgroup":
			v1 = append(v1, fields[4])
		case "cgroup2":
			v2 = append(v2, fields[4])
		}
	}
	return append(v1, v2...)
}

func criConn(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// criReady reports whether the CRI runtime service at socket answers.
func criReady(ctx context.Context, socket string) bool {
	if _, err := os.Stat(socket); err != nil {
		return false
	}
	conn, err := criConn(socket)
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{})
	return err == nil && resp.GetStatus() != nil
}

// stop undoes the real node: the kubelet first, then every pod sandbox
// through containerd (which tears down their network namespaces, mounts
// and containers as the kubelet would), containerd, anything of ours
// still running in the kubelet's cgroups, what is still mounted under the
// data dir, the bridge and the cgroups. It returns what it could not undo.
func (n *nodeCluster) stop() error {
	lc := n.lc
	var errs []error
	lc.stopNamed("kubelet", 10*time.Second)
	// Remove every sandbox while containerd still runs.
	if err := removeSandboxes(n.info.ContainerdSocket); err != nil {
		errs = append(errs, err)
	}
	lc.stopNamed("containerd", 10*time.Second)
	// Shims of our containerd that outlived it (each names our socket).
	killOwnShims(n.info.ContainerdSocket)
	// Any process left in the kubelet's cgroups.
	killCgroups(n.info.CgroupRoot)
	if n.reg != nil {
		n.reg.Stop()
	}
	if err := unmountUnder(n.dir); err != nil {
		errs = append(errs, err)
	}
	if n.info.Bridge != "" {
		if _, err := os.Stat("/sys/class/net/" + n.info.Bridge); err == nil {
			if out, err := exec.Command("/usr/sbin/ip", "link", "delete", n.info.Bridge).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("deleting bridge %s: %v: %s", n.info.Bridge, err, out))
			}
		}
	}
	if err := removeCgroups(n.info.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	lc.logf("real node stopped")
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every pod sandbox of the runtime at
// socket.
func removeSandboxes(socket string) error {
	if _, err := os.Stat(socket); err != nil {
		return nil
	}
	conn, err := criConn(socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range list.GetItems() {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.GetId(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", sb.GetId(), err))
		}
	}
	return errors.Join(errs...)
}

// killOwnShims kills the containerd shims started for the containerd
// listening on socket: each has "-address <socket>" in its command line.
func killOwnShims(socket string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == socket {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
}

// killCgroups kills every process in the cgroup root (all hierarchies,
// all levels).
func killCgroups(root string) {
	if root == "" {
		return
	}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil //nolint:nilerr // gone already
			}
			b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeCgroups removes the cgroup root and everything under it, in
// every hierarchy, deepest first; a cgroup whose last process is still
// exiting is retried for a few seconds.
func removeCgroups(root string) error {
	if root == "" {
		return nil
	}
	var left []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		left = left[:0]
		for _, h := range cgroupHierarchies() {
			var dirs []string
			_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					left = append(left, dirs[i])
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		killCgroups(root)
		time.Sleep(200 * time.Millisecond)
	}
	if len(left) > 0 {
		return fmt.Errorf("cgroups left behind: %s", strings.Join(left, ", "))
	}
	return nil
}

// MountsUnder lists the mount points at or under dir, deepest first.
func MountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts everything mounted under dir, deepest first
// (detaching what is busy), until nothing is.
func unmountUnder(dir string) error {
	for range 5 {
		mounts := MountsUnder(dir)
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
	}
	if left := MountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(left, ", "))
	}
	return nil
}
