package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa/utils"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
)

// othersGround says why deleting live (for prune or delete) would take
// ground another inventory stands on, or "" when it would not: a
// Namespace that holds another gantry inventory's record (its ConfigMap,
// revisions) or objects labelled for another inventory, or, for delete,
// a CRD whose custom resources this inventory did not apply. Such an
// object is kept, listed, and the run fails naming what stands on it,
// unless the workflow allows it (prune-shared-namespaces,
// prune-crds-with-resources).
func (r *run) othersGround(ctx context.Context, live *unstructured.Unstructured) (string, error) {
	if utils.IsNamespace(live) && !r.opts.PruneSharedNamespaces {
		other, err := r.otherInventoryIn(ctx, live.GetName())
		if err != nil {
			return "", fmt.Errorf("not deleted: cannot tell whether another inventory stands on it: %w", err)
		}
		if other != "" {
			return fmt.Sprintf("kept: it holds %s, which deleting it would delete; it stays in the inventory (prune-shared-namespaces allows it)", other), nil
		}
		return "", nil
	}
	if r.res.Command != "delete" || r.opts.PruneCRDsWithResources {
		return "", nil
	}
	gk, ok := object.GetCRDGroupKind(live)
	if !ok {
		return "", nil
	}
	cr, err := r.foreignCustomResource(ctx, live)
	if err != nil {
		return "", fmt.Errorf("not deleted: cannot tell whether %s resources this inventory did not apply exist (deleting the CRD would delete them): %w", gk.Kind, err)
	}
	if cr != "" {
		return fmt.Sprintf("kept: %s resources this inventory did not apply exist (such as %s), and deleting the CRD would delete every one; it stays in the inventory (prune-crds-with-resources allows it)", gk.Kind, cr), nil
	}
	return "", nil
}

// otherInventoryIn names what in namespace ns belongs to another gantry
// inventory: its record, or an object labelled for it; "" when nothing.
func (r *run) otherInventoryIn(ctx context.Context, ns string) (string, error) {
	ours := func(l map[string]string) bool {
		return l[inventory.NameLabel] == r.opts.Inventory && l[inventory.NamespaceLabel] == r.opts.InventoryNamespace
	}
	cms, err := r.clients.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{
		LabelSelector: inventory.ManagedByLabel + "=" + inventory.ManagedByValue + "," + inventory.InventoryLabel,
	})
	if err != nil {
		return "", err
	}
	for _, cm := range cms.Items {
		if name := cm.Labels[inventory.InventoryLabel]; ns != r.opts.InventoryNamespace || name != r.opts.Inventory {
			return fmt.Sprintf("the record of gantry inventory %s/%s (ConfigMap %s)", ns, name, cm.Name), nil
		}
	}
	secrets, err := r.clients.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: inventory.RevisionOfLabel})
	if err != nil {
		return "", err
	}
	for _, s := range secrets.Items {
		if s.Type != inventory.RevisionType {
			continue
		}
		if of, inNS := s.Labels[inventory.RevisionOfLabel], s.Labels[inventory.RevisionNamespaceLabel]; of != r.opts.Inventory || inNS != r.opts.InventoryNamespace {
			return fmt.Sprintf("revisions of gantry inventory %s/%s (Secret %s)", inNS, of, s.Name), nil
		}
	}
	// Objects labelled for another inventory, of any kind the cluster
	// lists: read by their metadata, a page of each kind at once.
	lists, err := discovery.ServerPreferredNamespacedResources(r.clients.Kube.Discovery())
	if err != nil && len(lists) == 0 {
		return "", err
	}
	kinds := map[schema.GroupVersionResource]string{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, res := range l.APIResources {
			if res.Namespaced && slices.Contains(res.Verbs, "list") && res.Name != "events" && !strings.Contains(res.Name, "/") {
				kinds[gv.WithResource(res.Name)] = res.Kind
			}
		}
	}
	var (
		mu    sync.Mutex
		found string
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(min(r.opts.Concurrency, 16), 1))
	for gvr, kind := range kinds {
		g.Go(func() error {
			list, err := r.clients.Metadata.Resource(gvr).Namespace(ns).List(gctx, metav1.ListOptions{LabelSelector: inventory.NameLabel, Limit: 500})
			if err != nil {
				return nil // a kind this identity may not list is not ground it can see
			}
			for _, m := range list.Items {
				if !ours(m.Labels) {
					mu.Lock()
					if found == "" {
						found = fmt.Sprintf("%s, labelled for gantry inventory %s/%s", result.Ref(gvr.Group, kind, ns, m.Name), m.Labels[inventory.NamespaceLabel], m.Labels[inventory.NameLabel])
					}
					mu.Unlock()
					return nil
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	return found, nil
}

// foreignCustomResource names one custom resource of the live CRD that
// this inventory does not list (another inventory's, or made by hand);
// "" when there is none.
func (r *run) foreignCustomResource(ctx context.Context, crd *unstructured.Unstructured) (string, error) {
	listed := map[string]bool{}
	for _, e := range r.previous {
		listed[e.ID] = true
	}
	return customResource(ctx, r.clients.Client, crd, func(u *unstructured.Unstructured) bool {
		return listed[inventory.EntryFor(u).ID]
	})
}
