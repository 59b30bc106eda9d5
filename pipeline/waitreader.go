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
// the objects with one LIST per kind and namespace, all at once, before each
// poll.
//
// cli-utils' default poller also lists the ReplicaSets and Pods of every
// Deployment, one LIST after the other, to attach them to the Deployment's
// status; the status itself is Compute on the Deployment. For 200
// Deployments that made a poll cycle about 300 ms, most of the wait's
// latency. Why a workload is not ready is explained from its Pods once, by
// explain, not on every poll.
func newStatusPoller(c client.Reader, mapper meta.RESTMapper) *polling.StatusPoller {
	return polling.NewStatusPoller(c, mapper, polling.Options{
		CustomStatusReaders:  []engine.StatusReader{statusreaders.NewGenericStatusReader(mapper, status.Compute)},
		ClusterReaderFactory: engine.ClusterReaderFactoryFunc(newListReader),
	})
}

type gkNamespace struct {
	gk        schema.GroupKind
	namespace string
}

type listed struct {
	byName map[string]*unstructured.Unstructured
	err    error
}

// listReader is an engine.ClusterReader over the LISTs of the objects'
// kinds and namespaces, refreshed by Sync.
type listReader struct {
	client client.Reader
	mapper meta.RESTMapper
	groups []gkNamespace

	mu    sync.RWMutex
	cache map[gkNamespace]listed
}

func newListReader(c client.Reader, mapper meta.RESTMapper, ids object.ObjMetadataSet) (engine.ClusterReader, error) {
	seen := map[gkNamespace]bool{}
	r := &listReader{client: c, mapper: mapper}
	for _, id := range ids {
		g := gkNamespace{id.GroupKind, id.Namespace}
		if !seen[g] {
			seen[g] = true
			r.groups = append(r.groups, g)
		}
	}
	return r, nil
}

// Sync lists every group concurrently. A group that cannot be listed keeps
// its error, which Get returns for its objects.
func (r *listReader) Sync(ctx context.Context) error {
	cache := make(map[gkNamespace]listed, len(r.groups))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, gn := range r.groups {
		g.Go(func() error {
			l := r.list(gctx, gn)
			mu.Lock()
			cache[gn] = l
			mu.Unlock()
			return nil
		})
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
	if !ok {
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
