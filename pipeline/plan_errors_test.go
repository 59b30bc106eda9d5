package pipeline

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gantry-dev/gantry/kube"
)

// Objects cut off by an API server that stopped answering are said once,
// with the server and the error; refusals stay one line per object.
func TestLostServerIsSaidOnce(t *testing.T) {
	var errs []error
	for i := range 40 {
		err := error(&url.Error{Op: "Patch", URL: fmt.Sprintf("https://10.0.0.1:6443/api/v1/namespaces/ns/configmaps/cm-%02d", i), Err: errors.New("connection refused")})
		if i > 0 {
			err = &url.Error{Op: "Patch", URL: "https://10.0.0.1:6443/x", Err: &kube.UnreachableError{Host: "https://10.0.0.1:6443", Err: errors.New("connection refused")}}
		}
		errs = append(errs, &ObjectError{Ref: fmt.Sprintf("ConfigMap/ns/cm-%02d", i), Err: err})
	}
	errs = append(errs, &ObjectError{Ref: "ConfigMap/ns/bad", Err: apierrors.NewBadRequest("data: Invalid value")})
	msg := joinErrors(errs).Error()
	if n := strings.Count(msg, "connection refused"); n != 1 {
		t.Errorf("the error is said %d times, want once:\n%s", n, msg)
	}
	for _, want := range []string{
		"the API server at https://10.0.0.1:6443 is unreachable: connection refused",
		"40 objects left undone (ConfigMap/ns/cm-00, ConfigMap/ns/cm-01, ConfigMap/ns/cm-02 and 37 more)",
		"ConfigMap/ns/bad: data: Invalid value",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "/configmaps/cm-") {
		t.Errorf("a request path is repeated in the summary:\n%s", msg)
	}
	one := joinErrors(errs[:1]).Error()
	if !strings.HasPrefix(one, "ConfigMap/ns/cm-00: ") {
		t.Errorf("a single cut-off object is said as itself: %s", one)
	}
}

// A recreate may go ahead past an "already allocated" refusal only when
// the live object it deletes first holds that value at that field.
func TestHeldByTheLiveObject(t *testing.T) {
	svc := func(clusterIP string, nodePorts ...int64) *unstructured.Unstructured {
		var ports []any
		for i, p := range nodePorts {
			ports = append(ports, map[string]any{"name": fmt.Sprint("p", i), "port": int64(80 + i), "nodePort": p})
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "s", "namespace": "ns"},
			"spec":     map[string]any{"clusterIPs": []any{clusterIP}, "ports": ports}}}
	}
	status := func(causes ...metav1.StatusCause) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
			Details: &metav1.StatusDetails{Kind: "Service", Name: "s", Causes: causes}}}
	}
	port := func(field string, p int) metav1.StatusCause {
		return metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: field, Message: fmt.Sprintf("Invalid value: %d: provided port is already allocated", p)}
	}
	for _, c := range []struct {
		name       string
		err        error
		want, live *unstructured.Unstructured
		held       bool
	}{
		{"its own node port", status(port("spec.ports[0].nodePort", 30080)), svc("10.96.0.2", 30080), svc("10.96.0.1", 30080), true},
		{"its own node port, moved within the list", status(port("spec.ports[1].nodePort", 30080)), svc("10.96.0.2", 30081, 30080), svc("10.96.0.1", 30080), true},
		{"another object's node port", status(port("spec.ports[0].nodePort", 30090)), svc("10.96.0.2", 30090), svc("10.96.0.1", 30080), false},
		{"its own cluster IP", status(metav1.StatusCause{Field: "spec.clusterIPs", Message: `Invalid value: ["10.96.0.1"]: provided IP is already allocated`}), svc("10.96.0.1", 30081), svc("10.96.0.1", 30080), true},
		{"allocated and something else", status(port("spec.ports[0].nodePort", 30080), metav1.StatusCause{Field: "spec.ports[0].port", Message: "Invalid value: 70000: must be between 1 and 65535, inclusive"}), svc("10.96.0.2", 30080), svc("10.96.0.1", 30080), false},
		{"no causes", status(), svc("10.96.0.2", 30080), svc("10.96.0.1", 30080), false},
		{"not Invalid", apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "s", errors.New("already allocated")), svc("10.96.0.2", 30080), svc("10.96.0.1", 30080), false},
	} {
		if got := heldBy(c.err, c.want, c.live); got != c.held {
			t.Errorf("%s: heldBy = %v, want %v", c.name, got, c.held)
		}
	}
}
