package schemas

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/schemas/releases"
)

// Offline, an object with several mistakes has them all named in one
// run: those of its fields that do not read as their type (a string for
// a number, a field the kind does not have) and those the kind's
// handwritten rules find in the rest. The API server stops at the first
// kind: a user would need a run per mistake.
func TestEveryMistakeOfAnObjectInOneRun(t *testing.T) {
	t.Parallel()
	r, err := releases.Get("1.36")
	if err != nil {
		t.Fatal(err)
	}
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  %s
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx
        imagePullPolicy: Sometimes
        ports: [{containerPort: %s}]
`
	for _, tc := range []struct {
		name, replicas, port string
		want                 []string
	}{
		{"a string for a number", `replicas: "two"`, "99999", []string{
			"spec.replicas: expected numeric",
			"spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 99999",
			`spec.template.spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`}},
		{"a field the kind does not have", `replcas: 2`, "80", []string{
			"spec.replcas: field not declared in schema",
			`spec.template.spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`}},
		{"a wrong type in a list's element", `replicas: 2`, `"eighty"`, []string{
			"containerPort: expected numeric",
			`spec.template.spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := object(t, fmt.Sprintf(deployment, tc.replicas, tc.port))
			v, err := Offline([]*unstructured.Unstructured{u}, nil, r, nil)
			if err != nil {
				t.Fatal(err)
			}
			var invalid *InvalidError
			if err := v.Validate(context.Background(), u); !errors.As(err, &invalid) {
				t.Fatalf("%v, want the object invalid", err)
			}
			var got []string
			for _, p := range invalid.Unique() {
				got = append(got, p.Field+": "+p.Message)
			}
			all := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("lacks %q in:\n%s", w, all)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", len(got), len(tc.want), all)
			}
		})
	}
}
