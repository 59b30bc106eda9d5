package pipeline

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
