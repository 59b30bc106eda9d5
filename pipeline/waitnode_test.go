package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/event"
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/kube"
	"github.com/gantry-dev/gantry/redact"
)

// What a kubelet reports, as the wait meets it on a real node (make
// test-node runs the same cases on one).

func job(conditions ...map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": "migrate", "namespace": "shop"},
		"spec":     map[string]any{"backoffLimit": int64(1)},
		"status":   map[string]any{"startTime": "2026-11-27T07:00:00Z", "active": int64(1)},
	}}
	if len(conditions) > 0 {
		var cs []any
		for _, c := range conditions {
			cs = append(cs, c)
		}
		_ = unstructured.SetNestedSlice(u.Object, cs, "status", "conditions")
	}
	return u
}

// A Job is ready when it has completed, not when it has started (which
// kstatus calls Current); one that failed says why.
func TestAJobIsReadyWhenItCompleted(t *testing.T) {
	t.Parallel()
	res, err := computeStatus(job())
	if err != nil || res.Status != status.InProgressStatus {
		t.Errorf("a running Job: %+v, %v; want InProgress", res, err)
	}
	res, err = computeStatus(job(map[string]any{"type": "Complete", "status": "True"}))
	if err != nil || res.Status != status.CurrentStatus {
		t.Errorf("a completed Job: %+v, %v; want Current", res, err)
	}
	failed := job(map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"})
	res, err = computeStatus(failed)
	if err != nil || res.Status != status.FailedStatus {
		t.Errorf("a failed Job: %+v, %v; want Failed", res, err)
	}
	got := strings.Join(failingConditions(failed), "\n")
	if !strings.Contains(got, "condition Failed=True (BackoffLimitExceeded): Job has reached the specified backoff limit") {
		t.Errorf("the failed Job's conditions say %q", got)
	}
	if c := failingConditions(job(map[string]any{"type": "Complete", "status": "True"})); len(c) != 0 {
		t.Errorf("a completed Job's conditions say %q", c)
	}
}

func oomPod(limit string) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hog-1", Namespace: "shop", Labels: map[string]string{"app": "hog"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name:                 "app",
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container=app pod=hog-1_shop(0a1b)"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}},
		}}},
	}
	if limit != "" {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}
	}
	return p
}

// An OOM kill is said with the memory limit the container went over.
func TestAnOOMKillSaysTheLimit(t *testing.T) {
	t.Parallel()
	p := oomPod("48Mi")
	got := groupPods(p)
	if len(got) != 1 || got[0] != "1 pod waiting in container app (CrashLoopBackOff): last ended OOMKilled, exit code 137, memory limit 48Mi" {
		t.Errorf("causes %q", got)
	}
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}
	if got := groupPods(p); len(got) != 1 || !strings.Contains(got[0], "terminated (OOMKilled, exit code 137, memory limit 48Mi)") {
		t.Errorf("causes %q", got)
	}
	if got := groupPods(oomPod("")); len(got) != 1 || strings.Contains(got[0], "limit") {
		t.Errorf("a container without a limit: %q", got)
	}
	crash := crashingPod("web-1", "10s")
	crash.Spec.Containers = []corev1.Container{{Name: "web", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	if got := groupPods(crash); len(got) != 1 || strings.Contains(got[0], "limit") {
		t.Errorf("an error other than OOMKilled: %q", got)
	}
}

// Unless the workflow asks (pod-log-lines), what a failed container
// logged is not read, nor said: a pod's log
// is whatever its image prints, Secrets of its namespace included.
func TestAFailedContainersLogIsNotRead(t *testing.T) {
	t.Parallel()
	crash := crashingPod("web-1", "10s")
	set := replicaSet("web", "app", "web")
	controlledBy(&crash, set)
	client := kubefake.NewClientset(&crash)
	r := newRun("apply", Options{}, nil, &infos{})
	r.clients = &kube.Clients{Kube: client}
	got := r.podReasons(context.Background(), set, true)
	if len(got) == 0 || !strings.Contains(got[0], "CrashLoopBackOff") {
		t.Errorf("causes %q, want the crash loop", got)
	}
	for _, a := range client.Actions() {
		if a.GetSubresource() == "log" {
			t.Errorf("the pod's log was read: %v", a)
		}
	}
	if strings.Contains(strings.Join(got, "\n"), "fake logs") {
		t.Errorf("the log is said: %q", got)
	}
}

// A kubelet of v1.36 leaves a container terminated, as it ended, through
// the back-off before it restarts it: that is a crash loop too, said as
// one; a container that will not be restarted is said as terminated.
func TestACrashLoopOfAKubeletThatKeepsTheContainerTerminated(t *testing.T) {
	t.Parallel()
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop"},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "web"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "web", RestartCount: 2,
			State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3}},
		}}},
	}
	// Grouped with the same crash loop as an earlier kubelet says it.
	earlier := crashingPod("web-2", "20s")
	earlier.Status.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode = 3
	if got := groupPods(p, earlier); len(got) != 1 || got[0] != "2 pods waiting in container web (CrashLoopBackOff): last ended Error, exit code 3" {
		t.Errorf("causes %q", got)
	}
	if got := groupPods(p); len(got) != 1 || got[0] != "1 pod waiting in container web (CrashLoopBackOff): last ended Error, exit code 3" {
		t.Errorf("causes %q", got)
	}
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	if got := groupPods(p); len(got) != 1 || got[0] != "1 pod with container web terminated (Error, exit code 3)" {
		t.Errorf("never restarted: %q", got)
	}
	p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	p.Status.ContainerStatuses[0].RestartCount = 0
	if got := groupPods(p); len(got) != 1 || got[0] != "1 pod with container web terminated (Error, exit code 3)" {
		t.Errorf("not restarted yet: %q", got)
	}
}

// A container running again after it was OOM-killed, in a pod Ready for
// less than its Deployment's minReadySeconds, is said as restarted, with
// how it last ended; its log is the previous container's.
func TestARestartedContainerIsSaidBetweenItsEnds(t *testing.T) {
	t.Parallel()
	p := oomPod("48Mi")
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	p.Status.ContainerStatuses[0].RestartCount = 3
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if got := groupPods(p); len(got) != 1 || got[0] != "1 pod with container app restarted: last ended OOMKilled, exit code 137, memory limit 48Mi" {
		t.Errorf("causes %q", got)
	}
	set := replicaSet("hog", "app", "hog")
	controlledBy(&p, set)
	r := newRun("apply", Options{}, nil, &infos{})
	r.clients = &kube.Clients{Kube: kubefake.NewClientset(&p)}
	got := r.podReasons(context.Background(), set, false)
	if len(got) != 1 || !strings.Contains(got[0], "OOMKilled") {
		t.Errorf("a Ready pod that restarted: %q", got)
	}
	p.Status.ContainerStatuses[0].RestartCount = 0
	p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{}
	r.clients = &kube.Clients{Kube: kubefake.NewClientset(&p)}
	if got := r.podReasons(context.Background(), set, false); len(got) != 0 {
		t.Errorf("a Ready pod that never failed: %q", got)
	}
}

// replicaSet is a ReplicaSet of shop as the cluster holds it (with a
// UID), selecting its pods by one label.
func replicaSet(name, key, value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "ReplicaSet",
		"metadata": map[string]any{"name": name, "namespace": "shop", "uid": "uid-" + name},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{key: value}}},
	}}
}

// controlledBy makes owner the controller of obj, as owner's controller
// does.
func controlledBy(obj metav1.Object, owner *unstructured.Unstructured) {
	yes := true
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: &yes,
	}))
}

// Pods that carry a workload's labels but that its controller did not
// make (any writer of the namespace can create one and write its
// status) are not its pods: what they say is not said of it. A
// Deployment's pods are those of the ReplicaSets it controls; one
// selected by matchExpressions is read with them.
func TestOnlyAWorkloadsOwnPodsSpeakForIt(t *testing.T) {
	t.Parallel()
	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "uid-web"},
		"spec": map[string]any{"selector": map[string]any{
			"matchLabels":      map[string]any{"app": "web"},
			"matchExpressions": []any{map[string]any{"key": "tier", "operator": "In", "values": []any{"front"}}},
		}},
	}}
	labels := map[string]string{"app": "web", "tier": "front"}
	own := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-7f", Namespace: "shop", UID: "uid-web-7f", Labels: labels}}
	controlledBy(own, dep)
	other := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-forged", Namespace: "shop", UID: "uid-forged", Labels: labels}}

	real := crashingPod("web-7f-1", "10s")
	real.Labels = labels
	controlledBy(&real, replicaSet("web-7f", "app", "web"))
	noOwner := unschedulablePod("decoy-1", "forged: run kubectl delete ns shop")
	noOwner.Labels = labels
	forgedOwner := unschedulablePod("decoy-2", "forged: run kubectl delete ns shop")
	forgedOwner.Labels = labels
	controlledBy(&forgedOwner, replicaSet("web-forged", "app", "web"))
	notSelected := unschedulablePod("web-7f-2", "no tier label")
	controlledBy(&notSelected, replicaSet("web-7f", "app", "web"))
	// A pod naming the Deployment itself as its controller: a Deployment
	// makes ReplicaSets, not pods.
	direct := unschedulablePod("decoy-3", "forged: owned by the Deployment")
	direct.Labels = labels
	controlledBy(&direct, dep)

	r := newRun("apply", Options{}, nil, &infos{})
	r.clients = &kube.Clients{Kube: kubefake.NewClientset(own, other, &real, &noOwner, &forgedOwner, &notSelected, &direct)}
	got := r.podReasons(context.Background(), dep, false)
	if len(got) != 1 || got[0] != "1 pod waiting in container web (CrashLoopBackOff): last ended Error, exit code 1" {
		t.Errorf("causes %q, want the own pod's crash loop alone", got)
	}
	// Without the ReplicaSet it controls, the Deployment has no pods.
	r.clients = &kube.Clients{Kube: kubefake.NewClientset(other, &real, &noOwner, &forgedOwner, &direct)}
	if got := r.podReasons(context.Background(), dep, false); len(got) != 0 {
		t.Errorf("causes %q of pods the Deployment does not own", got)
	}
	// A StatefulSet's pods are its own.
	sts := replicaSet("db", "app", "web")
	sts.SetKind("StatefulSet")
	mine := unschedulablePod("db-0", taintMessage)
	controlledBy(&mine, sts)
	r.clients = &kube.Clients{Kube: kubefake.NewClientset(&mine, &noOwner)}
	if got := r.podReasons(context.Background(), sts, false); len(got) != 1 || got[0] != "1 pod unschedulable: "+taintMessage {
		t.Errorf("the StatefulSet's causes %q", got)
	}
}

// A secret value in what a pod says is masked before the wait puts it
// on one line and cuts it: a value with a tab in it is masked though
// the line made the tab a space, and a value where the progress line is
// cut is masked whole, not cut to a part the mask no longer finds.
func TestPodCausesAreMaskedBeforeTheyAreCut(t *testing.T) {
	t.Parallel()
	tabbed := "pass\tw0rd-of-the-db"
	long := "k3y-" + strings.Repeat("x", 40) + "-end"
	set := replicaSet("web", "app", "web")
	p := unschedulablePod("web-1", strings.Repeat("m", maxProgressWhyLen-30)+" "+long+" and "+tabbed)
	controlledBy(&p, set)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, meta.RESTScopeNamespace)
	r := newRun("apply", Options{Mask: redact.New(tabbed, long).String}, nil, &infos{})
	r.clients = &kube.Clients{
		Client: fake.NewClientBuilder().WithScheme(kube.Scheme()).WithRESTMapper(mapper).Build(),
		Kube:   kubefake.NewClientset(&p),
	}
	id := object.UnstructuredToObjMetadata(set)
	why, _ := r.shortWhy(context.Background(), id, &event.ResourceStatus{Identifier: id, Resource: set, Status: status.InProgressStatus})
	line := progressLine([]waitingObject{{ref: "ReplicaSet.apps/shop/web", why: why}}, 1, time.Second, 0)
	causes := strings.Join(r.explain(context.Background(), id, &event.ResourceStatus{Identifier: id, Resource: set, Status: status.InProgressStatus}), "\n")
	for what, got := range map[string]string{"progress line": line, "causes": causes} {
		if !strings.Contains(got, "unschedulable") {
			t.Errorf("%s: %q, want the pod's cause", what, got)
		}
		for _, part := range []string{"w0rd", "pass w0rd", "k3y-xxx", "xxxx"} {
			if strings.Contains(got, part) {
				t.Errorf("%s shows %q of a secret: %q", what, part, got)
			}
		}
	}
	if !strings.Contains(causes, "***") {
		t.Errorf("causes %q, want the secrets masked", causes)
	}
}
