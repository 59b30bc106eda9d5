package health

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The built-in rules, for kinds whose controllers report through their
// own conditions or phase, where kstatus (which reads only Reconciling,
// Stalled and observedGeneration of a kind it does not know) calls the
// object Current as soon as it exists. Each is written from the status
// the kind documents, and tested on status shapes of each outcome
// (builtin_test.go); docs/health.md lists them.

// cond is the expression that the object has condition typ with status
// st (and, where the condition says which generation it judged, the
// current one).
func cond(typ, st string) string {
	return "status.?conditions.orValue([]).exists(c, c.type == '" + typ + "' && c.status == '" + st + "'" +
		" && (!has(c.observedGeneration) || c.observedGeneration == metadata.generation))"
}

// condReason is the expression that the object has condition typ with
// status st for one of reasons.
func condReason(typ, st string, reasons ...string) string {
	list := ""
	for i, r := range reasons {
		if i > 0 {
			list += ", "
		}
		list += "'" + r + "'"
	}
	return "status.?conditions.orValue([]).exists(c, c.type == '" + typ + "' && c.status == '" + st + "' && c.?reason.orValue('') in [" + list + "])"
}

func builtInRules() []*Rule {
	rules := []*Rule{
		// cert-manager: Ready is the verdict; an issuance that failed
		// (its CertificateRequest failed or was denied) sets Issuing
		// False with reason Failed, and is retried only after a backoff
		// of an hour.
		{APIVersion: "cert-manager.io/v1", Kind: "Certificate",
			Current: cond("Ready", "True"),
			Failed:  condReason("Issuing", "False", "Failed")},
		{APIVersion: "cert-manager.io/v1", Kind: "CertificateRequest",
			Current: cond("Ready", "True"),
			Failed:  condReason("Ready", "False", "Failed", "Denied") + " || " + cond("InvalidRequest", "True")},
		{APIVersion: "cert-manager.io/v1", Kind: "Issuer", Current: cond("Ready", "True")},
		{APIVersion: "cert-manager.io/v1", Kind: "ClusterIssuer", Current: cond("Ready", "True")},

		// external-secrets: Ready; a sync that failed is reason
		// SecretSyncedError, a store that cannot work is one of the
		// store's validation reasons.
		{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret",
			Current: cond("Ready", "True"),
			Failed:  condReason("Ready", "False", "SecretSyncedError")},
		{APIVersion: "external-secrets.io/v1", Kind: "ClusterExternalSecret", Current: cond("Ready", "True")},
		{APIVersion: "external-secrets.io/v1", Kind: "SecretStore",
			Current: cond("Ready", "True"),
			Failed:  condReason("Ready", "False", "InvalidStoreConfig", "InvalidProviderConfig", "ValidationFailed")},
		{APIVersion: "external-secrets.io/v1", Kind: "ClusterSecretStore",
			Current: cond("Ready", "True"),
			Failed:  condReason("Ready", "False", "InvalidStoreConfig", "InvalidProviderConfig", "ValidationFailed")},

		// Crossplane's packages: installed and healthy.
		{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider",
			Current: cond("Installed", "True") + " && " + cond("Healthy", "True")},
		{APIVersion: "pkg.crossplane.io/v1", Kind: "Configuration",
			Current: cond("Installed", "True") + " && " + cond("Healthy", "True")},
		{APIVersion: "pkg.crossplane.io/v1", Kind: "Function",
			Current: cond("Installed", "True") + " && " + cond("Healthy", "True")},
		{APIVersion: "apiextensions.crossplane.io/v1", Kind: "CompositeResourceDefinition",
			Current: cond("Established", "True")},

		// Cluster API: v1beta1 reports Ready, v1beta2 Available; a
		// failure is phase Failed, or (v1beta1) failureReason.
		{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster",
			Current: cond("Ready", "True") + " || " + cond("Available", "True"),
			Failed:  "status.?phase.orValue('') == 'Failed' || status.?failureReason.hasValue()"},
		{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "MachineDeployment",
			Current: cond("Ready", "True") + " || " + cond("Available", "True"),
			Failed:  "status.?phase.orValue('') == 'Failed'"},
		{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Machine",
			Current: cond("Ready", "True") + " || " + cond("Available", "True"),
			Failed:  "status.?phase.orValue('') == 'Failed' || status.?failureReason.hasValue()"},

		// Argo Rollouts: the phase is the verdict; Paused is a step of
		// the rollout (in progress).
		{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout",
			Current: "status.?phase.orValue('') == 'Healthy'",
			Failed:  "status.?phase.orValue('') == 'Degraded'"},

		// CloudNativePG: Ready. Ready is False while the cluster is set
		// up as well as when it cannot be; the phase tells the two
		// apart: a cluster that is unrecoverable, or whose definition
		// is invalid, waits for its user (its phaseReason says why).
		{APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster",
			Current: cond("Ready", "True"),
			Failed: "status.?phase.orValue('') in ['Cluster is unrecoverable and needs manual intervention', " +
				"'Invalid cluster definition']"},

		// Strimzi: every kind reports Ready True once reconciled. The
		// cluster and user operators report a reconciliation that
		// failed as NotReady True, with the exception's name as reason
		// (NotReady's one other reason, Creating, is a new Kafka's
		// first status); the topic operator as Ready False.
		{APIVersion: "kafka.strimzi.io/v1",
			Current: cond("Ready", "True"),
			Failed: "status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'False' || " +
				"c.type == 'NotReady' && c.status == 'True' && c.?reason.orValue('') != 'Creating')"},

		// KEDA: Ready; False when the object cannot be used (a target
		// that does not exist, a trigger that does not validate).
		{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject",
			Current: cond("Ready", "True"),
			Failed:  "status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'False')"},
		{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledJob",
			Current: cond("Ready", "True"),
			Failed:  "status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'False')"},
	}
	for _, r := range rules {
		r.Origin = BuiltIn
	}
	return rules
}

// BuiltInRules lists the built-in rules, for docs and tests.
func BuiltInRules() []Rule {
	var out []Rule
	for _, r := range builtInRules() {
		out = append(out, *r)
	}
	return out
}

// related are the kinds whose objects a kind's controller makes to do its
// work, and whose own messages say why it is not ready: a Certificate
// waits on its CertificateRequest, which says that its Issuer does not
// exist, where the Certificate says only that it is issuing.
var related = map[schema.GroupKind]schema.GroupVersionKind{
	{Group: "cert-manager.io", Kind: "Certificate"}: {Group: "cert-manager.io", Version: "v1", Kind: "CertificateRequest"},
}

// Related is the kind whose objects, owned by an object of gk, say why it
// is not ready; false when there is none.
func Related(gk schema.GroupKind) (schema.GroupVersionKind, bool) {
	gvk, ok := related[gk]
	return gvk, ok
}

// Reference is an object that another names and cannot become ready
// without.
type Reference struct {
	Group, Kind, Namespace, Name string
}

// Needs are the objects u names that its controller needs to exist: a
// cert-manager Certificate's Issuer or ClusterIssuer (an issuer of
// another group, an external issuer, is not checked). cert-manager waits
// for an absent Issuer without marking anything failed: the wait, which
// knows the run's set, can say that nothing of this run will make it.
func Needs(u *unstructured.Unstructured) []Reference {
	if gk := u.GroupVersionKind().GroupKind(); gk != (schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}) {
		return nil
	}
	name, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "name")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "kind")
	group, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "group")
	if name == "" || (group != "" && group != "cert-manager.io") {
		return nil
	}
	switch kind {
	case "", "Issuer":
		return []Reference{{Group: "cert-manager.io", Kind: "Issuer", Namespace: u.GetNamespace(), Name: name}}
	case "ClusterIssuer":
		return []Reference{{Group: "cert-manager.io", Kind: "ClusterIssuer", Name: name}}
	}
	return nil
}

// HasNeeds: objects of gk may have Needs.
func HasNeeds(gk schema.GroupKind) bool {
	return gk == schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}
}
