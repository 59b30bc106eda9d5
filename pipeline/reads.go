package pipeline

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// How gantry reads the live objects of a set, in validate (the planner)
// and in the wait: one policy, in listGroups.

// listThreshold is how many objects of one kind in one namespace make a
// LIST cheaper than a GET each.
const listThreshold = 8

// readsByList reports whether n objects of kind gk in one namespace are
// read with one LIST rather than a GET each. A LIST reads every object of
// the kind there, the set's or not: it pays off only for many of the
// set's own. CustomResourceDefinitions are never listed: a cluster may
// serve hundreds, some of them megabytes, and a set brings a few.
func readsByList(gk schema.GroupKind, n int) bool {
	return n >= listThreshold && gk != crdGroupKind
}

var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// lists is what listGroups read.
type lists struct {
	// whole holds the groups listed whole: every object of the kind in
	// the namespace, the set's or not. A group missing here was not
	// listed, or its LIST failed.
	whole map[groupKey][]unstructured.Unstructured
	// labelled holds the objects that the LISTs by the inventory's
	// labels found in groups read by GETs.
	labelled map[objectKey]*unstructured.Unstructured
	// failed holds the error of each group whose LIST failed.
	failed map[groupKey]error
}

// listGroups sends the LISTs that reading groups takes (each with how many
// of the set's objects it holds): one LIST of each group of many objects
// (readsByList); for a namespaced kind spread over namespaces with a few
// objects in each, one LIST in all namespaces of the objects selector
// selects; for each other group of a few, one LIST of those in the group
// (none of either when selector is nil). The rest is left to GETs, and so are the
// groups whose LIST failed (a kind whose CRD comes with the set, an
// account that may get but not list): an object is taken for absent only
// when its group was listed whole.
func listGroups(ctx context.Context, c client.Reader, groups map[groupKey]int, selector client.MatchingLabels, concurrency int) lists {
	return listGroupsBy(ctx, c, groups, selector, concurrency, false)
}

// listGroupsBy is listGroups; with metadataOnly, the objects read hold
// their metadata alone (names, labels, resourceVersion), which the API
// server sends and gantry decodes for a fraction of the cost.
func listGroupsBy(ctx context.Context, c client.Reader, groups map[groupKey]int, selector client.MatchingLabels, concurrency int, metadataOnly bool) lists {
	found := lists{whole: map[groupKey][]unstructured.Unstructured{}, labelled: map[objectKey]*unstructured.Unstructured{}, failed: map[groupKey]error{}}
	byGets := func(k groupKey) bool { n, ok := groups[k]; return ok && !readsByList(k.gvk.GroupKind(), n) }
	spread := map[schema.GroupVersionKind]int{}
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(concurrency, 1))
	for k, n := range groups {
		if byGets(k) {
			if k.namespace != "" {
				spread[k.gvk] += n
			}
			continue
		}
		g.Go(func() error {
			items, err := listKind(ctx, c, k.gvk, k.namespace, metadataOnly)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				found.failed[k] = err
			} else {
				found.whole[k] = items
			}
			return nil
		})
	}
	labelled := func(gvk schema.GroupVersionKind, namespace string) {
		g.Go(func() error {
			items, err := listKind(ctx, c, gvk, namespace, metadataOnly, selector)
			if err != nil {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			for i := range items {
				if k := keyOf(&items[i]); byGets(k.group) {
					found.labelled[k] = &items[i]
				}
			}
			return nil
		})
	}
	if selector != nil {
		for gvk, n := range spread {
			if readsByList(gvk.GroupKind(), n) {
				labelled(gvk, "")
			}
		}
		// Each other group read by GETs: its labelled objects with one
		// LIST, which also finds what is labelled for the inventory but
		// not in the set (orphans, pruned as stale). Not CRDs, which the
		// API server would have to read every one of to select from.
		for k := range groups {
			if byGets(k) && k.gvk.GroupKind() != crdGroupKind && (k.namespace == "" || !readsByList(k.gvk.GroupKind(), spread[k.gvk])) {
				labelled(k.gvk, k.namespace)
			}
		}
	}
	_ = g.Wait()
	return found
}

// listKind lists the objects of kind gvk in namespace (everywhere, or the
// cluster-scoped ones, when it is empty), each with its kind set.
func listKind(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, namespace string, metadataOnly bool, opts ...client.ListOption) ([]unstructured.Unstructured, error) {
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if metadataOnly {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		items := make([]unstructured.Unstructured, len(list.Items))
		for i, m := range list.Items {
			items[i].SetGroupVersionKind(gvk)
			items[i].SetNamespace(m.Namespace)
			items[i].SetName(m.Name)
			items[i].SetLabels(m.Labels)
			items[i].SetResourceVersion(m.ResourceVersion)
		}
		return items, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(gvk)
	}
	return list.Items, nil
}
