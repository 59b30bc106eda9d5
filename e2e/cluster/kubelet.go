package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ConfigCheckAnnotation carries the config check's verdict on a pod:
// found, or missing (the pod waits, as a kubelet holds it, until what it
// uses exists).
const ConfigCheckAnnotation = "gantry.dev/config-check"

// configCheck does for kwok's pods (not those of the real node, whose
// kubelet does it) the one thing a kubelet does before it
// starts a container that kwok does not: it looks up the ConfigMaps and
// Secrets the pod uses (env, envFrom, volumes, projected volumes; not
// those marked optional). A pod that uses one that does not exist is held
// as the kubelet holds it: not ready, its containers waiting with
// CreateContainerConfigError (env) or ContainerCreating (a volume), the
// message naming what is missing, until it exists. kwok's pod-ready stage
// waits for the verdict found.
type configCheck struct {
	client kubernetes.Interface
	pods   cache.Indexer
}

// runConfigCheck checks every bound pod until ctx ends.
func runConfigCheck(ctx context.Context, client kubernetes.Interface) {
	// Only pods are watched: the ConfigMaps and Secrets a pod names are
	// read when it is checked (the tests make tens of thousands of
	// ConfigMaps, and pods name a few).
	f := informers.NewSharedInformerFactory(client, 0)
	podInf := f.Core().V1().Pods().Informer()
	c := &configCheck{client: client, pods: podInf.GetIndexer()}
	queue := make(chan string, 4096)
	enqueue := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" && p.Spec.NodeName != RealNodeName && p.Annotations[ConfigCheckAnnotation] != "found" {
			select {
			case queue <- p.Namespace + "/" + p.Name:
			default: // the periodic pass picks it up
			}
		}
	}
	_, _ = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	// A pod held back is looked at again every second, as the kubelet
	// retries: the ConfigMap may have been created meanwhile.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case key := <-queue:
			c.check(ctx, key)
		case <-tick.C:
			for _, obj := range c.pods.List() {
				if p := obj.(*corev1.Pod); p.Spec.NodeName != "" && p.Spec.NodeName != RealNodeName && p.Annotations[ConfigCheckAnnotation] == "missing" {
					c.check(ctx, p.Namespace+"/"+p.Name)
				}
			}
		}
	}
}

func (c *configCheck) check(ctx context.Context, key string) {
	obj, ok, _ := c.pods.GetByKey(key)
	if !ok {
		return
	}
	p := obj.(*corev1.Pod)
	if p.Annotations[ConfigCheckAnnotation] == "found" || p.DeletionTimestamp != nil {
		return
	}
	reason, message := c.missing(ctx, p)
	verdict := "found"
	if reason != "" {
		verdict = "missing"
		if err := c.hold(ctx, p, reason, message); err != nil {
			return
		}
	}
	if p.Annotations[ConfigCheckAnnotation] == verdict {
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ConfigCheckAnnotation: verdict}}})
	_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return
	}
}

// missing names the first ConfigMap or Secret the pod uses that does not
// exist, with the reason a kubelet gives.
func (c *configCheck) missing(ctx context.Context, p *corev1.Pod) (reason, message string) {
	// exists reads a ConfigMap or Secret; one that cannot be read for
	// another reason than its absence counts as there.
	exists := func(kind, name string) bool {
		var err error
		if kind == "configmap" {
			_, err = c.client.CoreV1().ConfigMaps(p.Namespace).Get(ctx, name, metav1.GetOptions{})
		} else {
			_, err = c.client.CoreV1().Secrets(p.Namespace).Get(ctx, name, metav1.GetOptions{})
		}
		return !apierrors.IsNotFound(err)
	}
	optional := func(o *bool) bool { return o != nil && *o }
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil && !optional(v.ConfigMap.Optional) && !exists("configmap", v.ConfigMap.Name):
			return "ContainerCreating", fmt.Sprintf("MountVolume.SetUp failed for volume %q : configmap %q not found", v.Name, v.ConfigMap.Name)
		case v.Secret != nil && !optional(v.Secret.Optional) && !exists("secret", v.Secret.SecretName):
			return "ContainerCreating", fmt.Sprintf("MountVolume.SetUp failed for volume %q : secret %q not found", v.Name, v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil && !optional(s.ConfigMap.Optional) && !exists("configmap", s.ConfigMap.Name) {
					return "ContainerCreating", fmt.Sprintf("MountVolume.SetUp failed for volume %q : configmap %q not found", v.Name, s.ConfigMap.Name)
				}
				if s.Secret != nil && !optional(s.Secret.Optional) && !exists("secret", s.Secret.Name) {
					return "ContainerCreating", fmt.Sprintf("MountVolume.SetUp failed for volume %q : secret %q not found", v.Name, s.Secret.Name)
				}
			}
		}
	}
	containers := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	for _, ctr := range containers {
		for _, e := range ctr.EnvFrom {
			if r := e.ConfigMapRef; r != nil && !optional(r.Optional) && !exists("configmap", r.Name) {
				return "CreateContainerConfigError", fmt.Sprintf("configmap %q not found", r.Name)
			}
			if r := e.SecretRef; r != nil && !optional(r.Optional) && !exists("secret", r.Name) {
				return "CreateContainerConfigError", fmt.Sprintf("secret %q not found", r.Name)
			}
		}
		for _, e := range ctr.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil && !optional(r.Optional) && !exists("configmap", r.Name) {
				return "CreateContainerConfigError", fmt.Sprintf("configmap %q not found", r.Name)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil && !optional(r.Optional) && !exists("secret", r.Name) {
				return "CreateContainerConfigError", fmt.Sprintf("secret %q not found", r.Name)
			}
		}
	}
	return "", ""
}

// hold writes the status a kubelet gives a pod whose containers it cannot
// start.
func (c *configCheck) hold(ctx context.Context, p *corev1.Pod, reason, message string) error {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == reason && cs.State.Waiting.Message == message {
			return nil // said already
		}
	}
	now := metav1.Now()
	status := p.Status.DeepCopy()
	status.Phase = corev1.PodPending
	status.ContainerStatuses = nil
	for _, ctr := range p.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: ctr.Name, Image: ctr.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
		})
	}
	setCondition(status, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now,
		Message: "containers with unready status: [" + p.Spec.Containers[0].Name + "]"})
	setCondition(status, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now,
		Message: "containers with unready status: [" + p.Spec.Containers[0].Name + "]"})
	held := p.DeepCopy()
	held.Status = *status
	_, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, held, metav1.UpdateOptions{})
	return err
}

func setCondition(s *corev1.PodStatus, c corev1.PodCondition) {
	for i := range s.Conditions {
		if s.Conditions[i].Type == c.Type {
			s.Conditions[i] = c
			return
		}
	}
	s.Conditions = append(s.Conditions, c)
}
