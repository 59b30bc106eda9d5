// Package native runs the API server's handwritten validation of the
// built-in kinds people ship most, offline: the object is defaulted and
// converted to the internal type as the API server does on a create, then
// checked by the kind's validation from k8s.io/kubernetes with the options
// its registry strategy uses. What the schema cannot say (replicas must not
// be negative, a selector must match its template, names and label values,
// ports, container names, probes and update strategies) is caught here.
//
// The code is that of the Kubernetes release gantry is built with; older
// releases are checked with the same rules.
package native

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsv1 "k8s.io/kubernetes/pkg/apis/apps/v1"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	autoscalingv1 "k8s.io/kubernetes/pkg/apis/autoscaling/v1"
	autoscalingv2 "k8s.io/kubernetes/pkg/apis/autoscaling/v2"
	autoscalingvalidation "k8s.io/kubernetes/pkg/apis/autoscaling/validation"
	"k8s.io/kubernetes/pkg/apis/batch"
	batchv1 "k8s.io/kubernetes/pkg/apis/batch/v1"
	batchvalidation "k8s.io/kubernetes/pkg/apis/batch/validation"
	"k8s.io/kubernetes/pkg/apis/core"
	corev1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/networking"
	networkingv1 "k8s.io/kubernetes/pkg/apis/networking/v1"
	networkingvalidation "k8s.io/kubernetes/pkg/apis/networking/validation"
	"k8s.io/kubernetes/pkg/apis/policy"
	policyv1 "k8s.io/kubernetes/pkg/apis/policy/v1"
	policyvalidation "k8s.io/kubernetes/pkg/apis/policy/validation"
	"k8s.io/kubernetes/pkg/apis/rbac"
	rbacv1 "k8s.io/kubernetes/pkg/apis/rbac/v1"
	rbacvalidation "k8s.io/kubernetes/pkg/apis/rbac/validation"
)

// validators are the kinds gantry checks, each as its registry strategy
// validates a create.
var validators = map[schema.GroupKind]func(obj runtime.Object) field.ErrorList{
	{Kind: "ConfigMap"}: func(o runtime.Object) field.ErrorList { return corevalidation.ValidateConfigMap(o.(*core.ConfigMap)) },
	{Kind: "Secret"}:    func(o runtime.Object) field.ErrorList { return corevalidation.ValidateSecret(o.(*core.Secret)) },
	{Kind: "ServiceAccount"}: func(o runtime.Object) field.ErrorList {
		return corevalidation.ValidateServiceAccount(o.(*core.ServiceAccount))
	},
	{Kind: "Namespace"}: func(o runtime.Object) field.ErrorList { return corevalidation.ValidateNamespace(o.(*core.Namespace)) },
	{Kind: "Service"}: func(o runtime.Object) field.ErrorList {
		svc := o.(*core.Service)
		// As the Service storage does before it validates a create: a
		// client that sets only clusterIP (None for a headless Service)
		// means clusterIPs too.
		if svc.Spec.ClusterIP != "" && len(svc.Spec.ClusterIPs) == 0 {
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		}
		return corevalidation.ValidateServiceCreate(svc)
	},
	{Kind: "PersistentVolumeClaim"}: func(o runtime.Object) field.ErrorList {
		pvc := o.(*core.PersistentVolumeClaim)
		return corevalidation.ValidatePersistentVolumeClaim(pvc, corevalidation.ValidationOptionsForPersistentVolumeClaim(pvc, nil))
	},
	{Kind: "Pod"}: func(o runtime.Object) field.ErrorList {
		p := o.(*core.Pod)
		opts := pod.GetValidationOptionsFromPodSpecAndMeta(&p.Spec, nil, &p.ObjectMeta, nil)
		opts.ResourceIsPod = true
		return corevalidation.ValidatePodCreate(p, opts)
	},
	{Group: "apps", Kind: "Deployment"}: func(o runtime.Object) field.ErrorList {
		d := o.(*apps.Deployment)
		return appsvalidation.ValidateDeployment(d, pod.GetValidationOptionsFromPodTemplate(&d.Spec.Template, nil))
	},
	{Group: "apps", Kind: "StatefulSet"}: func(o runtime.Object) field.ErrorList {
		s := o.(*apps.StatefulSet)
		return appsvalidation.ValidateStatefulSet(s, appsvalidation.StatefulSetValidationOptions{},
			pod.GetValidationOptionsFromPodTemplate(&s.Spec.Template, nil))
	},
	{Group: "apps", Kind: "DaemonSet"}: func(o runtime.Object) field.ErrorList {
		d := o.(*apps.DaemonSet)
		return appsvalidation.ValidateDaemonSet(d, pod.GetValidationOptionsFromPodTemplate(&d.Spec.Template, nil))
	},
	{Group: "apps", Kind: "ReplicaSet"}: func(o runtime.Object) field.ErrorList {
		r := o.(*apps.ReplicaSet)
		return appsvalidation.ValidateReplicaSet(r, pod.GetValidationOptionsFromPodTemplate(&r.Spec.Template, nil))
	},
	{Group: "batch", Kind: "Job"}: func(o runtime.Object) field.ErrorList {
		j := o.(*batch.Job)
		if j.Spec.ManualSelector == nil || !*j.Spec.ManualSelector {
			generateSelector(j)
		}
		return batchvalidation.ValidateJobCreate(j, batchvalidation.JobValidationOptions{
			PodValidationOptions:  pod.GetValidationOptionsFromPodTemplate(&j.Spec.Template, nil),
			RequirePrefixedLabels: true,
		})
	},
	{Group: "batch", Kind: "CronJob"}: func(o runtime.Object) field.ErrorList {
		c := o.(*batch.CronJob)
		return batchvalidation.ValidateCronJobCreate(c, pod.GetValidationOptionsFromPodTemplate(&c.Spec.JobTemplate.Spec.Template, nil))
	},
	{Group: "networking.k8s.io", Kind: "Ingress"}: func(o runtime.Object) field.ErrorList {
		return networkingvalidation.ValidateIngressCreate(o.(*networking.Ingress))
	},
	{Group: "networking.k8s.io", Kind: "IngressClass"}: func(o runtime.Object) field.ErrorList {
		return networkingvalidation.ValidateIngressClass(o.(*networking.IngressClass))
	},
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}: func(o runtime.Object) field.ErrorList {
		np := o.(*networking.NetworkPolicy)
		return networkingvalidation.ValidateNetworkPolicy(np, networkingvalidation.ValidationOptionsForNetworking(np, nil))
	},
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}: func(o runtime.Object) field.ErrorList {
		return rbacvalidation.ValidateRole(o.(*rbac.Role))
	},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}: func(o runtime.Object) field.ErrorList {
		return rbacvalidation.ValidateClusterRole(o.(*rbac.ClusterRole), rbacvalidation.ClusterRoleValidationOptions{})
	},
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}: func(o runtime.Object) field.ErrorList {
		return rbacvalidation.ValidateRoleBinding(o.(*rbac.RoleBinding))
	},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: func(o runtime.Object) field.ErrorList {
		return rbacvalidation.ValidateClusterRoleBinding(o.(*rbac.ClusterRoleBinding))
	},
	{Group: "policy", Kind: "PodDisruptionBudget"}: func(o runtime.Object) field.ErrorList {
		return policyvalidation.ValidatePodDisruptionBudget(o.(*policy.PodDisruptionBudget), policyvalidation.PodDisruptionBudgetValidationOptions{})
	},
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: func(o runtime.Object) field.ErrorList {
		hpa := o.(*autoscaling.HorizontalPodAutoscaler)
		opts := autoscalingvalidation.HorizontalPodAutoscalerSpecValidationOptions{
			MinReplicasLowerBound: 1,
			ScaleTargetRefValidationOptions: autoscalingvalidation.CrossVersionObjectReferenceValidationOptions{
				AllowEmptyAPIGroup: hpa.Spec.ScaleTargetRef.Kind == "ReplicationController", RequiredCoveredByDeclarative: true},
			ObjectMetricsValidationOptions: autoscalingvalidation.CrossVersionObjectReferenceValidationOptions{AllowEmptyAPIGroup: true},
		}
		return autoscalingvalidation.ValidateHorizontalPodAutoscaler(hpa, opts)
	},
}

// Kinds lists the kinds whose handwritten validation gantry runs.
func Kinds() []schema.GroupKind {
	var gks []schema.GroupKind
	for gk := range validators {
		gks = append(gks, gk)
	}
	return gks
}

var (
	schemeOnce sync.Once
	scheme     *runtime.Scheme
	schemeErr  error
)

// newScheme registers the internal and versioned types of the groups
// above, their defaults and conversions: on first use, not at start-up.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		metav1.AddMetaToScheme,
		core.AddToScheme, corev1.AddToScheme,
		apps.AddToScheme, appsv1.AddToScheme,
		batch.AddToScheme, batchv1.AddToScheme,
		networking.AddToScheme, networkingv1.AddToScheme,
		rbac.AddToScheme, rbacv1.AddToScheme,
		policy.AddToScheme, policyv1.AddToScheme,
		autoscaling.AddToScheme, autoscalingv1.AddToScheme, autoscalingv2.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s, nil
}

// Covers reports whether gantry runs the handwritten validation of gvk.
func Covers(gvk schema.GroupVersionKind) bool {
	_, ok := validators[gvk.GroupKind()]
	return ok
}

// Validate runs the handwritten validation of u's kind on a create, as
// the API server runs it after defaulting and conversion. ok is false for
// a kind or version gantry does not check. u must already have passed the
// schema (a value of the wrong type is reported as one error) and have the
// namespace it is applied to, when its kind has one.
func Validate(u *unstructured.Unstructured) (errs field.ErrorList, ok bool) {
	gvk := u.GroupVersionKind()
	validate, ok := validators[gvk.GroupKind()]
	if !ok {
		return nil, false
	}
	schemeOnce.Do(func() { scheme, schemeErr = newScheme() })
	if schemeErr != nil {
		return field.ErrorList{field.InternalError(nil, schemeErr)}, true
	}
	if !scheme.Recognizes(gvk) {
		return nil, false
	}
	versioned, err := scheme.New(gvk)
	if err != nil {
		return nil, false
	}
	var unreadable field.ErrorList
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, versioned); err != nil {
		// The API server stops at the first value it cannot read, with no
		// field named. Offline, each such value is named by its path and
		// set aside, so that the rest of the object is still checked.
		obj := runtime.DeepCopyJSON(u.Object)
		unreadable = unreadableFields(obj, reflect.TypeOf(versioned).Elem(), nil, gvk.Kind == "Secret" && gvk.Group == "")
		if len(unreadable) == 0 {
			if gvk.Kind == "Secret" && gvk.Group == "" {
				// What the decoder says quotes the data it could not
				// read (where its base64 breaks, a byte of it): a
				// Secret's data is never quoted.
				return field.ErrorList{field.Invalid(nil, nil, "cannot be read as Secret: a value of its data or stringData is not what its field takes (base64 in data, text in stringData); what it holds is not shown")}, true
			}
			return redacted(gvk, field.ErrorList{field.Invalid(nil, nil, fmt.Sprintf("cannot be read as %s: %v", gvk.Kind, err))}), true
		}
		versioned, _ = scheme.New(gvk)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, versioned); err != nil {
			return redacted(gvk, unreadable), true
		}
	}
	scheme.Default(versioned)
	internal, err := scheme.New(gvk.GroupKind().WithVersion(runtime.APIVersionInternal))
	if err != nil {
		return nil, false
	}
	if err := scheme.Convert(versioned, internal, nil); err != nil {
		return field.ErrorList{field.Invalid(nil, nil, fmt.Sprintf("cannot be converted as the API server converts %s: %v", gvk.Kind, err))}, true
	}
	// The system fields the API server fills before it validates a create.
	if m, err := meta.Accessor(internal); err == nil {
		m.SetUID(offlineUID)
		m.SetCreationTimestamp(metav1.Now())
	}
	return redacted(gvk, append(unreadable, validate(internal)...)), true
}

// redacted is errs with no value quoted when they are a Secret's: the API
// server redacts what it quotes of a Secret; offline, nothing of a
// Secret's values is quoted at all.
func redacted(gvk schema.GroupVersionKind, errs field.ErrorList) field.ErrorList {
	if gvk.Kind == "Secret" && gvk.Group == "" {
		for _, fe := range errs {
			fe.BadValue = field.OmitValueType{}
		}
	}
	return errs
}

// unreadableFields walks obj beside the Go type t it is read into and
// names each value that type cannot read (a quantity, an int-or-string, a
// time), removing it from obj. Values of plain types were checked by the
// schema already. A Secret's errors say only which type was expected: a
// parser's error quotes its input.
func unreadableFields(obj any, t reflect.Type, path *field.Path, secret bool) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var errs field.ErrorList
	switch t.Kind() {
	case reflect.Struct:
		m, ok := obj.(map[string]any)
		if !ok {
			return nil
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
				errs = append(errs, unreadableFields(m, f.Type, path, secret)...)
				continue
			}
			v, ok := m[name]
			if !ok || v == nil {
				continue
			}
			p := path.Child(name)
			if err := readAs(v, f.Type, secret); err != nil {
				errs = append(errs, field.Invalid(p, v, err.Error()))
				delete(m, name)
				continue
			}
			errs = append(errs, unreadableFields(v, f.Type, p, secret)...)
		}
	case reflect.Slice:
		list, ok := obj.([]any)
		if !ok {
			return nil
		}
		for i, v := range list {
			errs = append(errs, unreadableFields(v, t.Elem(), path.Index(i), secret)...)
		}
	case reflect.Map:
		m, ok := obj.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			return nil
		}
		for k, v := range m {
			p := path.Key(k)
			if err := readAs(v, t.Elem(), secret); err != nil {
				errs = append(errs, field.Invalid(p, v, err.Error()))
				delete(m, k)
				continue
			}
			errs = append(errs, unreadableFields(v, t.Elem(), p, secret)...)
		}
	}
	return errs
}

// readAs reads v as a value of t when t reads itself from JSON; nil for
// other types, whose values are walked into instead.
func readAs(v any, t reflect.Type, secret bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	target := reflect.New(t).Interface()
	u, ok := target.(json.Unmarshaler)
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err == nil {
		err = u.UnmarshalJSON(b)
	}
	if err != nil && secret {
		return fmt.Errorf("cannot be read as %s", t.Name())
	}
	return err
}

// offlineUID stands in for the UID the API server gives an object it
// creates.
const offlineUID types.UID = "00000000-0000-4000-8000-000000000000"

// generateSelector labels a Job's template and selects it, as the API
// server does on a create without manualSelector. Offline the Job has no
// stand-in UID.
func generateSelector(j *batch.Job) {
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	for _, l := range []string{batch.LegacyJobNameLabel, batch.JobNameLabel} {
		if _, found := j.Spec.Template.Labels[l]; !found {
			j.Spec.Template.Labels[l] = j.Name
		}
	}
	for _, l := range []string{batch.LegacyControllerUidLabel, batch.ControllerUidLabel} {
		if _, found := j.Spec.Template.Labels[l]; !found {
			j.Spec.Template.Labels[l] = string(j.UID)
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, found := j.Spec.Selector.MatchLabels[batch.ControllerUidLabel]; !found {
		j.Spec.Selector.MatchLabels[batch.ControllerUidLabel] = string(j.UID)
	}
}
