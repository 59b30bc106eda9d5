package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/statusreaders"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statusPoller is the run's status poller: see newStatusPoller; it reads
// with the run's concurrency, and selects spread kinds by the run's
// inventory labels.
func (r *run) statusPoller() *polling.StatusPoller {
	owner := inventoryRef{namespace: r.opts.InventoryNamespace, name: r.opts.Inventory}
	return newStatusPoller(r.clients.Client, r.clients.Mapper, r.opts.Concurrency, owner.labelled(), r.waitGuard())
}

// newStatusPoller polls with kstatus's Compute on each object alone, reading
// the objects before each poll, all at once, by the read policy of
// listGroups: one LIST per kind and namespace where the set has many, a
// GET each otherwise, or for a kind spread over namespaces, one LIST in
// all of them of the objects selector selects.
//
// cli-utils' default poller also lists the ReplicaSets and Pods of every
// Deployment, one LIST after the other, to attach them to the Deployment's
// status; the status itself is Compute on the Deployment. For 200
// Deployments that made a poll cycle about 300 ms, most of the wait's
// latency. Why a workload is not ready is explained from its Pods once, by
// explain, not on every poll.
func newStatusPoller(c client.Reader, mapper meta.RESTMapper, concurrency int, selector client.MatchingLabels, rules ruleGuard) *polling.StatusPoller {
	compute := func(u *unstructured.Unstructured) (*status.Result, error) {
		if v, ok := rules.evaluate(context.Background(), u); ok {
			return v.Result, nil
		}
		return computeStatus(u)
	}
	return polling.NewStatusPoller(c, mapper, polling.Options{
		CustomStatusReaders: []engine.StatusReader{statusreaders.NewGenericStatusReader(mapper, compute)},
		ClusterReaderFactory: engine.ClusterReaderFactoryFunc(func(c client.Reader, mapper meta.RESTMapper, ids object.ObjMetadataSet) (engine.ClusterReader, error) {
			return newListReader(c, mapper, ids, concurrency, selector)
		}),
	})
}

// computeStatus is kstatus's Compute, except that a Deployment's failure
// that predates gantry's last write of it is in progress: the Deployment
// controller may record the new generation as observed (a rollback to an
// earlier ReplicaSet, say) before it replaces the Progressing condition
// that timed out the rollout before, and that verdict is about the
// rollout the write replaced.
//
// And a Job is ready when it has completed: kstatus calls a Job that has
// started Current, so a Job whose pods go on to fail would pass the wait.
func computeStatus(u *unstructured.Unstructured) (*status.Result, error) {
	res, err := status.Compute(u)
	if err == nil && res.Status == status.CurrentStatus && runningJob(u) {
		return &status.Result{Status: status.InProgressStatus, Message: res.Message}, nil
	}
	if err != nil || res.Status != status.FailedStatus || !staleFailure(u) {
		return res, err
	}
	return &status.Result{Status: status.InProgressStatus, Message: "the Deployment controller has not judged this rollout yet: " + res.Message}, nil
}

// runningJob reports whether u is a Job that has not completed.
func runningJob(u *unstructured.Unstructured) bool {
	if u.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "batch", Kind: "Job"}) {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Complete" && m["status"] == "True" {
			return false
		}
	}
	return true
}

// staleFailure reports whether u is a Deployment whose failing Progressing
// condition was last updated no later than gantry's apply of it. A
// rollout gantry started cannot time out in the second it started, as its
// progress deadline is at least a second.
func staleFailure(u *unstructured.Unstructured) bool {
	if u.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: "apps", Kind: "Deployment"}) {
		return false
	}
	var applied time.Time
	for _, m := range u.GetManagedFields() {
		if m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == "" && m.Time != nil {
			applied = m.Time.Time
		}
	}
	if applied.IsZero() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Progressing" || m["status"] != "False" {
			continue
		}
		updated, _ := m["lastUpdateTime"].(string)
		t, err := time.Parse(time.RFC3339, updated)
		return err == nil && !t.After(applied)
	}
	return false
}

type gkNamespace struct {
	gk        schema.GroupKind
	namespace string
}

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

// Sync reads every group by the read policy (listGroups): the groups it
// does not list whole, or may not list, are read by GETs, but for what the
// LISTs by the inventory's labels (selector) found. A kind the cluster
// does not serve keeps its error, as does a group whose LIST failed
// otherwise, and a GET that fails its object's; Get returns them.
func (r *listReader) Sync(ctx context.Context) error {
	cache := make(map[gkNamespace]listed, len(r.groups))
	groups := map[groupKey]int{}
	keys := map[gkNamespace]groupKey{}
	for _, gn := range r.groups {
		mapping, err := r.mapper.RESTMapping(gn.gk)
		if err != nil {
			cache[gn] = listed{err: err}
			continue
		}
		k := groupKey{mapping.GroupVersionKind, gn.namespace}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			k.namespace = ""
		}
		keys[gn] = k
		groups[k] += len(r.names[gn])
	}
	found := listGroups(ctx, r.client, groups, r.selector, r.concurrency)

	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.concurrency)
	for gn, k := range keys {
		if err := found.failed[k]; err != nil && !apierrors.IsForbidden(err) {
			// A LIST that failed otherwise than by being refused fails
			// its objects until the next poll, rather than turning into
			// a GET of each of many objects on every poll.
			cache[gn] = listed{err: err}
			continue
		}
		if items, ok := found.whole[k]; ok {
			l := listed{byName: make(map[string]*unstructured.Unstructured, len(items))}
			for i := range items {
				l.byName[items[i].GetName()] = &items[i]
			}
			cache[gn] = l
			continue
		}
		l := listed{byName: map[string]*unstructured.Unstructured{}, errs: map[string]error{}, someOnly: true}
		var missing []string
		for _, name := range r.names[gn] {
			if u := found.labelled[objectKey{k, name}]; u != nil {
				l.byName[name] = u
			} else {
				missing = append(missing, name)
			}
		}
		cache[gn] = l
		for _, name := range missing {
			g.Go(func() error {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(k.gvk)
				err := r.client.Get(gctx, client.ObjectKey{Namespace: k.namespace, Name: name}, u)
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
