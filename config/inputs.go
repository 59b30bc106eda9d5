package config

import "github.com/gantry-dev/gantry/schemas/releases"

// knownReleases are the Kubernetes releases offline validation knows.
const knownReleases = releases.Oldest + " to " + releases.Newest

// Input is one setting of gantry. Its kebab-case Name is the CLI flag
// (--name), the GitHub Actions input (INPUT_NAME, upper-cased, hyphens kept)
// and the environment variable for GitLab and Tekton (GANTRY_NAME, hyphens
// as underscores). Precedence: flag, INPUT_*, GANTRY_*, Default.
type Input struct {
	Name        string
	Default     string
	Description string
	// Bool inputs may be given as a bare flag (--prune).
	Bool bool
	// Lines inputs take one value per line; as a flag they may also be
	// repeated, one value each.
	Lines bool
	// Group is the heading a command's help lists the flag under; the
	// others are listed with --help, under Other flags.
	Group string
	// For names the commands that read the input, space-separated. Only
	// those take it as a flag; variables are read whatever the command.
	For string
	// Secret inputs hold credentials or values that must never be printed.
	Secret bool
	// ActionDefault, when set, is action.yml's default where it differs
	// from the CLI's (an expression only a workflow can evaluate).
	ActionDefault string
}

// Flag groups, in the order a command's help lists them.
const (
	groupSource    = "Source"
	groupArtifact  = "Artifact"
	groupSigning   = "Signing"
	groupCluster   = "Cluster"
	groupReporting = "Reporting"
)

var Groups = []string{groupSource, groupCluster, groupArtifact, groupSigning, groupReporting}

// Inputs is the one table of settings; action.yml and the reference docs
// are checked against it.
var Inputs = []Input{
	{Name: "command", ActionDefault: "apply", Description: "What to run: build, diff, validate, apply, rollback, history, drift, delete, release, inventory, push, pull, tag, list, inspect, diff-artifact or plan. On the command line it is the first argument (gantry apply); gantry --help lists them, and gantry <command> --help gives the flags of each."},
	{Name: "path", Group: groupSource, For: "build diff apply push pull validate drift", Default: ".", Description: "Kustomize overlay, or a plain folder of manifests (as if a kustomization listed every .yaml, .yml and .json file below it, hidden files and folders such as .sops.yaml left out). With artifact, apply and diff build from path and push when path is given, and pull the artifact when it is not. For pull, the folder to write to."},
	{Name: "run-file", Group: groupSource, For: "diff apply delete validate plan drift", Description: "A run file (gantry.yaml) listing several units, each with the inputs of one run, its depends-on and suspend, and defaults: for what they share. Units run as their dependencies allow, on their own clusters and inventories, and report as one run. Inputs given as flags or variables apply to every unit, over the file. docs/units.md describes it; schemas/run-file.json lets an editor complete it."},
	{Name: "workspace", Group: groupSource, For: "diff apply delete validate plan drift", Description: "With run-file: the folder every path a run file names (path, patches, crds, kubeconfig, {file: ...} references, and the files a kubeconfig it names reads) must lie in, links resolved. Default: GITHUB_WORKSPACE, else CI_PROJECT_DIR, else the git repository that holds the working directory, else the working directory."},
	{Name: "run-file-env", Group: groupSource, For: "diff apply delete validate plan drift", Lines: true, Description: "With run-file: the environment variables a run file may read with {env: NAME}, one name or pattern (APP_*) per line. Default: none. CI's own credentials (GITHUB_TOKEN, ACTIONS_*, CI_JOB_TOKEN, CI_JOB_JWT*, CI_REGISTRY_PASSWORD, ...) and INPUT_* and GANTRY_* variables are never read, whatever this says. Every value read through a reference is a secret: masked in every output."},
	{Name: "run-file-servers", Group: groupCluster, For: "diff apply delete validate drift", Lines: true, Description: "With run-file: the API servers (a kubeconfig's server URL, one per line) that a kubeconfig the run file names may reach. Default: the servers of the workflow's own kubeconfig (kubeconfig, else KUBECONFIG, else ~/.kube/config). A run file's kubeconfig that names another server, or a proxy-url, is refused: what gantry sends a cluster (decrypted SOPS values, values read through references) goes only where the workflow said."},
	{Name: "allow-kubeconfig-exec", Group: groupCluster, For: "diff apply delete validate drift", Default: "false", Bool: true, Description: "With run-file: let a kubeconfig the run file names run its exec or auth-provider plugin and read token and certificate files outside the workspace (as Flux's --insecure-kubeconfig-exec). Without it such a kubeconfig is refused before anything is read or sent. A kubeconfig given as a flag or variable is the workflow's own and is always used as it is."},
	{Name: "units-concurrency", Group: groupSource, For: "diff apply delete drift", Default: "4", Description: "With run-file: how many units run at once, as their dependencies allow."},
	{Name: "unit", Group: groupSource, For: "diff apply delete drift", Lines: true, Description: "With run-file: run only these units (one per line), as a CI engine's job for each unit runs them (gantry plan writes such jobs); the engine orders them. A unit others depend on still waits to be healthy."},
	{Name: "format", For: "plan", Default: "github", Description: "For plan: github (a matrix per dependency level, as JSON for fromJSON), tekton (a Pipeline of the gantry Task, runAfter from depends-on) or gitlab (a child pipeline, needs from depends-on)."},
	{Name: "artifact", Group: groupArtifact, For: "diff apply release push pull tag list inspect diff-artifact drift", Description: "OCI artifact, oci://registry/repository[:tag|@digest], in Flux's format: push builds and pushes it; pull, tag and inspect read it; list takes a repository; apply and diff pull it (or, with path, push it first); release prints the Flux OCIRepository and Kustomization that reconcile it."},
	{Name: "artifact-path", Group: groupArtifact, For: "diff apply release drift", Description: "For apply and diff from an artifact: the folder inside it to build, as Flux's Kustomization spec.path, for artifacts that hold several apps. Default: the artifact's root."},
	{Name: "compare-to", Group: groupArtifact, For: "diff-artifact", Description: "For diff-artifact: the other side, an oci:// artifact or a folder to build. The artifact's objects are compared with it, object by object, Secret values masked."},
	{Name: "tags", Group: groupArtifact, For: "diff apply push tag", Lines: true, Description: "Extra tags, one per line: for push, added to the pushed artifact; for tag, the tags to add."},
	{Name: "semver", Group: groupArtifact, For: "list", Description: "For list: only tags matching this semver constraint, such as >=1.0.0 or 1.x."},
	{Name: "registry-username", Group: groupArtifact, For: "diff apply release push pull tag list inspect diff-artifact validate rollback drift", Description: "Registry user name. Default: the Docker config's credentials (DOCKER_CONFIG), and on GitHub the workflow token for ghcr.io."},
	{Name: "registry-password", Group: groupArtifact, For: "diff apply release push pull tag list inspect diff-artifact validate rollback drift", Secret: true, Description: "Registry password or token, with registry-username."},
	{Name: "age-recipients", Group: groupArtifact, For: "diff apply push", Lines: true, Description: "Encrypt pushed artifacts with age for these recipients: age1... or ssh-ed25519/ssh-rsa public keys, one per line. Encrypted artifacts are for gantry (Flux cannot decrypt them), and their digest differs on every push."},
	{Name: "age-identities", Group: groupArtifact, For: "diff apply pull diff-artifact rollback drift", Secret: true, Description: "age identities (AGE-SECRET-KEY-1... lines) or an OpenSSH private key, or the path of a file holding them (as age -i takes it), to decrypt encrypted artifacts on pull, apply and diff."},
	{Name: "sign", Group: groupSigning, For: "diff apply push", Description: "Sign pushed artifacts: cosign, or empty for no signature. The digest is signed, never a tag. With cosign-key, with that key; without, keyless: an ephemeral key certified by Fulcio for the CI's OIDC identity (on GitHub: permissions: id-token: write), the signature recorded in Rekor."},
	{Name: "cosign-key", Group: groupSigning, For: "diff apply push", Description: "The cosign private key: a file, env://VAR, or a KMS reference as cosign accepts it (awskms://, gcpkms://, azurekms://, hashivault://)."},
	{Name: "cosign-password", Group: groupSigning, For: "diff apply push", Secret: true, Description: "The password of an encrypted cosign-key."},
	{Name: "fulcio-url", Group: groupSigning, For: "diff apply push", Default: "https://fulcio.sigstore.dev", Description: "Fulcio, for keyless signing."},
	{Name: "rekor-url", Group: groupSigning, For: "diff apply push", Default: "https://rekor.sigstore.dev", Description: "Rekor, for keyless signing."},
	{Name: "verify", Group: groupSigning, For: "diff apply release pull inspect diff-artifact rollback drift", Description: "Verify artifacts before anything is pulled from them: cosign, or empty. With cosign-public-key, against that key; without, keyless: the certificate must chain to Fulcio's roots and name certificate-identity and certificate-oidc-issuer. An unsigned, wrongly signed or tampered artifact is refused and nothing is applied."},
	{Name: "cosign-public-key", Group: groupSigning, For: "diff apply release pull inspect diff-artifact rollback drift", Description: "The cosign public key to verify with: a file, env://VAR or a KMS reference."},
	{Name: "certificate-identity", Group: groupSigning, For: "diff apply release pull inspect diff-artifact rollback drift", Description: "For keyless verification: the signer the certificate must name, such as https://github.com/OWNER/REPO/.github/workflows/deploy.yml@refs/heads/main."},
	{Name: "certificate-identity-regexp", Group: groupSigning, For: "diff apply release pull inspect diff-artifact rollback drift", Description: "For keyless verification: a regular expression the certificate's signer must match, instead of certificate-identity."},
	{Name: "certificate-oidc-issuer", Group: groupSigning, For: "diff apply release pull inspect diff-artifact rollback drift", Description: "For keyless verification: the OIDC issuer the certificate must name, such as https://token.actions.githubusercontent.com."},
	{Name: "certificate-oidc-issuer-regexp", Group: groupSigning, For: "diff apply release pull inspect diff-artifact rollback drift", Description: "For keyless verification: a regular expression the issuer must match, instead of certificate-oidc-issuer."},
	{Name: "certificate-roots", Group: groupSigning, For: "diff apply release pull inspect diff-artifact rollback drift", Description: "For keyless verification against a private Fulcio: a PEM file of its root certificates (the transparency log is then not consulted). Default: the public Sigstore roots and Rekor keys, from Sigstore's TUF repository."},
	{Name: "registry-hosts", Group: groupArtifact, For: "diff apply release push pull tag list inspect diff-artifact validate rollback drift", Lines: true, Description: "Registries (host or host:port, one per line) that registry-username and registry-password are sent to, besides those of the artifact, compare-to and crds the workflow itself gives. Credentials go to no other registry: not to one a run file names (unless listed here), nor to the one a revision recorded."},
	{Name: "insecure-registry", Group: groupArtifact, For: "diff apply release push pull tag list inspect diff-artifact validate rollback drift", Default: "false", Bool: true, Description: "Allow plain HTTP to the registry. Without it, only loopback registries are reached over HTTP."},
	{Name: "inventory", Group: groupCluster, For: "diff apply delete release inventory rollback history drift", Description: "Name of the inventory that records what was applied, for prune. Required for apply, delete and release."},
	{Name: "inventory-namespace", Group: groupCluster, For: "diff apply delete release inventory rollback history drift", Default: "default", Description: "Namespace of the inventory's ConfigMap and Lease."},
	{Name: "prune", Group: groupCluster, For: "diff apply release rollback", Default: "true", Bool: true, Description: "Delete objects that a previous run applied and this one no longer has."},
	{Name: "atomic", Group: groupCluster, For: "apply", Default: "false", Bool: true, Description: "When the apply, prune or wait fails after validation passed, roll back at once to the inventory's last revision that succeeded (as rollback does), and report both: the failure as the cause, the rollback's outcome as the result (RolledBack). The run still exits 1: the deploy failed."},
	{Name: "history", Group: groupCluster, For: "apply rollback drift", Description: "How many revisions of the inventory are kept in the cluster, for history and rollback: each apply records one (a Secret holding the applied objects compressed, or an artifact's digest), and deletes the oldest beyond this number, but never the newest that succeeded, and a run that fails deletes none that succeeded. Default: as many as the inventory's newest revision was kept with (so a manual rollback keeps what the pipeline's apply said), else 5."},
	{Name: "correct", Group: groupCluster, For: "drift", Default: "false", Bool: true, Description: "For drift: when something drifted, apply again the objects that drifted (validated and waited for as apply does; nothing is pruned), taking back the fields changed or added by hand, so that the cluster is as gantry applied it. Fields other controllers changed (an HPA's replicas, cert-manager's caBundle) are left to them. The run still exits 3: drift was found."},
	{Name: "hand-managers", Group: groupCluster, For: "drift", Lines: true, Description: "For drift: more field managers, one per line, whose changes are drift made by hand (reported, and taken back by correct), besides kubectl's (kubectl, kubectl-edit, kubectl-scale, ...) and before-first-apply. Fields of every other manager are reported as managed by it, never taken."},
	{Name: "to", Group: groupCluster, For: "rollback", Description: "For rollback: the revision to apply again, by its number in gantry history. Default: the last revision that succeeded before the current one and differs from it."},
	{Name: "wait", Group: groupCluster, For: "apply rollback drift", Default: "true", Bool: true, Description: "Wait until every applied object is ready (kstatus)."},
	{Name: "timeout", For: "diff apply delete release inventory push pull tag list inspect diff-artifact validate rollback history drift", Default: "5m", Description: "Bounds everything but the build: an artifact's push or pull, the inventory lock, validate, apply, prune and wait."},
	{Name: "force", Group: groupCluster, For: "diff apply delete rollback", Default: "false", Bool: true, Description: "Recreate objects whose immutable fields changed. Each is first dry-run as a new object: one the API server would refuse fails validation and is never deleted. A bound PersistentVolumeClaim, whose volume's reclaim policy may delete the data, and a StatefulSet whose claim retention policy deletes its claims, are recreated only when annotated gantry.dev/force: enabled themselves; a CRD whose custom resources exist, only with prune-crds-with-resources."},
	{Name: "delete-flux-applied", Group: groupCluster, For: "diff apply delete rollback", Default: "false", Bool: true, Description: "For prune and delete: also delete objects that Flux now applies (its kustomize-controller owns their fields), which are otherwise left alone: Flux would recreate them, as new objects."},
	{Name: "release-to", Group: groupCluster, For: "release", Default: "kustomize-controller", Description: "For release: the field manager that takes over the fields gantry's field manager owns (Flux's kustomize-controller by default), so that its next apply can remove fields; empty leaves them unowned."},
	{Name: "target-namespace", Group: groupSource, For: "build diff apply push validate drift", Description: "Set the namespace of every namespaced object."},
	{Name: "patches", Group: groupSource, For: "build diff apply push validate drift", Lines: true, Description: "Extra patch files applied on top of the build, one path per line."},
	{Name: "substitute", Group: groupSource, For: "build diff apply push validate drift", Lines: true, Secret: true, Description: "KEY=VALUE lines for ${KEY} and ${KEY:=default} substitution after the build. Substitution runs only when this is given (as in Flux); it is strict: a variable with neither value nor default is an error. Lines are never echoed in errors; the values of variables whose names suggest a secret (PASSWORD, TOKEN, SECRET, KEY, CRED, AUTH, CERT, PRIVATE, PWD, SALT) are masked in all output."},
	{Name: "sops-age-key", Group: groupSource, For: "build diff apply release push diff-artifact validate rollback drift", Secret: true, Description: "age identities (AGE-SECRET-KEY-1... lines), or the path of a file holding them (such as age-keygen's output), that decrypt SOPS-encrypted files (manifests, patches, generator sources in every sops format) and objects at build time, as Flux does. An encrypted file without a key that opens it is an error naming the file; nothing encrypted is ever applied, and decrypted values are masked in all output."},
	{Name: "kubeconfig", Group: groupCluster, For: "diff apply delete release inventory validate rollback history drift", Description: "Path of a kubeconfig file. Default: $KUBECONFIG, then the in-cluster configuration."},
	{Name: "context", Group: groupCluster, For: "diff apply delete release inventory validate rollback history drift", Description: "The kubeconfig context to use."},
	{Name: "service-account", Group: groupCluster, For: "diff apply delete release inventory validate rollback history drift", Description: "namespace/name of a service account to impersonate, so that its RBAC bounds what the run may touch."},
	{Name: "health-checks", Group: groupCluster, For: "apply rollback drift", Lines: true, Description: "Objects to wait for, one Kind/namespace/name (or Kind/name) per line; the kind may carry its group, as gantry prints it (Deployment.apps/shop/web). Default: everything applied."},
	{Name: "lease-duration", Group: groupCluster, For: "diff apply delete release rollback drift", Default: "30s", Description: "How long the inventory's Lease stays valid without renewal: a run that died holds others up this long. A run renews it every quarter of this, and writes only within two thirds of it after its last renewal: a run that could not renew it for that long (a paused runner, a lost connection) or that another run took it from stops writing and fails with reason LeaseLost, saving nothing over the other run's inventory."},
	{Name: "concurrency", Group: groupCluster, For: "diff apply delete release inventory validate rollback history drift", Default: "16", Description: "How many API requests gantry keeps in flight."},
	{Name: "max-file-bytes", Group: groupSource, For: "build diff apply push validate drift", Default: "33554432", Description: "The largest file a build reads, in bytes (32 MiB; the largest CRDs people ship are a few MB). A larger file fails the build naming it, as does YAML whose aliases expand out of proportion (a YAML bomb), before it is parsed."},
	{Name: "allow-remote-bases", Group: groupSource, For: "build diff apply push validate drift", Default: "false", Bool: true, Description: "Let kustomize fetch resources and components that are URLs (git or HTTP). Without it a build reads nothing but the workspace, and a remote entry fails it at once, naming the kustomization, with no network request."},
	{Name: "max-objects", Group: groupSource, For: "build diff apply push validate drift", Default: "100000", Description: "The most objects one build may produce; more fail the build."},
	{Name: "max-artifact-bytes", Group: groupArtifact, For: "diff apply rollback drift validate pull diff-artifact", Default: "104857600", Description: "The most bytes an artifact pulled may download and unpack to (100 MiB, the bound Flux's source-controller sets). A larger one is refused (exit 2) before more of it is written."},
	{Name: "max-artifact-files", Group: groupArtifact, For: "diff apply rollback drift validate pull diff-artifact", Default: "10000", Description: "The most files an artifact pulled may unpack to. More are refused (exit 2) before any is written."},
	{Name: "offline", Group: groupSource, For: "validate diff", Bool: true, Default: "false", Description: "For validate, and for diff with base: check with no cluster and no credentials. Built-in kinds are checked against the schemas of kubernetes-version, embedded in gantry, and the API server's own handwritten validation of the kinds people ship most; custom resources against the CRDs of the set and of crds, CEL rules included. An apiVersion the release no longer serves is named with the release that removed it and its replacement. The README's Offline validation lists what only a cluster checks."},
	{Name: "base", Group: groupSource, For: "diff", Description: "With offline, for diff: the git revision (a branch, tag, commit or expression such as origin/main or HEAD~1) to compare with. The same path is built as it was there, with the same inputs, read from the repository's objects (a shallow clone needs the base fetched too); SOPS files are compared as ciphertext unless sops-age-key is given. The head is validated offline, and the diff reported as a live diff is, with a comment of its own."},
	{Name: "kubernetes-version", Group: groupSource, For: "validate diff", Default: releases.Newest, Description: "With offline: the Kubernetes minor release whose built-in kinds are checked (" + knownReleases + ")."},
	{Name: "crds", Group: groupSource, For: "validate diff", Lines: true, Description: "With offline: where the CustomResourceDefinitions are of the custom resources the set uses but does not define (such as a Flux or cert-manager install), one per line: a folder (plain or a kustomize overlay) or an oci:// artifact, pulled with the registry inputs and verified when verify is set."},
	{Name: "allow-unknown-kinds", Group: groupSource, For: "validate diff", Lines: true, Description: "With offline: API groups (one per line; core for the core group) whose kinds pass unchecked when no CRD defines them. Any other kind that is neither built in nor defined is an error."},
	{Name: "validate", Group: groupCluster, For: "diff apply rollback", Default: "changed", Description: "Which objects get a server-side dry-run: changed (an object whose live state already holds every value gantry would apply, with no field of gantry's left out, is decided unchanged from the LIST gantry reads, without a dry-run; everything else is dry-run) or all (every object, so that admission webhooks and policies re-check each one on every run). The README's What validate guarantees says what the first does not check."},
	{Name: "take-ownership", Group: groupCluster, For: "diff apply rollback", Default: "false", Bool: true, Description: "Take over objects that carry another gantry inventory's labels. Without it such objects fail validation, naming both inventories, and nothing is written."},
	{Name: "field-conflicts", Group: groupCluster, For: "diff apply rollback", Default: "take", Description: "What to do with fields another field manager owns and this run would change (an HPA's replicas, a value a controller or helm set): take (the default) takes them, and diff and apply name each field and its manager on the console, in the report, the summary and the comment; refuse fails those objects before anything is written (exit 1), as kubectl does without --force-conflicts. Fields of kubectl's managers (kubectl apply, client-side or server-side, edit, patch, scale) are taken silently either way, as Flux does."},
	{Name: "max-prune", Group: groupCluster, For: "diff apply rollback", Description: "The most objects one prune may delete: a count (40) or a percentage of what the inventory lists (80%; 100% allows any prune). A prune over it is refused before anything is written, naming the count, and diff says the same. Default: no more than half of the inventory, when that is more than 10 objects, which catches the mistakes that silently shrink a set (a folder renamed, a path mistyped, manifests moved elsewhere)."},
	{Name: "prune-crds-with-resources", Group: groupCluster, For: "diff apply rollback", Default: "false", Bool: true, Description: "Let prune delete a CustomResourceDefinition the set no longer has while custom resources of its kind still exist in the cluster, which deletes every one of them with it. Without it such a CRD is kept, reported as kept, and stays in the inventory. A CRD whose kind the set still applies, and a Namespace that holds objects of the set or the inventory, are never pruned. The same holds for force: a CRD whose immutable fields changed is recreated while custom resources of its kind exist only with this set; without it, validation fails naming one of them."},
	{Name: "allow-empty", Group: groupCluster, For: "diff apply rollback", Default: "false", Bool: true, Description: "Allow a build with no objects to prune everything the inventory holds."},
	{Name: "output", Group: groupReporting, For: "diff diff-artifact history validate apply rollback drift delete release", Default: "text", Description: "What a command prints on stdout. For diff, text: each changed object's unified diff (coloured on a terminal unless NO_COLOR is set), by kind, namespace and name, then a summary line. json or yaml, for every command that reports: the result, as the report holds it (for diff-artifact, each object with its state: changed, only-artifact, only-compared or same; for history, the revisions). Secret values are masked in all of them."},
	{Name: "detailed-exitcode", Group: groupReporting, For: "diff diff-artifact", Default: "false", Bool: true, Description: "With diff: exit 3 when there are changes."},
	{Name: "report", Group: groupReporting, For: "diff apply delete release push validate rollback drift", Description: "Write the run's result as JSON to this path, and every diff next to it (same name, .diff); - writes it to stdout (its diffs are in it). Default on GitHub and GitLab: .gantry/report.json in the working directory; elsewhere none."},
	{Name: "color", Group: groupReporting, For: "build diff validate apply rollback history drift delete release inventory push pull tag list inspect diff-artifact", Default: "auto", Description: "Colour in what gantry prints: auto (on a terminal, unless NO_COLOR is set), always or never. --no-color is --color never."},
	{Name: "summary", Group: groupReporting, For: "diff apply delete release push validate rollback drift", Default: "auto", Description: "Write the GitHub job summary: auto (when GITHUB_STEP_SUMMARY is set), true or false."},
	{Name: "drift-issue", Group: groupReporting, For: "drift", Default: "auto", Description: "For drift: keep one issue per inventory (or run file) on the repository (GitHub) or project (GitLab): opened when drift is found, updated while it lasts, closed once it is gone. auto: on GitHub and GitLab when their token is given (github-token, with permissions: issues: write; gitlab-token, a project or group access token with the api scope), true or false. An issue that cannot be written is a warning."},
	{Name: "comment", Group: groupReporting, For: "diff apply delete release push rollback", Default: "auto", Description: "Keep one comment per inventory on the pull request (GitHub) or merge request (GitLab), updated in place: auto (on pull_request events and merge request pipelines), true or false. A comment that cannot be posted is a warning."},
	{Name: "github-token", Group: groupReporting, For: "diff apply delete release push rollback drift", Secret: true, ActionDefault: "${{ github.token }}", Description: "Token for the pull request comment; needs pull-requests: write. The API is GITHUB_API_URL, so GitHub Enterprise Server works."},
	{Name: "gitlab-token", Group: groupReporting, For: "diff apply delete release push rollback drift", Secret: true, Description: "Project or group access token (api scope) for the merge request note; CI_JOB_TOKEN cannot post notes. The API is CI_API_V4_URL."},
	{Name: "dotenv", Group: groupReporting, For: "diff apply delete release push validate rollback drift", Description: "Write the scalar outputs as a dotenv file (GANTRY_<OUTPUT>=value) for artifacts:reports:dotenv. Default on GitLab: gantry.env; elsewhere none."},
	{Name: "tekton-results", Group: groupReporting, For: "diff apply delete release push validate rollback drift", Description: "Directory for Tekton step results. Default: /tekton/results when it exists."},
	{Name: "source", Group: groupReporting, For: "diff apply push drift", Description: "Where the configuration comes from, recorded in the inventory and in artifacts (org.opencontainers.image.source). Default: the repository URL on GitHub and GitLab, else path."},
	{Name: "revision", Group: groupReporting, For: "diff apply push drift", Description: "The revision being deployed, recorded in the inventory. Default: GITHUB_SHA or CI_COMMIT_SHA."},
}

// Closest is the candidate a misspelt name most likely meant: the nearest
// within two edits, "" when none is.
func Closest(name string, candidates []string) string {
	best, bestDistance := "", 3
	for _, c := range candidates {
		if d := distance(name, c); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
