package entrypoint

import "slices"

// command documents one of gantry's commands for its help.
type command struct {
	Name  string
	Group string // commandsDeploy, commandsArtifact or commandsOther
	Short string
	Long  string
	// Example lines, each a shell command, with a comment above it.
	Example string
	// PathArg: the command takes path as an optional argument, as
	// kustomize build takes its folder.
	PathArg bool
}

const (
	commandsDeploy   = "deploy"
	commandsArtifact = "artifact"
	commandsOther    = "other"
)

// commandTable lists gantry's commands in the order its help shows them.
var commandTable = []command{
	{Name: "build", Group: commandsDeploy, PathArg: true,
		Short: "Build the configuration and print its objects",
		Long: `Build a kustomize overlay or a plain folder of manifests, decrypt what SOPS
encrypted, substitute variables and print the objects as YAML on stdout,
Secret values masked. Nothing is read from or written to a cluster.`,
		Example: `  # What a kustomize overlay builds to
  gantry build deploy/overlays/prod

  # With the variables a deploy substitutes
  gantry build deploy --substitute 'IMAGE_TAG=1.4.2'`},
	{Name: "diff", Group: commandsDeploy, PathArg: true,
		Short: "Show what apply would change, validated by the cluster",
		Long: `Build the configuration and ask the cluster, through server-side dry-runs, what
apply would create, change, recreate and, with an inventory, prune. Each
changed object's diff is printed on stdout, Secret values masked, then a
summary line. Nothing is written to the cluster.`,
		Example: `  # Before a push: what would change in the cluster
  gantry diff deploy/overlays/prod --inventory shop

  # For a script: exit 3 when something would change
  gantry diff deploy --inventory shop --detailed-exitcode

  # The result as JSON
  gantry diff deploy --inventory shop --output json`},
	{Name: "validate", Group: commandsDeploy, PathArg: true,
		Short: "Check every object, against the cluster or with no cluster at all",
		Long: `Build the configuration and check every object without writing anything.
With --offline no cluster and no credentials are needed: built-in kinds are
checked against the schemas of a Kubernetes release embedded in gantry
(--kubernetes-version) and the API server's own handwritten validation,
custom resources against the CRDs of the set and of --crds, CEL rules
included; an apiVersion the release no longer serves is named with its
replacement. Without --offline every object is dry-run on the cluster, as
diff dry-runs it. Each failure names its object and file.`,
		Example: `  # In a pull request from a fork: no secrets, no cluster
  gantry validate deploy/overlays/prod --offline

  # Against an older release, with the CRDs of an operator installed elsewhere
  gantry validate deploy --offline --kubernetes-version 1.34 --crds vendor/cert-manager

  # Against the cluster itself, writing nothing
  gantry validate deploy`},
	{Name: "apply", Group: commandsDeploy, PathArg: true,
		Short: "Validate, apply, prune and wait for the configuration",
		Long: `Build the configuration, validate every object against the cluster (a
server-side dry-run) before writing any, apply with server-side apply, prune
what a previous run applied and this one no longer has, and wait until every
object is ready. The inventory (a ConfigMap) records what was applied; a
Lease keeps two runs on one inventory from overlapping. With artifact, the
configuration is pushed as an OCI artifact first, or pulled from one when no
path is given.`,
		Example: `  # Deploy an overlay, recorded in the inventory "shop"
  gantry apply deploy/overlays/prod --inventory shop

  # Deploy what an artifact holds, verified with cosign first
  gantry apply --artifact oci://ghcr.io/acme/shop:1.4.2 --inventory shop \
    --verify cosign --cosign-public-key cosign.pub

  # Without waiting, and keeping what the configuration no longer has
  gantry apply deploy --inventory shop --wait=false --prune=false`},
	{Name: "rollback", Group: commandsDeploy,
		Short: "Apply an earlier revision of an inventory again",
		Long: `Apply again a revision that an earlier apply recorded: by default the last
one that succeeded before the current one and differs from it, or the one
--to names (gantry history lists them). It runs as an apply does: every
object validated first, prune of what that revision did not have, and the
wait; its outcome is RolledBack when it succeeds. A revision that names an
artifact whose objects did not fit is pulled and verified again.`,
		Example: `  # Undo the last deploy of "shop"
  gantry rollback --inventory shop

  # Go back to revision 7
  gantry rollback --inventory shop --to 7`},
	{Name: "history", Group: commandsDeploy,
		Short: "List the revisions an inventory keeps",
		Long: `List the revisions of an inventory, newest first: number, time, source and
git revision, content digest, outcome and who ran it. Secret values are
never shown: a revision's objects stay in the cluster, in a Secret. Exit 1
when the inventory does not exist.`,
		Example: `  # What rollback can go back to
  gantry history --inventory shop

  # As JSON, for a script
  gantry history --inventory shop --output json`},
	{Name: "drift", Group: commandsDeploy, PathArg: true,
		Short: "Report what changed in the cluster since gantry applied it",
		Long: `Compare what is live with what gantry applied: the inventory's last revision,
or the configuration given (a path or an artifact). Each object is in sync,
drifted, with every field that differs and the field manager that changed
it (kubectl-edit, kubectl-label, kubectl scale...) and when, or missing
(deleted by hand). Secret values are masked. Exit 3 when something drifted.
With --correct the set is applied again, taking back what was changed or
added by hand. Made for a scheduled workflow: on GitHub and GitLab it keeps
one issue open while drift lasts (drift-issue).`,
		Example: `  # Has anyone changed "shop" by hand since the last deploy?
  gantry drift --inventory shop

  # Compared with the configuration in git, and put back as it was
  gantry drift deploy/overlays/prod --inventory shop --correct`},
	{Name: "delete", Group: commandsDeploy,
		Short: "Delete every object an inventory records, then the inventory",
		Long: `Delete every object the inventory records (but those annotated prune:
disabled), wait until they are gone, then delete the inventory and its
Lease and its revisions. Objects that Flux now applies are left alone unless
--delete-flux-applied is given.`,
		Example: `  # Tear down what gantry deployed as "shop"
  gantry delete --inventory shop`},
	{Name: "release", Group: commandsDeploy,
		Short: "Hand an inventory's objects over to Flux and forget them",
		Long: `Take gantry's labels off every object the inventory records, hand gantry's
field ownership to another field manager (Flux's kustomize-controller by
default), and delete the inventory and its Lease. The objects stay. With
artifact, print the OCIRepository and Kustomization that reconcile it.`,
		Example: `  # Hand "shop" over to Flux, and print the Flux objects for its artifact
  gantry release --inventory shop --artifact oci://ghcr.io/acme/shop:1.4.2`},
	{Name: "inventory", Group: commandsDeploy,
		Short: "List inventories, or the objects one records",
		Long: `Without --inventory, list the inventories of a namespace with their object
count, the git revision (commit) and time of the last apply. With it, list
the objects that inventory records. The revisions that history lists and
rollback takes are gantry's own, numbered 1, 2, 3...`,
		Example: `  # The inventories in the default namespace
  gantry inventory

  # What "shop" records
  gantry inventory --inventory shop`},
	{Name: "push", Group: commandsArtifact, PathArg: true,
		Short: "Build the configuration and push it as an OCI artifact",
		Long: `Build the configuration and push the built objects as an OCI artifact in
Flux's format, which Flux's source-controller can pull. The artifact may be
signed with cosign and encrypted with age.`,
		Example: `  # Push, tagged with the version and "latest"
  gantry push deploy --artifact oci://ghcr.io/acme/shop:1.4.2 --tags latest

  # Signed with a cosign key
  gantry push deploy --artifact oci://ghcr.io/acme/shop:1.4.2 \
    --sign cosign --cosign-key cosign.key`},
	{Name: "pull", Group: commandsArtifact, PathArg: true,
		Short: "Pull an artifact's files into a folder",
		Long: `Pull an artifact into an empty or new folder, verified first when --verify is
given, decrypted when it is age-encrypted.`,
		Example: `  # Pull into ./shop
  gantry pull shop --artifact oci://ghcr.io/acme/shop:1.4.2`},
	{Name: "tag", Group: commandsArtifact,
		Short: "Add tags to an artifact",
		Example: `  # Promote a build to production
  gantry tag --artifact oci://ghcr.io/acme/shop:1.4.2 --tags production`},
	{Name: "list", Group: commandsArtifact,
		Short: "List a repository's tags, digests and revisions",
		Example: `  # Every 1.x tag
  gantry list --artifact oci://ghcr.io/acme/shop --semver 1.x`},
	{Name: "inspect", Group: commandsArtifact,
		Short: "Show an artifact's digest, annotations, layers and signatures",
		Example: `  # Is it signed, and can Flux read it?
  gantry inspect --artifact oci://ghcr.io/acme/shop:1.4.2

  # Verify its signature too
  gantry inspect --artifact oci://ghcr.io/acme/shop:1.4.2 --verify cosign --cosign-public-key cosign.pub`},
	{Name: "diff-artifact", Group: commandsArtifact,
		Short: "Compare an artifact with another artifact or a folder",
		Long: `Build both sides and print, object by object, what differs between the
artifact and the other side, Secret values masked.`,
		Example: `  # What a release changes compared with the one before
  gantry diff-artifact --artifact oci://ghcr.io/acme/shop:1.4.2 \
    --compare-to oci://ghcr.io/acme/shop:1.4.1

  # Compare an artifact with the folder it came from
  gantry diff-artifact --artifact oci://ghcr.io/acme/shop:1.4.2 --compare-to deploy`},
	{Name: "plan", Group: commandsOther,
		Short: "Print a run file's units as a CI engine's jobs, one per unit, in dependency order",
		Long: `Read a run file and print its units as jobs of a CI engine, each running one
unit with gantry (run-file and unit), ordered by depends-on: for github, a
reusable workflow with a job per unit and needs (no matrix); for tekton, a
Pipeline of the gantry Task with runAfter, whose delete runs in the reverse
order; for gitlab, a child pipeline with needs. Each job gets the
run-file-env plan is given. The graph is checked as apply checks it;
secrets are not read. The plan's comment (for tekton, its description) says
which secrets and variables its jobs read: the kubeconfig, the record-key
and the variables the run file reads.`,
		Example: `  # A reusable GitHub workflow of the units, for .github/workflows/
  gantry plan --run-file gantry.yaml --format github --run-file-env SOPS_AGE_KEY > gantry-units.yml

  # A Tekton Pipeline of the units
  gantry plan --run-file gantry.yaml --format tekton > pipeline.yaml

  # A GitLab child pipeline, for trigger: include: artifact
  gantry plan --run-file gantry.yaml --format gitlab > units.gitlab-ci.yml`},
	{Name: "version", Group: commandsOther,
		Short: "Print gantry's version"},
}

// commands are the names of commandTable.
var commands = func() []string {
	var names []string
	for _, c := range commandTable {
		names = append(names, c.Name)
	}
	return names
}()

// CommandNames are gantry's commands, in the order its help lists them.
func CommandNames() []string { return slices.Clone(commands) }
