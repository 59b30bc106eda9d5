package releases

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The archives are the five newest minor releases, one after the other,
// each from the k8s.io/kubernetes module of that release, and Newest and
// Oldest say which.
func TestArchivesAreFiveConsecutiveReleases(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("%d releases embedded, want the five newest minors", len(all))
	}
	if all[0].Version != Newest || all[len(all)-1].Version != Oldest {
		t.Errorf("embedded %s to %s; Newest and Oldest say %s to %s", all[len(all)-1].Version, all[0].Version, Oldest, Newest)
	}
	for i, r := range all {
		if i > 0 && minor(all[i-1].Version) != minor(r.Version)+1 {
			t.Errorf("%s follows %s: a minor release is missing", all[i-1].Version, r.Version)
		}
		if !regexp.MustCompile(`^k8s\.io/kubernetes@v` + regexp.QuoteMeta(r.Version) + `\.[0-9]+$`).MatchString(r.Source) {
			t.Errorf("release %s comes from %q, not from the k8s.io/kubernetes module of that release", r.Version, r.Source)
		}
		for _, gv := range []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "batch", Version: "v1"}, {Group: "networking.k8s.io", Version: "v1"}} {
			doc, err := r.OpenAPIV3(gv)
			if err != nil {
				t.Fatalf("%s: %v", r.Version, err)
			}
			var d struct {
				Components struct{ Schemas map[string]json.RawMessage }
			}
			if err := json.Unmarshal(doc, &d); err != nil || len(d.Components.Schemas) == 0 {
				t.Errorf("%s %s: not an OpenAPI document with schemas (%v)", r.Version, gv, err)
			}
		}
		for _, gvk := range []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "batch", Version: "v1", Kind: "CronJob"}} {
			if ok, err := r.ServesKind(gvk); !ok || err != nil {
				t.Errorf("%s does not serve %s (%v)", r.Version, gvk, err)
			}
		}
		if ok, _ := r.ServesKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ConfigMap"}); ok {
			t.Errorf("%s: apps/v1 serves ConfigMap, by the index", r.Version)
		}
	}
}

func TestGet(t *testing.T) {
	for _, v := range []string{Newest, "v" + Newest, Newest + ".4"} {
		if r, err := Get(v); err != nil || r.Version != Newest {
			t.Errorf("Get(%q) = %v, %v", v, r, err)
		}
	}
	if _, err := Get("1.20"); err == nil || !strings.Contains(err.Error(), Oldest) {
		t.Errorf("Get(1.20): %v, want an error listing what is known", err)
	}
}

func TestRemovedAPIsNameTheirReleaseAndReplacement(t *testing.T) {
	newest, err := Get(Newest)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		gvk                  schema.GroupVersionKind
		removed, replacement string
	}{
		{schema.GroupVersionKind{Group: "extensions", Version: "v1beta1", Kind: "Deployment"}, "1.16", "apps/v1"},
		{schema.GroupVersionKind{Group: "extensions", Version: "v1beta1", Kind: "Ingress"}, "1.22", "networking.k8s.io/v1"},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1beta1", Kind: "ClusterRole"}, "1.22", "rbac.authorization.k8s.io/v1"},
		{schema.GroupVersionKind{Group: "batch", Version: "v1beta1", Kind: "CronJob"}, "1.25", "batch/v1"},
		{schema.GroupVersionKind{Group: "policy", Version: "v1beta1", Kind: "PodDisruptionBudget"}, "1.25", "policy/v1"},
		{schema.GroupVersionKind{Group: "policy", Version: "v1beta1", Kind: "PodSecurityPolicy"}, "1.25", "none: Pod Security Admission"},
		{schema.GroupVersionKind{Group: "autoscaling", Version: "v2beta2", Kind: "HorizontalPodAutoscaler"}, "1.26", "autoscaling/v2"},
		{schema.GroupVersionKind{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta3", Kind: "FlowSchema"}, "1.32", "flowcontrol.apiserver.k8s.io/v1"},
	}
	for _, c := range cases {
		rm, err := newest.Removed(c.gvk)
		if err != nil || rm == nil {
			t.Errorf("%s: %v, %v: not found removed", c.gvk, rm, err)
			continue
		}
		if rm.Removed != c.removed || !strings.HasPrefix(rm.Replacement, c.replacement) {
			t.Errorf("%s: removed in %s, replaced by %q; want %s and %s", c.gvk, rm.Removed, rm.Replacement, c.removed, c.replacement)
		}
		if msg := rm.Error(); !strings.Contains(msg, c.gvk.GroupVersion().String()) || !strings.Contains(msg, c.removed) {
			t.Errorf("%s: %q does not name the apiVersion and the release", c.gvk, msg)
		}
	}
	// From the archives themselves: an API served by the oldest embedded
	// release and not by the newest.
	oldest, _ := Get(Oldest)
	found := 0
	for _, gv := range oldest.GroupVersions() {
		kinds, _ := oldest.Kinds(gv)
		for _, k := range kinds {
			gvk := gv.WithKind(k)
			if newest.Serves(gv) {
				continue
			}
			rm, err := newest.Removed(gvk)
			if err != nil || rm == nil {
				t.Errorf("%s: served by %s, not by %s, yet not reported removed (%v)", gvk, Oldest, Newest, err)
				continue
			}
			if minor(rm.Removed) <= minor(Oldest) || minor(rm.Removed) > minor(Newest) {
				t.Errorf("%s: removed in %s, outside %s to %s", gvk, rm.Removed, Oldest, Newest)
			}
			found++
		}
	}
	if found == 0 {
		t.Error("no API removed between the oldest and newest embedded releases: the check tested nothing")
	}
	// Served, custom, and made-up kinds are not removals.
	for _, gvk := range []schema.GroupVersionKind{{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "example.com", Version: "v1", Kind: "Widget"}} {
		if rm, err := newest.Removed(gvk); rm != nil || err != nil {
			t.Errorf("%s: %v, %v", gvk, rm, err)
		}
	}
}
