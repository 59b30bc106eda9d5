package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/statusreaders"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newStatusPoller polls with kstatus's Compute on each object alone, reading
// the objects before each poll, all at once: one LIST per kind and
// namespace where the set has many, a GET each otherwise (see
// readsByList), or for a kind spread over namespaces, one LIST in all of
// them of the objects selector selects.
//
// cli-utils' default poller also lists the ReplicaSets and Pods of every
// Deployment, one LIST after the other, to attach them to the Deployment's
// status; the status itself is Compute on the Deployment. For 200
// Deployments that made a poll cycle about 300 ms, most of the wait's
// latency. Why a workload is not ready is explained from its Pods once, by
// explain, not on every poll.
func newStatusPoller(c client.Reader, mapper meta.RESTMapper, concurrency int, selector client.MatchingLabels) *polling.StatusPoller {
	return polling.NewStatusPoller(c, mapper, polling.Options{
		CustomStatusReaders: []engine.StatusReader{statusreaders.NewGenericStatusReader(mapper, status.Compute)},
		ClusterReaderFactory: engine.ClusterReaderFactoryFunc(func(c client.Reader, mapper meta.RESTMapper, ids object.ObjMetadataSet) (engine.ClusterReader, error) {
			return newListReader(c, mapper, ids, concurrency, selector)
		}),
	})
}

type gkNamespace struct {
	gk        schema.GroupKind
	namespace string
}

// readsByList reports whether n objects of kind gk in one namespace are
// read with one LIST rather than a GET each. A LIST reads every object of
// the kind there, the set's or not: it pays off only for many of the
// set's own. CustomResourceDefinitions are never listed: a cluster may
// serve hundreds, some of them megabytes, and a set brings a few.
func readsByList(gk schema.GroupKind, n int) bool {
	return n >= listThreshold && gk != crdGroupKind
}

var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// listed is what one read of a group found: the objects by name, and the
// error of the LIST, or of each GET that failed other than not found.
type listed struct {
	byName map[string]*unstructured.Unstructured
	err    error
	errs   map[string]error
	// someOnly: read by GETs, byName holds the set's objects only.
	someOnly bool
}

// listReader is an engine.ClusterReader over the objects of the set,
// refreshed by Sync.
type listReader struct {
	client client.Reader
	mapper meta.RESTMapper
	groups []gkNamespace
	names  map[gkNamespace][]string
	// concurrency bounds the reads in flight.
	concurrency int
	// selector selects the objects of the run's inventory (nil: none).
	selector client.MatchingLabels

	mu    sync.RWMutex
	cache map[gkNamespace]listed
}

func newListReader(c client.Reader, mapper meta.RESTMapper, ids object.ObjMetadataSet, concurrency int, selector client.MatchingLabels) (engine.ClusterReader, error) {
	r := &listReader{client: c, mapper: mapper, names: map[gkNamespace][]string{}, concurrency: max(concurrency, 1), selector: selector}
	for _, id := range ids {
		g := gkNamespace{id.GroupKind, id.Namespace}
		if _, seen := r.names[g]; !seen {
			r.groups = append(r.groups, g)
		}
		r.names[g] = append(r.names[g], id.Name)
	}
	return r, nil
}

// Sync reads every group concurrently. A group that cannot be read keeps
// its error, which Get returns for its objects. Groups of few objects are
// read by GETs, but a kind spread over namespaces, a few in each, is
// first listed in all namespaces with the inventory's labels (selector),
// and only what that does not find is read by GETs.
func (r *listReader) Sync(ctx context.Context) error {
	cache := make(map[gkNamespace]listed, len(r.groups))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.concurrency)
	spread := map[schema.GroupKind]int{}
	var byGets []gkNamespace
	mappings := map[gkNamespace]*meta.RESTMapping{}
	for _, gn := range r.groups {
		if readsByList(gn.gk, len(r.names[gn])) {
			g.Go(func() error {
				l := r.list(gctx, gn)
				mu.Lock()
				cache[gn] = l
				mu.Unlock()
				return nil
			})
			continue
		}
		l := listed{byName: map[string]*unstructured.Unstructured{}, errs: map[string]error{}, someOnly: true}
		mapping, err := r.mapper.RESTMapping(gn.gk)
		l.err = err
		mu.Lock()
		cache[gn] = l
		mu.Unlock()
		if err != nil {
			continue
		}
		mappings[gn] = mapping
		byGets = append(byGets, gn)
		if gn.namespace != "" {
			spread[gn.gk] += len(r.names[gn])
		}
	}
	if r.selector != nil {
		for gk, n := range spread {
			if !readsByList(gk, n) {
				continue
			}
			g.Go(func() error {
				r.listLabelled(gctx, gk, cache, &mu)
				return nil
			})
		}
	}
	_ = g.Wait()
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(r.concurrency)
	for _, gn := range byGets {
		l := cache[gn]
		var missing []string
		for _, name := range r.names[gn] {
			if l.byName[name] == nil {
				missing = append(missing, name)
			}
		}
		for _, name := range missing {
			g.Go(func() error {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(mappings[gn].GroupVersionKind)
				err := r.client.Get(gctx, client.ObjectKey{Namespace: gn.namespace, Name: name}, u)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					l.byName[name] = u
				case !apierrors.IsNotFound(err):
					l.errs[name] = err
				}
				return nil
			})
		}
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	r.cache = cache
	r.mu.Unlock()
	return nil
}

// listLabelled lists kind gk in all namespaces, the objects carrying the
// inventory's labels only, into the groups of cache that are read by
// GETs. A LIST that fails leaves them to the GETs.
func (r *listReader) listLabelled(ctx context.Context, gk schema.GroupKind, cache map[gkNamespace]listed, mu *sync.Mutex) {
	mapping, err := r.mapper.RESTMapping(gk)
	if err != nil {
		return
	}
	items, err := listKind(ctx, r.client, mapping.GroupVersionKind, "", r.selector)
	if err != nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range items {
		if l, ok := cache[gkNamespace{gk, items[i].GetNamespace()}]; ok && l.someOnly && l.err == nil {
			l.byName[items[i].GetName()] = &items[i]
		}
	}
}

func (r *listReader) list(ctx context.Context, gn gkNamespace) listed {
	mapping, err := r.mapper.RESTMapping(gn.gk)
	if err != nil {
		return listed{err: err}
	}
	namespace := ""
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		namespace = gn.namespace
	}
	items, err := listKind(ctx, r.client, mapping.GroupVersionKind, namespace)
	if err != nil {
		return listed{err: err}
	}
	l := listed{byName: make(map[string]*unstructured.Unstructured, len(items))}
	for i := range items {
		l.byName[items[i].GetName()] = &items[i]
	}
	return l
}

func (r *listReader) Get(_ context.Context, key client.ObjectKey, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	r.mu.RLock()
	l, ok := r.cache[gkNamespace{gvk.GroupKind(), key.Namespace}]
	r.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%s in namespace %q was not listed", gvk.GroupKind(), key.Namespace)
	}
	if l.err != nil {
		return l.err
	}
	if err := l.errs[key.Name]; err != nil {
		return err
	}
	u, ok := l.byName[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	}
	obj.Object = u.DeepCopy().Object
	return nil
}

func (r *listReader) ListNamespaceScoped(_ context.Context, list *unstructured.UnstructuredList, namespace string, selector labels.Selector) error {
	gvk := list.GroupVersionKind()
	r.mu.RLock()
	l, ok := r.cache[gkNamespace{gvk.GroupKind(), namespace}]
	r.mu.RUnlock()
	if !ok || l.someOnly {
		return fmt.Errorf("%s in namespace %q was not listed", gvk.GroupKind(), namespace)
	}
	if l.err != nil {
		return l.err
	}
	list.Items = nil
	for _, u := range l.byName {
		if selector.Matches(labels.Set(u.GetLabels())) {
			list.Items = append(list.Items, *u.DeepCopy())
		}
	}
	return nil
}

func (r *listReader) ListClusterScoped(ctx context.Context, list *unstructured.UnstructuredList, selector labels.Selector) error {
	return r.ListNamespaceScoped(ctx, list, "", selector)
}
