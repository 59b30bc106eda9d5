package entrypoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/pipeline"
)

// Config is the validated configuration of one run.
type Config struct {
	Command            string
	Path               string
	Inventory          string
	InventoryNamespace string
	Prune, Wait, Force bool
	AllowEmpty         bool
	MaxPrune           pipeline.PruneLimit
	// DeleteFluxApplied: delete-flux-applied.
	DeleteFluxApplied bool
	// RefuseConflicts: field-conflicts refuse.
	RefuseConflicts bool
	// PruneCRDsWithResources: prune-crds-with-resources.
	PruneCRDsWithResources bool
	TakeOwnership          bool
	// ValidateAll dry-runs every object (validate: all).
	ValidateAll bool
	// ReleaseTo is the field manager release hands gantry's fields to.
	ReleaseTo string
	// MaxFileBytes and MaxObjects bound what one build may read.
	MaxFileBytes int64
	MaxObjects   int
	// AllowRemoteBases lets kustomize fetch remote resources.
	AllowRemoteBases bool
	DetailedExitcode bool
	// Output is what diff prints on stdout: text, json or yaml.
	Output          string
	Timeout         time.Duration
	LeaseDuration   time.Duration
	TargetNamespace string
	Patches         []string
	// Substitute is nil when no variables were given (substitution off).
	Substitute     map[string]string
	Kubeconfig     string
	Context        string
	ServiceAccount string
	HealthChecks   []pipeline.ObjectRef
	Concurrency    int
	Report         string
	Revision       string
	Source         string
	// Summary and Comment are auto, true or false.
	Summary, Comment         string
	GitHubToken, GitLabToken string
	Dotenv                   string
	TektonResults            string
	// PathGiven says path was set, not defaulted.
	PathGiven bool
	Artifact  string
	// ArtifactPath is the folder inside a pulled artifact to build.
	ArtifactPath string
	CompareTo    string
	Tags         []string
	Semver       string
	Registry     struct {
		Username, Password string
		Insecure           bool
	}
	AgeRecipients  []age.Recipient
	AgeIdentities  []age.Identity
	SOPSIdentities []age.Identity
	Sign           *artifact.SignOptions
	Verify         *artifact.VerifyOptions
	// Secrets are the values that must never be printed.
	Secrets []string
	// UnitsConcurrency bounds the units of a run file that run at once.
	UnitsConcurrency int
	// Units, with a run file, are the only units to run (unit).
	Units []string
	// Format is plan's output: github, tekton or gitlab.
	Format string
}

// value is one input's raw value and where it came from.
type value struct {
	raw    string
	origin string // --flag, INPUT_X, GANTRY_X or default
}

// EnvName is an input's GitHub Actions variable: INPUT_ upper-cased, hyphens
// kept.
func (in Input) EnvName() string { return "INPUT_" + strings.ToUpper(in.Name) }

// GantryEnvName is an input's variable for GitLab and Tekton.
func (in Input) GantryEnvName() string {
	return "GANTRY_" + strings.ToUpper(strings.ReplaceAll(in.Name, "-", "_"))
}

// resolve reads every input from the command line and env by precedence.
func resolve(inv *invocation, env map[string]string) (map[string]value, error) {
	// A GitHub Actions input gantry does not have is a typo in with:,
	// which the runner passes on with a warning only; it is refused here,
	// as an unknown flag is, rather than silently ignored.
	known := map[string]bool{}
	for _, in := range Inputs {
		known[in.EnvName()] = true
	}
	var unknown []string
	for k := range env {
		if strings.HasPrefix(k, "INPUT_") && !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown input %s: gantry has no such input (see action.yml)", strings.Join(unknown, ", "))
	}

	out := map[string]value{}
	for _, in := range Inputs {
		// A unit of a run file keeps its own setting where a variable
		// holds only the input's default: action.yml and the CI
		// templates set every input, given or not.
		given := func(v string) bool {
			return v != "" && (inv.unit == nil || (v != in.Default && v != in.ActionDefault))
		}
		raw, flagged := inv.flags[in.Name]
		switch {
		case flagged:
			out[in.Name] = value{raw, "--" + in.Name}
		case in.Name == "path" && inv.path != "":
			out[in.Name] = value{inv.path, "the path argument"}
		case given(env[in.EnvName()]):
			out[in.Name] = value{env[in.EnvName()], in.EnvName()}
		case given(env[in.GantryEnvName()]):
			out[in.Name] = value{env[in.GantryEnvName()], in.GantryEnvName()}
		case inv.unit[in.Name].origin != "":
			out[in.Name] = inv.unit[in.Name]
		default:
			out[in.Name] = value{in.Default, "default"}
		}
	}
	out["command"] = value{inv.command, inv.origin}
	return out, nil
}

var (
	envKey        = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	healthCheckRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9]*(?:\.[a-z0-9.-]+)?)/(?:([a-z0-9.-]+)/)?([a-z0-9.:-]+)$`)
	// secretName matches variable names whose values are masked in output.
	secretName = regexp.MustCompile(`(?i)pass|pwd|secret|token|key|cred|auth|cert|private|salt`)
)

// Load reads the command line and validates the whole configuration, as
// configure does. Help, the version and completions are printed to stdout,
// and Load then returns errHelp.
func Load(args []string, env map[string]string, stdout io.Writer) (*Config, error) {
	inv, err := parseCommandLine(args, env, stdout, stdout)
	if err != nil {
		return nil, err
	}
	if inv == nil {
		return nil, errHelp
	}
	return configure(inv, env)
}

// configure resolves and validates the whole configuration. Every problem
// is reported at once, each naming the input and where its value came from.
func configure(inv *invocation, env map[string]string) (*Config, error) {
	vals, err := resolve(inv, env)
	if err != nil {
		return nil, err
	}
	var errs []error
	bad := func(name, format string, a ...any) {
		v := vals[name]
		errs = append(errs, fmt.Errorf("%s (from %s): %s", name, v.origin, fmt.Sprintf(format, a...)))
	}
	boolOf := func(name string) bool {
		b, err := strconv.ParseBool(strings.TrimSpace(vals[name].raw))
		if err != nil {
			bad(name, "%q is not true or false", vals[name].raw)
		}
		return b
	}
	str := func(name string) string { return strings.TrimSpace(vals[name].raw) }

	c := &Config{
		Command:                str("command"),
		Path:                   str("path"),
		Inventory:              str("inventory"),
		InventoryNamespace:     str("inventory-namespace"),
		Prune:                  boolOf("prune"),
		Wait:                   boolOf("wait"),
		Force:                  boolOf("force"),
		AllowEmpty:             boolOf("allow-empty"),
		PruneCRDsWithResources: boolOf("prune-crds-with-resources"),
		DeleteFluxApplied:      boolOf("delete-flux-applied"),
		TakeOwnership:          boolOf("take-ownership"),
		ReleaseTo:              strings.TrimSpace(vals["release-to"].raw),
		AllowRemoteBases:       boolOf("allow-remote-bases"),
		DetailedExitcode:       boolOf("detailed-exitcode"),
		Output:                 strings.TrimSpace(vals["output"].raw),
		TargetNamespace:        str("target-namespace"),
		Kubeconfig:             str("kubeconfig"),
		Context:                str("context"),
		ServiceAccount:         str("service-account"),
		Report:                 str("report"),
		Revision:               str("revision"),
		Summary:                str("summary"),
		Comment:                str("comment"),
		GitHubToken:            str("github-token"),
		GitLabToken:            str("gitlab-token"),
		Dotenv:                 str("dotenv"),
		TektonResults:          str("tekton-results"),
	}
	c.PathGiven = vals["path"].origin != "default"
	c.Artifact, c.Semver, c.CompareTo = str("artifact"), str("semver"), str("compare-to")
	c.Tags = lines(vals["tags"].raw)
	if c.ArtifactPath = str("artifact-path"); c.ArtifactPath != "" {
		clean := filepath.Clean(strings.TrimPrefix(c.ArtifactPath, "./"))
		switch {
		case !filepath.IsLocal(clean):
			bad("artifact-path", "%q is not a folder inside the artifact (relative, without ..)", c.ArtifactPath)
		case c.PathGiven && (c.Command == "apply" || c.Command == "diff"):
			bad("artifact-path", "is for apply and diff from an artifact; with path, they build path and push it")
		}
		c.ArtifactPath = clean
	}
	c.Registry.Username, c.Registry.Password = str("registry-username"), str("registry-password")
	c.Registry.Insecure = boolOf("insecure-registry")
	if c.Registry.Password != "" {
		c.Secrets = append(c.Secrets, c.Registry.Password)
	}
	if raw := vals["age-recipients"].raw; strings.TrimSpace(raw) != "" {
		r, err := artifact.ParseRecipients(raw)
		if err != nil {
			bad("age-recipients", "%v", err)
		}
		c.AgeRecipients = r
	}
	if raw := vals["sops-age-key"].raw; strings.TrimSpace(raw) != "" {
		raw, err := keyText(raw)
		var ids []age.Identity
		if err == nil {
			c.Secrets = append(c.Secrets, raw)
			ids, err = artifact.ParseIdentities(raw)
		}
		if err != nil {
			bad("sops-age-key", "%v", err)
		}
		c.SOPSIdentities = ids
	}
	if raw := vals["age-identities"].raw; strings.TrimSpace(raw) != "" {
		raw, err := keyText(raw)
		var ids []age.Identity
		if err == nil {
			c.Secrets = append(c.Secrets, raw)
			ids, err = artifact.ParseIdentities(raw)
		}
		if err != nil {
			bad("age-identities", "%v", err)
		}
		c.AgeIdentities = ids
	}
	switch v := str("validate"); v {
	case "changed", "all":
		c.ValidateAll = v == "all"
	default:
		bad("validate", "%q: want changed or all", v)
	}
	switch c.Output {
	case "text", "json", "yaml":
	default:
		bad("output", "%q: want text, json or yaml", c.Output)
	}
	switch c.Command {
	case "push", "pull", "tag", "list", "inspect", "diff-artifact":
		if c.Artifact == "" {
			bad("artifact", "required for %s", c.Command)
		}
	}
	if c.Command == "diff-artifact" {
		switch {
		case c.CompareTo == "":
			bad("compare-to", "required for diff-artifact: an oci:// artifact or a folder")
		case strings.HasPrefix(c.CompareTo, "oci://"):
			if _, err := artifact.ParseRef(c.CompareTo, c.Registry.Insecure); err != nil {
				bad("compare-to", "%v", err)
			}
		default:
			if info, err := os.Stat(c.CompareTo); err != nil || !info.IsDir() {
				bad("compare-to", "%s is neither an oci:// artifact nor a folder", c.CompareTo)
			}
		}
	}
	if c.Artifact != "" {
		if c.Command == "list" {
			if err := artifact.ValidRepository(c.Artifact); err != nil {
				bad("artifact", "%v", err)
			}
		} else if _, err := artifact.ParseRef(c.Artifact, c.Registry.Insecure); err != nil {
			bad("artifact", "%v", err)
		}
	}
	switch str("sign") {
	case "":
	case "cosign":
		if str("cosign-key") == "" && (env["ACTIONS_ID_TOKEN_REQUEST_URL"] == "" || env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] == "") {
			bad("sign", "cosign without cosign-key signs keyless, which needs the CI's OIDC identity (on GitHub: permissions: id-token: write); give cosign-key otherwise")
		}
		c.Sign = &artifact.SignOptions{KeyRef: str("cosign-key"), Password: []byte(vals["cosign-password"].raw),
			FulcioURL: str("fulcio-url"), RekorURL: str("rekor-url")}
	default:
		bad("sign", "%q is not cosign or empty", str("sign"))
	}
	if pw := vals["cosign-password"].raw; pw != "" {
		c.Secrets = append(c.Secrets, pw)
	}
	for _, name := range []string{"cosign-key", "cosign-public-key"} {
		if v, ok := strings.CutPrefix(str(name), "env://"); ok && env[v] != "" {
			c.Secrets = append(c.Secrets, env[v])
		}
	}
	switch str("verify") {
	case "":
	case "cosign":
		v := &artifact.VerifyOptions{PublicKeyRef: str("cosign-public-key"),
			Identity: str("certificate-identity"), IdentityRegexp: str("certificate-identity-regexp"),
			Issuer: str("certificate-oidc-issuer"), IssuerRegexp: str("certificate-oidc-issuer-regexp")}
		if v.PublicKeyRef == "" {
			if v.Identity == "" && v.IdentityRegexp == "" {
				bad("certificate-identity", "keyless verification (verify: cosign without cosign-public-key) needs certificate-identity or certificate-identity-regexp")
			}
			if v.Issuer == "" && v.IssuerRegexp == "" {
				bad("certificate-oidc-issuer", "keyless verification needs certificate-oidc-issuer or certificate-oidc-issuer-regexp")
			}
			for _, name := range []string{"certificate-identity-regexp", "certificate-oidc-issuer-regexp"} {
				if _, err := regexp.Compile(str(name)); err != nil {
					bad(name, "%v", err)
				}
			}
			if p := str("certificate-roots"); p != "" {
				b, err := os.ReadFile(p)
				if err != nil {
					bad("certificate-roots", "%v", err)
				}
				v.RootsPEM = b
			}
		}
		c.Verify = v
	default:
		bad("verify", "%q is not cosign or empty", str("verify"))
	}
	if c.Command == "tag" && len(c.Tags) == 0 {
		bad("tags", "required for tag")
	}
	if c.Command == "pull" {
		if !c.PathGiven {
			bad("path", "required for pull: the folder to write the artifact's files to")
		} else if entries, err := os.ReadDir(c.Path); err == nil && len(entries) > 0 {
			bad("path", "%s is not empty; pull writes into an empty or new folder", c.Path)
		}
	}
	for _, name := range []string{"summary", "comment"} {
		if v := str(name); v != "auto" && v != "true" && v != "false" {
			bad(name, "%q is not auto, true or false", v)
		}
	}
	for _, tok := range []string{c.GitHubToken, c.GitLabToken, env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"]} {
		if tok != "" {
			c.Secrets = append(c.Secrets, tok)
		}
	}

	// The command is one of gantry's: parseCommandLine refused others.
	// apply and diff with an artifact and no path pull instead of building.
	pulls := (c.Command == "apply" || c.Command == "diff") && c.Artifact != "" && !c.PathGiven
	needsBuild := (c.Command == "build" || c.Command == "diff" || c.Command == "apply" || c.Command == "push") && !pulls
	if needsBuild {
		if info, err := os.Stat(c.Path); err != nil {
			bad("path", "%s does not exist", c.Path)
		} else if !info.IsDir() {
			bad("path", "%s is not a directory", c.Path)
		}
	}
	if c.Inventory == "" && (c.Command == "apply" || c.Command == "delete" || c.Command == "release") {
		bad("inventory", "required for %s", c.Command)
	}
	if c.Inventory != "" {
		for _, msg := range validation.IsDNS1123Label(c.Inventory) {
			bad("inventory", "%q: %s", c.Inventory, msg)
		}
		if len(c.Inventory) > 56 {
			bad("inventory", "%q is longer than 56 characters", c.Inventory)
		}
	}
	for _, msg := range validation.IsDNS1123Label(c.InventoryNamespace) {
		bad("inventory-namespace", "%q: %s", c.InventoryNamespace, msg)
	}
	if c.TargetNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(c.TargetNamespace) {
			bad("target-namespace", "%q: %s", c.TargetNamespace, msg)
		}
	}
	if d, err := time.ParseDuration(str("timeout")); err != nil || d <= 0 {
		bad("timeout", "%q is not a positive duration such as 90s or 5m", vals["timeout"].raw)
	} else {
		c.Timeout = d
	}
	switch str("field-conflicts") {
	case "take":
	case "refuse":
		c.RefuseConflicts = true
	default:
		bad("field-conflicts", "%q is neither take nor refuse", vals["field-conflicts"].raw)
	}
	if raw := strings.TrimSpace(str("max-prune")); raw != "" {
		if pct, ok := strings.CutSuffix(raw, "%"); ok {
			n, err := strconv.Atoi(pct)
			if err != nil || n < 0 || n > 100 {
				bad("max-prune", "%q is not a percentage from 0%% to 100%%", raw)
			}
			c.MaxPrune = pipeline.PruneLimit{Percent: n, Given: true}
		} else {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 {
				bad("max-prune", "%q is neither a count of objects (such as 40) nor a percentage (such as 80%%)", raw)
			}
			c.MaxPrune = pipeline.PruneLimit{Count: n, Given: true}
		}
	}
	if d, err := time.ParseDuration(str("lease-duration")); err != nil || d < 3*time.Second || d%time.Second != 0 {
		bad("lease-duration", "%q is not a whole number of seconds of at least 3s, such as 30s or 2m", vals["lease-duration"].raw)
	} else {
		c.LeaseDuration = d
	}
	c.Units = lines(vals["unit"].raw)
	switch c.Format = str("format"); c.Format {
	case "github", "tekton", "gitlab":
	default:
		bad("format", "%q is not github, tekton or gitlab", c.Format)
	}
	if n, err := strconv.Atoi(str("units-concurrency")); err != nil || n < 1 || n > 64 {
		bad("units-concurrency", "%q is not a whole number from 1 to 64", vals["units-concurrency"].raw)
	} else {
		c.UnitsConcurrency = n
	}
	if n, err := strconv.Atoi(str("concurrency")); err != nil || n < 1 || n > 256 {
		bad("concurrency", "%q is not a whole number from 1 to 256", vals["concurrency"].raw)
	} else {
		c.Concurrency = n
	}
	if n, err := strconv.ParseInt(str("max-file-bytes"), 10, 64); err != nil || n < 1 {
		bad("max-file-bytes", "%q is not a positive whole number of bytes", vals["max-file-bytes"].raw)
	} else {
		c.MaxFileBytes = n
	}
	if n, err := strconv.Atoi(str("max-objects")); err != nil || n < 1 {
		bad("max-objects", "%q is not a positive whole number", vals["max-objects"].raw)
	} else {
		c.MaxObjects = n
	}
	for _, p := range lines(vals["patches"].raw) {
		if info, err := os.Stat(p); err != nil || info.IsDir() {
			bad("patches", "patch file %s does not exist", p)
		}
		c.Patches = append(c.Patches, p)
	}
	if subs := lines(vals["substitute"].raw); len(subs) > 0 {
		c.Substitute = map[string]string{}
		for i, l := range subs {
			k, v, ok := strings.Cut(l, "=")
			k = strings.TrimSpace(k)
			if !ok || !envKey.MatchString(k) {
				// Never echo the line: it may hold a secret value.
				bad("substitute", "line %d is not KEY=VALUE with KEY a variable name", i+1)
				continue
			}
			c.Substitute[k] = v
			if v != "" && secretName.MatchString(k) {
				c.Secrets = append(c.Secrets, v)
			}
		}
	}
	if c.Kubeconfig != "" {
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			bad("kubeconfig", "%s does not exist", c.Kubeconfig)
		}
	}
	if c.ServiceAccount != "" {
		ns, name, ok := strings.Cut(c.ServiceAccount, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			bad("service-account", "%q is not namespace/name", c.ServiceAccount)
		}
	}
	for _, l := range lines(vals["health-checks"].raw) {
		m := healthCheckRe.FindStringSubmatch(l)
		if m == nil {
			bad("health-checks", "%q is not Kind/namespace/name or Kind/name", l)
			continue
		}
		c.HealthChecks = append(c.HealthChecks, pipeline.ObjectRef{Kind: m[1], Namespace: m[2], Name: m[3]})
	}
	if c.Report != "" {
		if dir := filepath.Dir(c.Report); dir != "." {
			if info, err := os.Stat(dir); err == nil && !info.IsDir() {
				bad("report", "%s is not a directory", dir)
			}
		}
	}
	if c.Revision == "" {
		c.Revision = firstNonEmpty(env["GITHUB_SHA"], env["CI_COMMIT_SHA"])
		if ref := firstNonEmpty(env["GITHUB_REF_NAME"], env["CI_COMMIT_REF_NAME"]); ref != "" && c.Revision != "" {
			c.Revision = ref + "@sha1:" + c.Revision // Flux's revision form
		}
	}
	switch {
	case str("source") != "":
		c.Source = str("source")
	case env["GITHUB_SERVER_URL"] != "" && env["GITHUB_REPOSITORY"] != "":
		c.Source = env["GITHUB_SERVER_URL"] + "/" + env["GITHUB_REPOSITORY"]
	case env["CI_PROJECT_URL"] != "":
		c.Source = env["CI_PROJECT_URL"]
	default:
		c.Source = c.Path
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, nil
}

// lines splits a multi-line input, dropping blank lines and # comments.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// keyText returns the key text an age identity input holds: the value
// itself when it is key text (it starts with AGE-SECRET-KEY- or a PEM
// header, or has several lines), else the content of the file it names
// (relative to the working directory), as age's -i and kustomizer's
// --age-identities take it. Errors never echo the value: it may be a
// mistyped key.
func keyText(raw string) (string, error) {
	v := strings.TrimSpace(raw)
	if strings.HasPrefix(strings.ToUpper(v), "AGE-SECRET-KEY-") || strings.HasPrefix(v, "-----BEGIN") || strings.Contains(v, "\n") {
		return raw, nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // without the path, which might be a mistyped key
		}
		return "", fmt.Errorf("neither age key text (AGE-SECRET-KEY-1...) nor a file that can be read (%w)", err)
	}
	return string(b), nil
}
