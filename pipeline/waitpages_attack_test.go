package pipeline

// What an attacker who can write in a namespace tried against the
// wait's paged reads, kept as it was reproduced.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/gantry-dev/gantry/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

const attack2MaxCalls = 1000

func attack2Deployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "uid-web"},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
	}}
}

// podOwners pages the ReplicaSets while read < maxPodsRead, but read
// counts items: pages with no items and a Continue token never end the
// loop. The reactor gives up after attack2MaxCalls so that the test ends.
func TestAttackReplicaSetPagesWithoutItemsNeverEnd(t *testing.T) {
	cs := kubefake.NewClientset()
	calls := 0
	cs.PrependReactor("list", "replicasets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls > attack2MaxCalls {
			return true, nil, errors.New("stop")
		}
		return true, &appsv1.ReplicaSetList{ListMeta: metav1.ListMeta{Continue: "same"}}, nil
	})
	r := newRun("apply", Options{}, nil, &infos{})
	r.clients = &kube.Clients{Kube: cs}
	r.podReasons(context.Background(), attack2Deployment(), true)
	if calls > 20 {
		t.Errorf("%d LISTs of ReplicaSets for one look: the page loop is bounded by items only", calls)
	}
}

// podReasons pages the pods until read >= maxPodsRead: the same with
// empty pages.
func TestAttackPodPagesWithoutItemsNeverEnd(t *testing.T) {
	sts := replicaSet("db", "app", "web")
	sts.SetKind("StatefulSet")
	cs := kubefake.NewClientset()
	calls := 0
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls > attack2MaxCalls {
			return true, nil, errors.New("stop")
		}
		return true, &corev1.PodList{ListMeta: metav1.ListMeta{Continue: "same"}}, nil
	})
	r := newRun("apply", Options{}, nil, &infos{})
	r.clients = &kube.Clients{Kube: cs}
	r.podReasons(context.Background(), sts, true)
	if calls > 20 {
		t.Errorf("%d LISTs of pods for one look: the page loop is bounded by items only", calls)
	}
}

// relatedReasons: the same with CertificateRequests.
func TestAttackRelatedPagesWithoutItemsNeverEnd(t *testing.T) {
	cert := attackCertificate()
	r, _ := attackCertRun(t, cert)
	mapper := r.clients.Mapper
	calls := 0
	r.clients.Client = fake.NewClientBuilder().WithRESTMapper(mapper.(meta.RESTMapper)).WithObjects(cert).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			calls++
			if calls > attack2MaxCalls {
				return errors.New("stop")
			}
			list.(*unstructured.UnstructuredList).SetContinue("same")
			return nil
		}}).Build()
	r.relatedReasons(context.Background(), cert)
	if calls > 20 {
		t.Errorf("%d LISTs of CertificateRequests for one look: the page loop is bounded by items only", calls)
	}
}

// Lookalike pods (the workload's labels, no controller reference: the
// simplest lookalike) named to sort first fill the maxPodsRead window:
// the workload's own crashing pod is never read, and the wait says
// "(of the first 0 pods)" as the workload's cause, in the progress
// line (a line of its own, as a new cause) and the failure.
func TestAttackLookalikePodsHideTheOwnPodsCause(t *testing.T) {
	sts := replicaSet("web", "app", "web")
	sts.SetKind("StatefulSet")
	var objs []runtime.Object
	for i := 0; i < maxPodsRead; i++ {
		p := unschedulablePod(fmt.Sprintf("a-decoy-%03d", i), "decoy")
		p.Labels = map[string]string{"app": "web"}
		objs = append(objs, &p)
	}
	own := crashingPod("web-0", "10s")
	own.Labels = map[string]string{"app": "web"}
	controlledBy(&own, sts)
	objs = append(objs, &own)
	cs := kubefake.NewClientset(objs...)
	// The fake does not page: page as the API server does, by name.
	cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.ListActionImpl)
		start := 0
		if c := l.ListOptions.Continue; c != "" {
			fmt.Sscan(c, &start)
		}
		var all []corev1.Pod
		for _, o := range objs {
			all = append(all, *o.(*corev1.Pod))
		}
		end := min(start+int(l.ListOptions.Limit), len(all))
		out := &corev1.PodList{Items: all[start:end]}
		if end < len(all) {
			out.Continue = fmt.Sprint(end)
		}
		return true, out, nil
	})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, meta.RESTScopeNamespace)
	r := newRun("apply", Options{}, nil, &infos{})
	r.clients = &kube.Clients{Kube: cs, Client: fake.NewClientBuilder().WithRESTMapper(mapper).Build(), Mapper: mapper}
	id := object.UnstructuredToObjMetadata(sts)
	why, cause := r.shortWhy(context.Background(), id, &event.ResourceStatus{Identifier: id, Resource: sts, Status: status.InProgressStatus})
	t.Logf("why %q cause %q", why, cause)
	// Pods that only carry its labels can crowd its own out of what
	// is read (nothing selects pods by controller): the cut is said,
	// as gantry's note, never as the workload's cause.
	if !strings.Contains(why, "(none of its pods among the first 500 its selector matches)") {
		t.Errorf("progress why %q: %d lookalike pods hide the own pod, and nothing says so", why, maxPodsRead)
	}
	if cause != "" {
		t.Errorf("cause %q: a note of gantry's said as the workload's cause", cause)
	}
}

// attack2Pager pages a fake's LIST of resource by name order, as the API
// server does, honouring Limit and Continue.
func attack2Pager(cs *kubefake.Clientset, resource string, items func() []runtime.Object, mk func([]runtime.Object, string) runtime.Object) {
	cs.PrependReactor("list", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.ListActionImpl)
		all := items()
		start := 0
		if c := l.ListOptions.Continue; c != "" {
			fmt.Sscan(c, &start)
		}
		end := len(all)
		if l.ListOptions.Limit > 0 {
			end = min(start+int(l.ListOptions.Limit), len(all))
		}
		cont := ""
		if end < len(all) {
			cont = fmt.Sprint(end)
		}
		return true, mk(all[start:end], cont), nil
	})
}

// Lookalike ReplicaSets (the Deployment's labels, no controller
// reference) named to sort first fill podOwners' maxPodsRead window:
// the Deployment's own ReplicaSet is never read, so its crashing pod is
// not said, and nothing says that the look was cut short.
func TestAttackLookalikeReplicaSetsHideTheDeploymentsPods(t *testing.T) {
	dep := attack2Deployment()
	lbl := map[string]string{"app": "web"}
	var rss []runtime.Object
	for i := 0; i < maxPodsRead; i++ {
		rss = append(rss, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("a-decoy-%03d", i), Namespace: "shop", UID: "uid-decoy", Labels: lbl}})
	}
	own := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-7f", Namespace: "shop", UID: "uid-web-7f", Labels: lbl}}
	controlledBy(own, dep)
	rss = append(rss, own)
	pod := crashingPod("web-7f-1", "10s")
	pod.Labels = lbl
	controlledBy(&pod, replicaSet("web-7f", "app", "web"))
	cs := kubefake.NewClientset(&pod)
	attack2Pager(cs, "replicasets", func() []runtime.Object { return rss }, func(o []runtime.Object, c string) runtime.Object {
		out := &appsv1.ReplicaSetList{ListMeta: metav1.ListMeta{Continue: c}}
		for _, x := range o {
			out.Items = append(out.Items, *x.(*appsv1.ReplicaSet))
		}
		return out
	})
	r := newRun("apply", Options{}, nil, &infos{})
	r.clients = &kube.Clients{Kube: cs}
	got := r.podReasons(context.Background(), dep, true)
	if len(got) != 1 || got[0] != "(none of its ReplicaSets among the first 500 its selector matches)" {
		t.Errorf("causes %q: %d lookalike ReplicaSets hide the Deployment's crashing pod, and nothing says so", got, maxPodsRead)
	}
}
