package releases

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// earlier are the built-in APIs removed before the oldest release gantry
// embeds, with the release that stopped serving them, from Kubernetes'
// deprecated API migration guide. Removals from the embedded releases on
// are read from the archives themselves.
var earlier = []struct {
	gv      string
	kinds   []string // empty: every kind of gv
	removed string
	// replacement, when the kind has none of the same name in a served
	// group version.
	replacement string
}{
	{gv: "extensions/v1beta1", kinds: []string{"DaemonSet", "Deployment", "ReplicaSet", "NetworkPolicy", "PodSecurityPolicy"}, removed: "1.16"},
	{gv: "apps/v1beta1", removed: "1.16"},
	{gv: "apps/v1beta2", removed: "1.16"},
	{gv: "extensions/v1beta1", removed: "1.22"}, // Ingress, the last
	{gv: "admissionregistration.k8s.io/v1beta1", kinds: []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}, removed: "1.22"},
	{gv: "apiextensions.k8s.io/v1beta1", removed: "1.22"},
	{gv: "apiregistration.k8s.io/v1beta1", removed: "1.22"},
	{gv: "authentication.k8s.io/v1beta1", removed: "1.22"},
	{gv: "authorization.k8s.io/v1beta1", removed: "1.22"},
	{gv: "certificates.k8s.io/v1beta1", kinds: []string{"CertificateSigningRequest"}, removed: "1.22"},
	{gv: "coordination.k8s.io/v1beta1", kinds: []string{"Lease"}, removed: "1.22"},
	{gv: "networking.k8s.io/v1beta1", kinds: []string{"Ingress", "IngressClass"}, removed: "1.22"},
	{gv: "rbac.authorization.k8s.io/v1beta1", removed: "1.22"},
	{gv: "scheduling.k8s.io/v1beta1", kinds: []string{"PriorityClass"}, removed: "1.22"},
	{gv: "storage.k8s.io/v1beta1", kinds: []string{"CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"}, removed: "1.22"},
	{gv: "batch/v1beta1", removed: "1.25"},
	{gv: "discovery.k8s.io/v1beta1", removed: "1.25"},
	{gv: "events.k8s.io/v1beta1", removed: "1.25"},
	{gv: "autoscaling/v2beta1", removed: "1.25"},
	{gv: "policy/v1beta1", kinds: []string{"PodSecurityPolicy"}, removed: "1.25",
		replacement: "none: Pod Security Admission (namespace labels pod-security.kubernetes.io/*) or a policy engine"},
	{gv: "policy/v1beta1", removed: "1.25"},
	{gv: "node.k8s.io/v1beta1", removed: "1.25"},
	{gv: "flowcontrol.apiserver.k8s.io/v1beta1", removed: "1.26"},
	{gv: "autoscaling/v2beta2", removed: "1.26"},
	{gv: "storage.k8s.io/v1beta1", kinds: []string{"CSIStorageCapacity"}, removed: "1.27"},
	{gv: "flowcontrol.apiserver.k8s.io/v1beta2", removed: "1.29"},
	{gv: "flowcontrol.apiserver.k8s.io/v1beta3", removed: "1.32"},
}

// Removal says that a release no longer serves an apiVersion and kind.
type Removal struct {
	GVK schema.GroupVersionKind
	// Removed is the first release that did not serve it; Release, the
	// release validated against.
	Removed, Release string
	// Replacement is the apiVersion to write instead, or why there is none.
	Replacement string
}

func (e *Removal) Error() string {
	api := e.GVK.GroupVersion().String()
	msg := fmt.Sprintf("%s %s is not served by Kubernetes %s: it was removed in %s", api, e.GVK.Kind, e.Release, e.Removed)
	if e.Replacement != "" {
		msg += "; use " + e.Replacement
	}
	return msg
}

// Removed returns the removal of gvk when r does not serve it but an
// earlier release did, as far as gantry knows; nil otherwise (served, or
// never a built-in kind: a custom resource, or a mistake).
func (r *Release) Removed(gvk schema.GroupVersionKind) (*Removal, error) {
	if ok, err := r.ServesKind(gvk); ok || err != nil {
		return nil, err
	}
	all, err := All()
	if err != nil {
		return nil, err
	}
	rm := &Removal{GVK: gvk, Release: r.Version}
	// The embedded releases: the newest one before r that served gvk.
	older := false
	for i, o := range all {
		if o == r {
			older = true
			continue
		}
		if !older {
			continue
		}
		if ok, err := o.ServesKind(gvk); err != nil {
			return nil, err
		} else if ok {
			rm.Removed = all[i-1].Version
			break
		}
	}
	if rm.Removed == "" {
		for _, e := range earlier {
			if e.gv == gvk.GroupVersion().String() && (len(e.kinds) == 0 || slices.Contains(e.kinds, gvk.Kind)) {
				rm.Removed, rm.Replacement = e.removed, e.replacement
				break
			}
		}
	}
	if rm.Removed == "" {
		return nil, nil
	}
	if rm.Replacement == "" {
		if rm.Replacement, err = r.replacement(gvk); err != nil {
			return nil, err
		}
	}
	return rm, nil
}

// replacement is the apiVersion r serves gvk's kind under: of the same
// group when it has one, the most stable first.
func (r *Release) replacement(gvk schema.GroupVersionKind) (string, error) {
	var candidates []schema.GroupVersion
	for _, gv := range r.GroupVersions() {
		ok, err := r.ServesKind(gv.WithKind(gvk.Kind))
		if err != nil {
			return "", err
		}
		if ok {
			candidates = append(candidates, gv)
		}
	}
	slices.SortStableFunc(candidates, func(a, b schema.GroupVersion) int {
		if (a.Group == gvk.Group) != (b.Group == gvk.Group) {
			if a.Group == gvk.Group {
				return -1
			}
			return 1
		}
		// Kubernetes' own order: v1 before v1beta1 before v1alpha1.
		return -version.CompareKubeAwareVersionStrings(a.Version, b.Version)
	})
	if len(candidates) == 0 {
		return "", nil
	}
	api := candidates[0].String()
	return strings.TrimPrefix(api, "/"), nil
}
