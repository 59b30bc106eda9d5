package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/mod/modfile"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KwokNodeAnnotation marks the nodes that kwok manages.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Local runs a real control plane from the binaries that `make tools` builds:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler, plus kwok
// for the nodes. Everything listens on free loopback ports and writes into a
// fresh temporary directory.
type Local struct{}

var _ Provider = (*Local)(nil)

// Name implements Provider.
func (*Local) Name() string { return "local" }

// Start implements Provider.
func (*Local) Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	opts = opts.withDefaults()
	began := time.Now()
	logf := func(format string, args ...any) {
		opts.Logf("[%5.1fs] "+format, append([]any{time.Since(began).Seconds()}, args...)...)
	}
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if _, hasDeadline := ctx.Deadline(); !hasDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}

	dir, err := os.MkdirTemp("", "gantry-"+opts.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	lc := &localCluster{dir: dir, logf: logf}
	defer func() {
		if err != nil {
			_ = lc.stop(context.Background())
		}
	}()

	certs, err := newPKI(dir)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, etcdPeerPort, apiPort := ports[0], ports[1], ports[2]
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)

	// etcd and the API server start together: the API server retries until
	// etcd answers, which saves the second or so etcd needs.
	if err := lc.start("etcd", filepath.Join(binDir, "etcd"), []string{
		"--name=gantry",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(etcdPeerPort),
		"--initial-advertise-peer-urls=http://127.0.0.1:" + strconv.Itoa(etcdPeerPort),
		"--initial-cluster=gantry=http://127.0.0.1:" + strconv.Itoa(etcdPeerPort),
		"--unsafe-no-fsync", // test data: durability buys nothing, fsync costs seconds
		"--log-level=warn",
	}, etcdPort, etcdPeerPort); err != nil {
		return nil, err
	}
	api := &apiServerControl{lc: lc, bin: filepath.Join(binDir, "kube-apiserver"), port: apiPort, args: []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + certs.ServingCert,
		"--tls-private-key-file=" + certs.ServingKey,
		"--client-ca-file=" + certs.CACert,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + certs.SAPub,
		"--service-account-signing-key-file=" + certs.SAKey,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--profiling=" + strconv.FormatBool(opts.Profiling),
	}}
	if opts.RealNode {
		// The API server reaches the kubelet (logs, exec) as the admin.
		// by its address: its host name is no DNS name.
		api.args = append(api.args, "--kubelet-client-certificate="+certs.AdminCert, "--kubelet-client-key="+certs.AdminKey,
			"--kubelet-preferred-address-types=InternalIP")
	}
	if err := lc.start("kube-apiserver", api.bin, api.args, apiPort); err != nil {
		return nil, err
	}

	cfg := &rest.Config{
		Host: "https://127.0.0.1:" + strconv.Itoa(apiPort),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   certs.CACert,
			CertFile: certs.AdminCert,
			KeyFile:  certs.AdminKey,
		},
		QPS:   200,
		Burst: 400,
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	api.client = client
	if err := api.waitReady(ctx); err != nil {
		return nil, err
	}
	if opts.ControlPlaneOnly {
		logf("control plane ready, kubeconfig %s", kubeconfig)
		return lc.cluster(cfg, kubeconfig, certs, api), nil
	}

	kube := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
	}
	if err := lc.start("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"), append(kube,
		"--service-account-private-key-file="+certs.SAKey,
		"--root-ca-file="+certs.CACert,
		"--controllers=*",
		"--use-service-account-credentials=false",
	)); err != nil {
		return nil, err
	}
	if err := lc.start("kube-scheduler", filepath.Join(binDir, "kube-scheduler"), kube); err != nil {
		return nil, err
	}
	if err := lc.start("kwok", filepath.Join(binDir, "kwok"), []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + filepath.Join(binDir, "kwok-stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:0",
	}); err != nil {
		return nil, err
	}
	// kwok makes a pod ready once the config check has found what it
	// uses. Its own client: the API server may be restarted under the
	// tests' clients.
	checkCfg := rest.CopyConfig(cfg)
	checkCfg.QPS, checkCfg.Burst = 500, 1000
	checkClient, err := kubernetes.NewForConfig(checkCfg)
	if err != nil {
		return nil, err
	}
	checkCtx, stopChecks := context.WithCancel(context.WithoutCancel(ctx))
	lc.stopChecks = stopChecks
	go runConfigCheck(checkCtx, checkClient)

	for i := range opts.Nodes {
		if err := createKwokNode(ctx, client, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return nil, err
		}
	}
	if err := lc.waitFor(ctx, fmt.Sprintf("%d node(s) Ready", opts.Nodes), func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the API may not answer yet: poll again
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= opts.Nodes, nil
	}); err != nil {
		return nil, err
	}
	if opts.RealNode {
		if _, err := lc.startRealNode(ctx, binDir, certs, cfg.Host, client); err != nil {
			return nil, err
		}
	}
	// Pods are refused until the controller manager has created the
	// namespace's default service account.
	if err := lc.waitFor(ctx, "default service account", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	logf("cluster ready, kubeconfig %s", kubeconfig)

	return lc.cluster(cfg, kubeconfig, certs, api), nil
}

func (lc *localCluster) cluster(cfg *rest.Config, kubeconfig string, certs *pki, api *apiServerControl) *Cluster {
	c := &Cluster{
		Provider:    "local",
		RESTConfig:  cfg,
		Kubeconfig:  kubeconfig,
		DataDir:     lc.dir,
		ServingCert: certs.ServingCert,
		ServingKey:  certs.ServingKey,
		stop:        lc.stop,
		apiServer:   api,
	}
	if lc.node != nil {
		info := lc.node.info
		c.RealNode = &info
	}
	for _, p := range lc.procs {
		c.Processes = append(c.Processes, Process{Name: p.name, PID: p.cmd.Process.Pid, Ports: p.ports})
	}
	return c
}

// apiServerControl kills and restarts kube-apiserver with the flags it
// first ran with, for tests of what a crash in the middle of a run does.
type apiServerControl struct {
	lc       *localCluster
	bin      string
	args     []string
	port     int
	client   kubernetes.Interface
	mu       sync.Mutex
	restarts int
}

func (a *apiServerControl) waitReady(ctx context.Context) error {
	return a.lc.waitFor(ctx, "API server ready", func(ctx context.Context) (bool, error) {
		body, err := a.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

func (a *apiServerControl) kill() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	lc := a.lc
	lc.mu.Lock()
	var victim *process
	kept := lc.procs[:0]
	for _, p := range lc.procs {
		if p.name == "kube-apiserver" {
			victim = p
			continue
		}
		kept = append(kept, p)
	}
	lc.procs = kept
	lc.mu.Unlock()
	if victim == nil {
		return errors.New("kube-apiserver is not running")
	}
	_ = syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL)
	<-victim.done
	lc.logf("killed kube-apiserver (pid %d)", victim.cmd.Process.Pid)
	return nil
}

func (a *apiServerControl) start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.restarts++
	p, err := startProcess("kube-apiserver", a.bin, a.args, filepath.Join(a.lc.dir, fmt.Sprintf("kube-apiserver.%d.log", a.restarts)), a.port)
	if err != nil {
		return err
	}
	a.lc.mu.Lock()
	a.lc.procs = append(a.lc.procs, p)
	a.lc.mu.Unlock()
	a.lc.logf("restarted kube-apiserver (pid %d)", p.cmd.Process.Pid)
	if _, hasDeadline := ctx.Deadline(); !hasDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	return a.waitReady(ctx)
}

// localCluster tracks what Start has started, so that a failed start and
// Stop tear down exactly that.
type localCluster struct {
	dir   string
	logf  func(string, ...any)
	mu    sync.Mutex
	procs []*process
	// stopChecks ends the config check.
	stopChecks context.CancelFunc
	// node is the real node, when one was started.
	node *nodeCluster
}

// stopNamed stops the started process of that name, if any, and forgets
// it.
func (lc *localCluster) stopNamed(name string, grace time.Duration) {
	lc.mu.Lock()
	var victim *process
	kept := lc.procs[:0]
	for _, p := range lc.procs {
		if p.name == name && victim == nil {
			victim = p
			continue
		}
		kept = append(kept, p)
	}
	lc.procs = kept
	lc.mu.Unlock()
	if victim != nil {
		victim.stop(grace)
	}
}

func (lc *localCluster) start(name, bin string, args []string, ports ...int) error {
	p, err := startProcess(name, bin, args, filepath.Join(lc.dir, name+".log"), ports...)
	if err != nil {
		return err
	}
	lc.mu.Lock()
	lc.procs = append(lc.procs, p)
	lc.mu.Unlock()
	lc.logf("started %s (pid %d)", name, p.cmd.Process.Pid)
	return nil
}

// waitFor polls cond every 100ms until it holds, a started process dies, or
// ctx ends.
func (lc *localCluster) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, p := range lc.procs {
			if ok, _ := p.exited(); ok {
				return fmt.Errorf("waiting for %s: %w", what, p.exitError())
			}
		}
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			lc.logf("%s", what)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (logs in %s)", what, ctx.Err(), lc.dir)
		case <-tick.C:
		}
	}
}

// stop terminates the processes in reverse start order (the node and
// controller processes together, then the API server, then etcd) and
// removes the data dir.
func (lc *localCluster) stop(context.Context) error {
	if lc.stopChecks != nil {
		lc.stopChecks()
	}
	var nodeErr error
	if lc.node != nil {
		nodeErr = lc.node.stop()
	}
	lc.mu.Lock()
	procs := lc.procs
	lc.procs = nil
	lc.mu.Unlock()

	var clients, core []*process
	for _, p := range procs {
		if p.name == "etcd" || p.name == "kube-apiserver" {
			core = append(core, p)
		} else {
			clients = append(clients, p)
		}
	}
	var wg sync.WaitGroup
	for _, p := range clients {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(5 * time.Second) }()
	}
	wg.Wait()
	for i := len(core) - 1; i >= 0; i-- {
		core[i].stop(10 * time.Second)
	}
	lc.logf("stopped %d processes", len(procs))
	if err := os.RemoveAll(lc.dir); err != nil {
		return errors.Join(nodeErr, fmt.Errorf("removing data dir: %w", err))
	}
	if nodeErr != nil {
		return fmt.Errorf("stopping the real node: %w", nodeErr)
	}
	return nil
}

func createKwokNode(ctx context.Context, client kubernetes.Interface, name string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("2000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}

// writeKubeconfig writes cfg as a self-contained kubeconfig (certificates
// embedded), usable by kubectl and by gantry.
func writeKubeconfig(path string, cfg *rest.Config) error {
	read := func(p string) []byte {
		b, _ := os.ReadFile(p)
		return b
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["gantry-local"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: read(cfg.CAFile),
	}
	kc.AuthInfos["gantry-admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: read(cfg.CertFile),
		ClientKeyData:         read(cfg.KeyFile),
	}
	kc.Contexts["gantry-local"] = &clientcmdapi.Context{Cluster: "gantry-local", AuthInfo: "gantry-admin", Namespace: "default"}
	kc.CurrentContext = "gantry-local"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// freePorts asks the kernel for n distinct free loopback ports. They are
// released before use, so another process could take one in between; the
// window is short and a clash shows up as a clear start-up error.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// resolveBinDir finds the directory with the control-plane binaries.
func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(EnvBinDir)
	}
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", fmt.Errorf("finding bin/: %w (set %s)", err, EnvBinDir)
		}
		dir = filepath.Join(root, "bin")
	}
	var missing []error
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, fmt.Errorf("%s not found in %s", b, dir))
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("local control plane: %w (run `make tools`)", errors.Join(missing...))
	}
	return dir, nil
}

// ToolEnv is the environment of a CLI run by a test (helm, cosign)
// that keeps its configuration, caches and credentials in home, not the
// user's: HOME, Helm's three homes and DOCKER_CONFIG there, and PATH.
func ToolEnv(home string) []string {
	return []string{"HOME=" + home, "HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"), "DOCKER_CONFIG=" + filepath.Join(home, "docker"), "PATH=" + os.Getenv("PATH")}
}

// Tool returns the path of a tool that `make tools` builds into the bin
// directory ($GANTRY_BIN_DIR, else bin/ at the module root), for tests that
// run real clients (age, cosign) against what gantry produces.
func Tool(name string) (string, error) {
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found in %s (run make tools)", name, dir)
	}
	return p, nil
}

// moduleRoot walks up from the working directory to gantry's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfile.ModulePath(b) == "github.com/gantry-dev/gantry" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the gantry module")
		}
		dir = parent
	}
}
