package native

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 8080}]
`

func TestValidObjectsPass(t *testing.T) {
	for _, doc := range []string{
		deployment,
		"apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate, namespace: shop}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: m, image: busybox}]\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {app: web}\n  ports: [{port: 80, targetPort: 8080}]\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\ndata: {a.txt: x}\n",
	} {
		u := object(t, doc)
		errs, ok := Validate(u)
		if !ok {
			t.Errorf("%s: not covered", u.GetKind())
		}
		if len(errs) > 0 {
			t.Errorf("%s: %v", u.GetKind(), errs)
		}
	}
}

func TestHandwrittenRulesAreCaught(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"negative replicas", "replicas: 2", "replicas: -1", "spec.replicas"},
		{"selector not matching", "labels: {app: web}", "labels: {app: api}", "spec.template.metadata.labels"},
		{"port out of range", "containerPort: 8080", "containerPort: 70000", "containerPort"},
		{"upper-case container name", "- name: web", "- name: Web", "containers[0].name"},
		{"label value too long", "{app: web}}\n  template", "{app: web, x: " + strings.Repeat("a", 64) + "}}\n  template", "spec.selector"},
	}
	for _, c := range cases {
		doc := strings.Replace(deployment, c.from, c.to, 1)
		if doc == deployment {
			t.Fatalf("%s: the case changes nothing", c.name)
		}
		errs, ok := Validate(object(t, doc))
		if !ok || len(errs) == 0 {
			t.Errorf("%s: not caught", c.name)
			continue
		}
		if !strings.Contains(errs.ToAggregate().Error(), c.want) {
			t.Errorf("%s: %v, want a problem at %s", c.name, errs, c.want)
		}
	}
}

func TestUncoveredKindIsLeftAlone(t *testing.T) {
	if _, ok := Validate(object(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")); ok {
		t.Error("a custom resource was validated as a built-in kind")
	}
}

// A value its Go type cannot read (a quantity, an int-or-string) stops the
// API server with no field named. Offline each is named by its path, and
// the rest of the object is still checked.
func TestUnreadableValuesNamedAndTheRestChecked(t *testing.T) {
	doc := strings.Replace(deployment, "replicas: 2", "replicas: -1", 1)
	doc = strings.Replace(doc, "ports: [{containerPort: 8080}]", "ports: [{containerPort: 8080}]\n        resources: {limits: {cpu: abc, memory: 1Gi}, requests: {memory: lots}}\n        livenessProbe: {httpGet: {port: {a: 1}}}", 1)
	errs, ok := Validate(object(t, doc))
	if !ok {
		t.Fatal("not covered")
	}
	got := map[string]string{}
	for _, e := range errs {
		got[e.Field] = e.ErrorBody()
	}
	for field, want := range map[string]string{
		"spec.template.spec.containers[0].resources.limits[cpu]":      `Invalid value: "abc": quantities must match`,
		"spec.template.spec.containers[0].resources.requests[memory]": `Invalid value: "lots"`,
		"spec.replicas": "must be greater than or equal to 0",
	} {
		if !strings.Contains(got[field], want) {
			t.Errorf("%s: %q, want %q; all: %v", field, got[field], want, errs)
		}
	}
	if _, ok := got["spec.template.spec.containers[0].resources.limits[memory]"]; ok {
		t.Errorf("a valid quantity is named: %v", errs)
	}
}

// What is quoted of a Secret is never its values: an unreadable value of
// a Secret is named by its field, never quoted.
func TestUnreadableSecretValueNotQuoted(t *testing.T) {
	u := object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: shop, creationTimestamp: hunter2hunter2}\ntype: Opaque\nstringData: {token: x}\n")
	errs, _ := Validate(u)
	if len(errs) == 0 || errs[0].Field != "metadata.creationTimestamp" {
		t.Fatalf("want metadata.creationTimestamp named: %v", errs)
	}
	for _, e := range errs {
		if strings.Contains(e.Error(), "hunter2") {
			t.Errorf("quoted: %v", e)
		}
	}
}

// A Secret's data that is not base64 failed with the decoder's words, and
// no field: "illegal base64 data at input byte 20", a number the data
// chose (a template could spell a secret with it, one Secret a
// character). What is wrong is said; where in the data, not.
func TestSecretDataDecoderErrorNotQuoted(t *testing.T) {
	for _, data := range []string{"AAAAAAAAAAAAAAAAAAAA!", "!!not-base64!!", "A"} {
		u := object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: shop}\ntype: Opaque\ndata: {k: \""+data+"\"}\n")
		errs, ok := Validate(u)
		if !ok || len(errs) == 0 {
			t.Fatalf("%q: want it refused, got %v", data, errs)
		}
		for _, e := range errs {
			if strings.Contains(e.Error(), "input byte") || strings.Contains(e.Error(), data) {
				t.Errorf("%q: the message says where the data breaks: %v", data, e)
			}
		}
	}
}
