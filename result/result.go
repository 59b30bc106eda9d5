// Package result holds the typed outcome of one gantry run: what happened to
// every object, how long each stage took, and why the run ended as it did.
// Reporters render it; they need nothing else from the pipeline.
package result

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// SchemaVersion versions the JSON form of Result. It changes only when a
// field is removed or changes meaning; new fields may appear at any time.
const SchemaVersion = "gantry.dev/result/v1"

// Reason is the overall outcome, in the vocabulary Flux users know.
type Reason string

// Reasons.
const (
	// ReasonSucceeded: apply, rollback, push or release did what it was
	// asked.
	ReasonSucceeded Reason = "ReconciliationSucceeded"
	// ReasonValidated: validate found every object valid.
	ReasonValidated Reason = "ValidationSucceeded"
	// ReasonNoChanges: diff found nothing to change (with changes it is
	// Progressing).
	ReasonNoChanges Reason = "NoChanges"
	// ReasonNoDrift: drift found every object as applied.
	ReasonNoDrift Reason = "NoDrift"
	// ReasonDeleted: delete deleted what the inventory records.
	ReasonDeleted     Reason = "DeletionSucceeded"
	ReasonBuildFailed Reason = "BuildFailed"
	// ReasonArtifactFailed is for pulling, verifying or pushing an artifact.
	ReasonArtifactFailed   Reason = "ArtifactFailed"
	ReasonValidationFailed Reason = "ValidationFailed"
	// ReasonClusterUnreachable: the cluster's API server did not answer
	// (refused, timed out, no such host), so nothing about the objects
	// was learned.
	ReasonClusterUnreachable Reason = "ClusterUnreachable"
	// ReasonApplyFailed is Flux's ReconciliationFailed: the apply failed.
	ReasonApplyFailed       Reason = "ReconciliationFailed"
	ReasonPruneFailed       Reason = "PruneFailed"
	ReasonHealthCheckFailed Reason = "HealthCheckFailed"
	// ReasonLocked means another run held the inventory's lock until the
	// timeout.
	ReasonLocked Reason = "InventoryLocked"
	// ReasonLeaseLost means the run lost the inventory's lock while it
	// ran (another run took it, or it could not be renewed in time) and
	// stopped writing.
	ReasonLeaseLost Reason = "LeaseLost"
	// ReasonProgressing means a diff found pending changes.
	ReasonProgressing Reason = "Progressing"
	// ReasonInvalidInput means the configuration was rejected before
	// anything ran.
	ReasonInvalidInput Reason = "InvalidInput"
	// ReasonCancelled: the run was cancelled (a runner's SIGTERM, Ctrl-C)
	// and stopped where it was.
	ReasonCancelled Reason = "Cancelled"
	// ReasonDependencyNotReady: a unit of a run file was not run, because
	// a unit it depends on did not succeed (Flux's reason).
	ReasonDependencyNotReady Reason = "DependencyNotReady"
	// ReasonSuspended: a unit of a run file marked suspend was not run.
	ReasonSuspended Reason = "Suspended"
	// ReasonRolledBack: an earlier revision was applied again and is
	// healthy: by rollback (its success), or by an apply with atomic
	// whose own apply or wait failed (still a failed deploy; Cause says
	// why).
	ReasonRolledBack Reason = "RolledBack"
	// ReasonDriftDetected: drift found live objects that differ from
	// what gantry applied, or that are gone (exit 3).
	ReasonDriftDetected Reason = "DriftDetected"
)

// Action is what happened, or would happen, to one object.
type Action string

// Actions.
const (
	Created    Action = "created"
	Configured Action = "configured"
	// Recreated: deleted and created again, because an immutable field
	// changed and force allowed it.
	Recreated Action = "recreated"
	Unchanged Action = "unchanged"
	Deleted   Action = "deleted"
	Skipped   Action = "skipped"
	Failed    Action = "failed"
)

// Released is what release did to an object: gantry stopped managing it
// and deleted nothing. Only release reports it, so the tables of the
// other commands leave it out of Actions.
const Released Action = "released"

// Where is the object's file and line, as file:line, or the file alone
// when the line is not known, and the patches that changed it.
func (o Object) Where() string {
	where := o.Source
	if o.Source != "" && o.Line > 0 {
		where = fmt.Sprintf("%s:%d", o.Source, o.Line)
	}
	if len(o.Patches) > 0 && where != "" {
		where += ", patched by " + strings.Join(o.Patches, ", ")
	}
	return where
}

// Valid is what validate found of an object that passed: it writes
// nothing. Only validate reports it.
const Valid Action = "valid"

// What drift found of an object: changed in the cluster since gantry
// applied it (Drifted), gone from it (Missing), or as applied (InSync).
// Only drift reports them.
const (
	Drifted Action = "drifted"
	Missing Action = "missing"
	InSync  Action = "in-sync"
)

// Actions lists every action in the order reports show them.
var Actions = []Action{Created, Configured, Recreated, Unchanged, Deleted, Skipped, Failed}

// Object is one Kubernetes object as the run saw it.
type Object struct {
	// ID is the object's inventory id: namespace_name_group_kind.
	ID         string `json:"id"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Action is what happened to it (or would happen, in a diff).
	Action Action `json:"action"`
	// Stage is the pipeline stage that decided the action.
	Stage string `json:"stage"`
	// Source is the file the object came from, relative to the working
	// directory, when known.
	Source string `json:"source,omitempty"`
	// Line is where the object starts in Source (for a generated object,
	// its generator's entry), when known: 1 is the first line.
	Line int `json:"line,omitempty"`
	// Patches are the kustomize patches that target the object, each as
	// file:line.
	Patches []string `json:"patches,omitempty"`
	// Error says why it failed or was skipped.
	Error string `json:"error,omitempty"`
	// Problems, for an object that failed validation, name each field at
	// fault, what is wrong with it and, when known, its line in Source.
	Problems []Problem `json:"problems,omitempty"`
	// Unanswered is set when the request that writes or deletes the
	// object got no answer (the API server stopped answering): it may
	// have been carried out or not; the next run finds out.
	Unanswered bool `json:"unanswered,omitempty"`
	// Diff is the unified diff of the change (live against desired), with
	// server-managed fields removed and Secret values masked; empty when
	// unchanged.
	Diff string `json:"diff,omitempty"`
	// Health is set by the wait stage for objects it checked.
	Health *Health `json:"health,omitempty"`
	// Conflicts are the fields another field manager owned that this run
	// takes (or, refused, would take), with that manager.
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Drift, for drift, lists the fields that differ from what gantry
	// applied, each with the field manager that changed it.
	Drift []Drift `json:"drift,omitempty"`
	// ManagedBy, for drift, lists the fields other controllers than
	// gantry changed or added (an HPA's replicas, cert-manager's
	// caBundle): reported, never taken back.
	ManagedBy []Drift `json:"managedBy,omitempty"`
}

// Problem is one field of an object that is not valid.
type Problem struct {
	// Field is its path as the API server writes it
	// (spec.template.spec.containers[0].image); empty for a problem of
	// the whole object.
	Field string `json:"field,omitempty"`
	// Message says what is wrong, worded as the API server words it.
	Message string `json:"message"`
	// Line is the field's line in the object's Source, or in Source
	// below when a patch set the field, when known.
	Line int `json:"line,omitempty"`
	// Source is the file Line is in when it is not the object's: the
	// patch that set the field.
	Source string `json:"source,omitempty"`
}

// At is the problem as one line that names where it is: source:line, or
// "line N" when source is empty, before its field and what is wrong; the
// line alone when it is not known.
func (p Problem) At(source string) string {
	if p.Source != "" {
		source = p.Source
	}
	switch {
	case p.Line == 0:
		return p.String()
	case source != "":
		return fmt.Sprintf("%s:%d: %s", source, p.Line, p.String())
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.String())
}

// String is the problem as one line: its field, then what is wrong.
func (p Problem) String() string {
	if p.Field == "" || strings.HasPrefix(p.Message, p.Field+" ") || strings.HasPrefix(p.Message, p.Field+":") {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

// Drift is one field of a live object that is not as gantry applied it.
type Drift struct {
	// Field is the field's path (.spec.replicas,
	// .spec.template.spec.containers[name="web"].image).
	Field string `json:"field"`
	// Change is changed (the field gantry applies holds another value),
	// added (a field gantry does not apply) or removed (one it applies
	// is gone).
	Change string `json:"change"`
	// Manager is the field manager that owns the field now (who changed
	// it), and Time when it last wrote the object, when the API server
	// recorded it.
	Manager string     `json:"manager,omitempty"`
	Time    *time.Time `json:"time,omitempty"`
	// Live and Applied are the field's value in the cluster and as
	// gantry applies it, as JSON (cut at 80 characters; empty where the
	// object lacks the field). Neither is given for a Secret, nor for a
	// field whose value came from an encrypted file.
	Live    string `json:"live,omitempty"`
	Applied string `json:"applied,omitempty"`
}

// Values is the change of a drifted field, as applied → live ("2 → 5"),
// with (none) for a side that lacks the field; empty when the values
// are not shown.
func (d Drift) Values() string {
	if d.Live == "" && d.Applied == "" {
		return ""
	}
	none := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return s
	}
	return none(d.Applied) + " → " + none(d.Live)
}

// Conflict is one field another field manager owns, which an apply with
// force takes from it.
type Conflict struct {
	// Field is the field's path, as the API server prints it
	// (.spec.replicas, .data.key).
	Field   string `json:"field"`
	Manager string `json:"manager"`
}

// Ref is how reports name an object: Kind/namespace/name or Kind/name,
// with the kind qualified by its API group unless it is in the core group
// (Deployment.apps/shop/web, Namespace/shop), so that a custom kind never
// reads like a built-in one of the same name.
func (o Object) Ref() string {
	group, _, _ := strings.Cut(o.APIVersion, "/")
	if !strings.Contains(o.APIVersion, "/") {
		group = ""
	}
	return Ref(group, o.Kind, o.Namespace, o.Name)
}

// Ref names an object as Object.Ref does.
func Ref(group, kind, namespace, name string) string {
	if group != "" {
		kind += "." + group
	}
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// Health is the readiness of one object at the end of the wait.
type Health struct {
	// Status is kstatus's verdict: Current, InProgress, Failed, NotFound...
	Status string `json:"status"`
	// Message explains a status other than Current: the failing
	// conditions, and for workloads why their pods are not ready.
	Message string `json:"message,omitempty"`
	// Rule names the health rule that decided, when one did (built-in,
	// or the file and line of the user's); kstatus decided otherwise.
	Rule string `json:"rule,omitempty"`
}

// Stage records one stage of the run.
type Stage struct {
	Name     string        `json:"name"`
	Duration time.Duration `json:"durationNanos"`
	// Error is set when the stage failed.
	Error string `json:"error,omitempty"`
	// Skipped is set when the stage did not run, with why.
	Skipped string `json:"skipped,omitempty"`
}

// Inventory identifies the inventory the run used.
type Inventory struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// Artifact is an OCI artifact a run pushed or pulled.
type Artifact struct {
	// URL names it by digest: oci://registry/repository@sha256:...
	URL    string   `json:"url"`
	Digest string   `json:"digest"`
	Tags   []string `json:"tags,omitempty"`
	// Signed: this run signed it with cosign. Verified: this run checked
	// its cosign signature before pulling it.
	Signed   bool `json:"signed,omitempty"`
	Verified bool `json:"verified,omitempty"`
}

// Result is the outcome of one run.
type Result struct {
	Schema    string     `json:"schema"`
	Command   string     `json:"command"`
	Version   string     `json:"gantryVersion"`
	Started   time.Time  `json:"started"`
	Finished  time.Time  `json:"finished"`
	Reason    Reason     `json:"reason"`
	Message   string     `json:"message"`
	Revision  string     `json:"revision,omitempty"`
	Source    string     `json:"source,omitempty"`
	Inventory *Inventory `json:"inventory,omitempty"`
	// Artifact is the OCI artifact pushed or pulled, when there is one.
	Artifact *Artifact `json:"artifact,omitempty"`
	// Base is the git revision an offline diff compared with (diff
	// --offline --base); empty for a diff against a cluster.
	Base string `json:"base,omitempty"`
	// Charts are the Helm charts the build rendered, and what their
	// rendering answered empty or left out.
	Charts  []Chart  `json:"charts,omitempty"`
	Stages  []Stage  `json:"stages"`
	Objects []Object `json:"objects"`

	// RecordedRevision is the number of the inventory's revision this
	// run recorded (or found already recorded, when it applied the same
	// set with the same outcome as the last one).
	RecordedRevision int `json:"recordedRevision,omitempty"`
	// RolledBackTo is the revision a rollback applied again.
	RolledBackTo int `json:"rolledBackTo,omitempty"`
	// Cause, on an apply with atomic that rolled back, is the reason the
	// apply itself failed with; Rollback is the rollback's own run.
	Cause    Reason  `json:"cause,omitempty"`
	Rollback *Result `json:"rollback,omitempty"`
	// Correction, for drift with correct, is the apply that restored
	// what had drifted.
	Correction *Result `json:"correction,omitempty"`
}

// Chart is a Helm chart a build rendered.
type Chart struct {
	// Name is the chart's name and version (shop 1.2.0); Folder, its
	// folder in the workspace, or a fetched chart's reference and
	// version (oci://ghcr.io/acme/charts/shop:1.2.0).
	Name   string `json:"name"`
	Folder string `json:"folder"`
	// Lookup: a template called lookup, answered empty (as helm
	// template answers it): what it would have read is not there.
	Lookup bool `json:"lookup,omitempty"`
	// LeftOut are the hooks left out of the set, by template file and
	// events.
	LeftOut []string `json:"leftOut,omitempty"`
}

// FileSource says source names a file (in the workspace, or an absolute
// path), not a chart fetched from a registry or repository
// (oci://…/shop:1.2.0/templates/x.yaml), whose files are nowhere a line
// can be read from or an annotation pointed at.
func FileSource(source string) bool { return !strings.Contains(source, "://") }

// ActionsOf lists the actions a command's reports count, in order.
func ActionsOf(command string) []Action {
	switch command {
	case "release":
		return []Action{Released, Skipped, Failed}
	case "validate":
		return []Action{Valid, Failed}
	case "drift":
		return []Action{Drifted, Missing, InSync, Skipped, Failed}
	}
	return Actions
}

// Succeeded reports whether the run reached its goal.
func (r *Result) Succeeded() bool { return r.Reason.Succeeded() }

// Succeeded reports whether the reason is a success: a reconciliation
// that succeeded, or a validation that found every object valid.
func (r Reason) Succeeded() bool {
	switch r {
	case ReasonSucceeded, ReasonValidated, ReasonNoChanges, ReasonNoDrift, ReasonDeleted:
		return true
	}
	return false
}

// SuccessFor is the reason a command ends with when it succeeded, in
// words of what it found: a diff with nothing to change, a drift with
// nothing drifted, a delete, a validate, or a deploy.
func SuccessFor(command string) Reason {
	switch command {
	case "validate":
		return ReasonValidated
	case "diff":
		return ReasonNoChanges
	case "drift":
		return ReasonNoDrift
	case "delete":
		return ReasonDeleted
	}
	return ReasonSucceeded
}

// ReachedGoal reports whether the run did what it was asked: it
// succeeded, or, for rollback, rolled back (an apply with atomic that
// rolled back did not: its deploy failed).
func (r *Result) ReachedGoal() bool {
	return r.Succeeded() || r.Command == "rollback" && r.Reason == ReasonRolledBack
}

// Failed reports whether the run failed: it neither reached its goal nor
// found what it looks for (a diff's pending changes, a drift's drift).
func (r *Result) Failed() bool {
	return !r.ReachedGoal() && r.Reason != ReasonProgressing && r.Reason != ReasonDriftDetected
}

// Counts returns how many objects took each action.
func (r *Result) Counts() map[Action]int {
	c := make(map[Action]int, len(Actions))
	for _, a := range ActionsOf(r.Command) {
		c[a] = 0
	}
	for _, o := range r.Objects {
		c[o.Action]++
	}
	return c
}

// Changed reports whether any object was (or would be) created, configured,
// recreated or deleted.
func (r *Result) Changed() bool {
	c := r.Counts()
	return c[Created]+c[Configured]+c[Recreated]+c[Deleted] > 0
}

// Sort orders objects deterministically: by kind, namespace, name.
func (r *Result) Sort() {
	sort.SliceStable(r.Objects, func(i, j int) bool {
		a, b := r.Objects[i], r.Objects[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
