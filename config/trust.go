package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/gantry-dev/gantry/sources/reader"
	"github.com/gantry-dev/gantry/sources/yamlbound"
)

// The rule, in one place: the workflow (flags, INPUT_*, GANTRY_*) decides
// credentials, keys, endpoints and what a preview compares with; a run
// file decides only the shape of the run: its units, their paths inside
// the workspace, their dependencies and their other inputs. On a pull
// request the run file is the pull request's; whoever opens it writes it.

// runLevel are the inputs of a whole run, not of one unit: what is run,
// how the run is reported, the run file itself, and what the workflow
// lets a run file do. A unit may not set them; the command line and the
// variables set them for the run.
var runLevel = map[string]bool{
	"command": true, "run-file": true, "units-concurrency": true, "unit": true, "format": true, "image": true, "pipeline-name": true,
	"report": true, "summary": true, "comment": true, "github-token": true, "gitlab-token": true,
	"dotenv": true, "tekton-results": true, "output": true, "detailed-exitcode": true,
	"workspace": true, "run-file-env": true, "allow-kubeconfig-exec": true, "registry-hosts": true, "run-file-servers": true,
	"color": true, "quiet": true,
}

// workflowOnly are the unit inputs a run file may not set, each with what
// it decides: the workflow gives them as flags or variables, for every
// unit.
var workflowOnly = map[string]string{
	"offline":                        "what a preview compares with",
	"hand-managers":                  "which fields a correction takes from other managers",
	"pod-log-lines":                  "what of a container's own output is published",
	"base":                           "what a preview compares with",
	"insecure-registry":              "how registries are reached",
	"allow-remote-bases":             "what a build may fetch from the network",
	"allow-remote-charts":            "what a build may fetch from the network",
	"chart-cache":                    "where fetched charts are trusted from",
	"max-file-bytes":                 "the bounds of what a build reads",
	"max-objects":                    "the bounds of what a build reads",
	"max-artifact-bytes":             "the bounds of what a pull unpacks",
	"max-artifact-files":             "the bounds of what a pull unpacks",
	"sign":                           "what is signed with the workflow's identity",
	"cosign-key":                     "a key",
	"record-key":                     "a key",
	"prune-shared-namespaces":        "whether ground another inventory stands on may be deleted",
	"cosign-public-key":              "a key that signatures are trusted from",
	"age-recipients":                 "a key",
	"fulcio-url":                     "an endpoint",
	"rekor-url":                      "an endpoint",
	"certificate-roots":              "trust roots",
	"certificate-identity":           "whom signatures are trusted from",
	"certificate-identity-regexp":    "whom signatures are trusted from",
	"certificate-oidc-issuer":        "whom signatures are trusted from",
	"certificate-oidc-issuer-regexp": "whom signatures are trusted from",
}

// ciCredentials are the variables of the CI's own credentials and of
// gantry's inputs: a run file never reads them, whatever run-file-env
// allows.
var ciCredentials = []string{
	"GITHUB_TOKEN", "ACTIONS_*", "INPUT_*", "GANTRY_*",
	"CI_JOB_TOKEN", "CI_JOB_JWT*", "CI_BUILD_TOKEN", "CI_REGISTRY_PASSWORD", "CI_DEPLOY_PASSWORD",
	"CI_DEPENDENCY_PROXY_PASSWORD", "CI_REPOSITORY_URL",
}

// MinMaskLength bounds what a value read through a reference may mask:
// shorter lines are not masks, so that a run file cannot mask ordinary
// words (a kind, a role's name) out of its own preview; a value with no
// line this long is refused as too short to mask.
const MinMaskLength = 8

// maxReferenceBytes bounds a file a {file: ...} reference reads: keys,
// tokens and values, never manifests.
const maxReferenceBytes = 1 << 20

// policy is what the workflow lets the run files it runs do.
type policy struct {
	// workspace is where every path a run file names must lie, links
	// resolved.
	workspace string
	// env are the variables (names or patterns) a run file may read.
	env []string
	// kubeconfigExec lets a run file's kubeconfig run plugins and read
	// files outside the workspace.
	kubeconfigExec bool
	maxFileBytes   int64
	// offline runs read no kubeconfig at all.
	offline bool
	// deny are the workflow's credential files and folders: no file a
	// run file names is read from them, whatever path or link names it.
	// kubeconfigs are the workflow's own kubeconfigs, which a run file
	// may name as its units' kubeconfig, never read as a reference's
	// value.
	deny, kubeconfigs []string
	// chartByName: the workflow gives chart-repository, so a run file's
	// chart is a chart's name in it, not a folder.
	chartByName bool
	// servers are the API servers a run file's kubeconfig may reach,
	// normalised; serversFrom says where they were given, for messages.
	servers     map[string]bool
	serversFrom string
	// defaultServers, when set, fills servers from the workflow's own
	// kubeconfig, the first time a run file's kubeconfig is checked.
	defaultServers func()
}

// workflowPolicy reads the policy from what the workflow alone gave.
func workflowPolicy(g Given) (*policy, error) {
	g.unit = nil
	vals, err := resolve(&g)
	if err != nil {
		return nil, err
	}
	in := &inputs{vals: vals}
	p := &policy{
		env:            in.lines("run-file-env"),
		kubeconfigExec: in.bool("allow-kubeconfig-exec"),
		chartByName:    in.str("chart-repository") != "",
		maxFileBytes:   in.number("max-file-bytes", 1, 1<<62, "a positive whole number of bytes"),
		offline:        in.bool("offline"),
		servers:        map[string]bool{},
	}
	for _, pat := range p.env {
		if _, err := path.Match(pat, ""); err != nil {
			in.bad("run-file-env", "%q is not a name or a pattern such as APP_*", pat)
		}
	}
	p.serversFrom = "those run-file-servers lists"
	for _, srv := range in.lines("run-file-servers") {
		n, err := normalServer(srv)
		if err != nil {
			in.bad("run-file-servers", "%q: %v", srv, err)
			continue
		}
		p.servers[n] = true
	}
	if len(p.servers) == 0 {
		// Read only if a run file names a kubeconfig.
		p.serversFrom = "those of the workflow's own kubeconfig"
		kubeconfig, env := in.str("kubeconfig"), g.Env["KUBECONFIG"]
		p.defaultServers = func() {
			for _, srv := range workflowServers(kubeconfig, env) {
				if n, err := normalServer(srv); err == nil {
					p.servers[n] = true
				}
			}
		}
	}
	ws := in.str("workspace")
	if ws == "" {
		ws = defaultWorkspace(g.Env)
	}
	real, err := filepath.EvalSymlinks(ws)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		in.bad("workspace", "%v", err)
	}
	p.workspace = real
	p.deny = credentialFiles(nil, in, g.Env)
	p.kubeconfigs = append(filepath.SplitList(g.Env["KUBECONFIG"]), in.str("kubeconfig"))
	return p, errors.Join(in.errs...)
}

// read reads a file a run file names (the run file itself, a {file: ...}
// reference, a kubeconfig it names) through the reader every source of a
// build passes: inside the workspace, links resolved, nothing of a .git
// folder (a link or a hard link to .git/config, where a checkout keeps
// its token, is refused by where it resolves), none of the workflow's
// credential files, a regular file of at most max bytes.
func (p *policy) read(name string, max int64) ([]byte, error) {
	return readWith(reader.Options{Root: p.workspace, Deny: p.deny, MaxFileBytes: max}, name)
}

// readWith reads name with a reader of opts; a file over its bound is
// said with the bound it is over (a run file's or a reference's, not the
// build's max-file-bytes).
func readWith(opts reader.Options, name string) ([]byte, error) {
	b, err := reader.New(opts).ReadFile(name)
	var refused *reader.Error
	if errors.As(err, &refused) && refused.Kind == reader.TooLarge {
		return nil, fmt.Errorf("%s is over the limit of %d bytes", name, opts.MaxFileBytes)
	}
	return b, err
}

// readReference is read for a {file: ...} reference, whose value goes
// into what is built and applied: the workflow's own kubeconfigs are
// refused too.
func (p *policy) readReference(name string, max int64) ([]byte, error) {
	deny := append(slices.Clone(p.deny), p.kubeconfigs...)
	return readWith(reader.Options{Root: p.workspace, Deny: deny, MaxFileBytes: max}, name)
}

// WorkspaceOf is the folder every path of g's run file must lie in
// (workspace, else the CI's checkout, ...), links resolved.
func WorkspaceOf(g Given) (string, error) {
	p, err := workflowPolicy(g)
	if err != nil {
		return "", err
	}
	return p.workspace, nil
}

// defaultWorkspace is the CI's checkout, else the git repository that
// holds the working directory, else the working directory.
func defaultWorkspace(env map[string]string) string {
	if ws := firstNonEmpty(env["GITHUB_WORKSPACE"], env["CI_PROJECT_DIR"]); ws != "" {
		return ws
	}
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}

// variableName is what a run file may name with {env: NAME}: a
// variable's name as shells and CI engines spell one. It is checked
// before any pattern is matched: path.Match's * matches any character but
// a slash, a line ending too, and a name goes on into the jobs a plan
// writes.
var variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// errNotAName says what a variable's name is.
var errNotAName = errors.New("not a variable's name: want letters, digits and _, not starting with a digit, as in SOPS_AGE_KEY")

// matchesName says whether pattern (of run-file-env, or of the CI's
// credentials) matches name. Only a variable's name is matched: whatever
// the pattern, nothing else is.
func matchesName(pattern, name string) bool {
	if !variableName.MatchString(name) {
		return false
	}
	ok, _ := path.Match(pattern, name)
	return ok
}

// shownName is a variable's name, or what a run file gave as one, as a
// message shows it: quoted when it is empty or would not print as itself
// (a line ending, a control character).
func shownName(name string) string {
	if q := strconv.Quote(name); name != "" && q[1:len(q)-1] == name {
		return name
	}
	return strconv.Quote(name)
}

// mayRead says whether a run file may read the variable name: the CI's
// credentials never, in any case (GitHub's INPUT_* names hold a -), anything else
// that is no variable's name never, and a name only if run-file-env lets
// it.
func (p *policy) mayRead(name string) error {
	for _, pat := range ciCredentials {
		// In any case: GitHub's secrets and a workflow's env keys are
		// named without regard to it (gantry_record_key is the secret
		// GANTRY_RECORD_KEY), and so are Windows' variables.
		if ok, _ := path.Match(pat, strings.ToUpper(name)); ok {
			return fmt.Errorf("%s is the CI's own credential or one of gantry's inputs: a run file never reads it", shownName(name))
		}
	}
	if !variableName.MatchString(name) {
		return errNotAName
	}
	for _, pat := range p.env {
		if matchesName(pat, name) {
			return nil
		}
	}
	return fmt.Errorf("the workflow does not let a run file read %s: list it in run-file-env (a flag or variable, never the run file)", shownName(name))
}

// confine resolves a path a run file names, relative to base (the run
// file's folder): links resolved, it must lie inside the workspace, in no
// .git folder (where a checkout keeps its credentials), and be a folder
// (dir) or a regular file no larger than max. Nothing is read.
func (p *policy) confine(base, name string, dir bool, max int64) (string, error) {
	if strings.Contains(name, "://") {
		return "", fmt.Errorf("%s: want a path inside the workspace", name)
	}
	abs := name
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(base, name)
	}
	abs, err := filepath.Abs(abs)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s does not exist", name)
		}
		return "", fmt.Errorf("%s: %w", name, err)
	}
	rel, err := filepath.Rel(p.workspace, real)
	if err != nil || rel != "." && !filepath.IsLocal(rel) {
		how := "is"
		if real != filepath.Clean(abs) {
			how = "resolves to " + real + ","
		}
		return "", fmt.Errorf("%s %s outside the workspace (%s): refused", name, how, p.workspace)
	}
	if slices.Contains(strings.Split(rel, string(filepath.Separator)), ".git") {
		return "", fmt.Errorf("%s is inside a .git folder, where a checkout keeps its credentials: refused", name)
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case dir && !info.IsDir():
		return "", fmt.Errorf("%s is not a folder", name)
	case !dir && !info.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file: refused", name)
	case !dir && info.Size() > max:
		return "", fmt.Errorf("%s is %d bytes, over the limit of %d", name, info.Size(), max)
	}
	return abs, nil
}

// readBounded reads a regular file of at most max bytes. It never blocks
// on a FIFO or reads a device: what is not a regular file is refused
// before a byte is read.
func readBounded(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file: refused", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over the limit of %d bytes", name, max)
	}
	return b, nil
}

// checkKubeconfig refuses a kubeconfig named by a run file that would run
// a command on the runner (an exec or auth-provider plugin) or read a
// token or certificate file outside the workspace, unless the workflow
// allows it (allow-kubeconfig-exec), as Flux's kustomize-controller does
// with kubeconfigs it did not get from its operator.
func (p *policy) checkKubeconfig(file string) error {
	data, err := p.read(file, p.maxFileBytes)
	if err != nil {
		return err
	}
	if err := yamlbound.Check(data); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return fmt.Errorf("%s: not a kubeconfig: %w", file, err)
	}
	if p.defaultServers != nil {
		p.defaultServers()
		p.defaultServers = nil
	}
	var errs []error
	// What gantry sends a cluster holds what it decrypted and what
	// references read: a run file's kubeconfig reaches only the servers
	// the workflow named, directly.
	for _, name := range sortedKeys(kc.Clusters) {
		c := kc.Clusters[name]
		n, err := normalServer(c.Server)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: cluster %s: server %q: %w", file, name, c.Server, err))
		case !p.servers[n]:
			errs = append(errs, fmt.Errorf("%s: cluster %s: the server %s is not one the workflow lets a run file reach (%s): list it in run-file-servers", file, name, c.Server, p.serversFrom))
		}
		if c.ProxyURL != "" && !p.kubeconfigExec {
			errs = append(errs, fmt.Errorf("%s: cluster %s: a proxy-url sends every request through a host the run file chose: refused unless the workflow sets allow-kubeconfig-exec", file, name))
		}
	}
	if p.kubeconfigExec {
		return errors.Join(errs...)
	}
	dir := filepath.Dir(file)
	files := func(what string, names ...string) {
		for _, n := range names {
			if n == "" {
				continue
			}
			if _, err := p.confine(dir, n, false, p.maxFileBytes); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", file, what, err))
			}
		}
	}
	for _, name := range sortedKeys(kc.AuthInfos) {
		a := kc.AuthInfos[name]
		if a.Exec != nil {
			errs = append(errs, fmt.Errorf("%s: user %s runs a command (exec: %s): a kubeconfig a run file names runs no plugin unless the workflow sets allow-kubeconfig-exec", file, name, a.Exec.Command))
		}
		if a.AuthProvider != nil {
			errs = append(errs, fmt.Errorf("%s: user %s uses the auth provider %s: a kubeconfig a run file names runs no plugin unless the workflow sets allow-kubeconfig-exec", file, name, a.AuthProvider.Name))
		}
		files("user "+name, a.TokenFile, a.ClientCertificate, a.ClientKey)
	}
	for _, name := range sortedKeys(kc.Clusters) {
		files("cluster "+name, kc.Clusters[name].CertificateAuthority)
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// masks are the lines of a value read through a reference that become
// masks: those of MinMaskLength characters or more.
func masks(v string) []string {
	var out []string
	for _, l := range strings.Split(v, "\n") {
		if l = strings.TrimSpace(l); len(l) >= MinMaskLength {
			out = append(out, l)
		}
	}
	return out
}

// normalServer is an API server's URL as servers are compared: scheme,
// host and port in lower case, the port made explicit, the path without
// its trailing slash.
func normalServer(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", err
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return "", errors.New("want a URL such as https://k8s.example.com:6443")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port) + strings.TrimSuffix(u.EscapedPath(), "/"), nil
}

// workflowServers are the API servers of the workflow's own kubeconfig:
// the kubeconfig input, else KUBECONFIG, else ~/.kube/config.
func workflowServers(kubeconfig, env string) []string {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if env != "" {
		rules.Precedence = filepath.SplitList(env)
	}
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range raw.Clusters {
		out = append(out, c.Server)
	}
	return out
}
