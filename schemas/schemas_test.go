package schemas

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gantry-dev/gantry/schemas/releases"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: scalers.example.test
spec:
  group: example.test
  scope: Namespaced
  names: {kind: Scaler, plural: scalers, singular: scaler}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [maxReplicas]
              x-kubernetes-validations:
                - rule: self.minReplicas <= self.maxReplicas
                  message: minReplicas must not exceed maxReplicas
              properties:
                minReplicas: {type: integer, default: 1}
                maxReplicas: {type: integer, minimum: 0}
                mode: {type: string, enum: [Auto, Manual]}
                ports:
                  type: array
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [name]
                  items:
                    type: object
                    required: [name]
                    properties:
                      name: {type: string}
                      port: {type: integer}
                      target: {x-kubernetes-int-or-string: true}
    - name: v0
      served: false
      storage: false
      schema:
        openAPIV3Schema: {type: object}
`

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	// As gantry's build does: integers stay int64, as the API server
	// decodes them (CEL tells int from double).
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCustomResources(t *testing.T) {
	t.Parallel()
	v, err := New([]*unstructured.Unstructured{object(t, crd)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !v.HasCRD(schema.GroupKind{Group: "example.test", Kind: "Scaler"}) {
		t.Fatal("HasCRD(Scaler) = false")
	}
	head := "apiVersion: example.test/v1\nkind: Scaler\nmetadata: {name: s, namespace: ns}\n"
	cases := []struct {
		name string
		doc  string
		want []string // substrings of the error; none: valid
	}{
		{name: "valid", doc: head + "spec: {maxReplicas: 3, mode: Auto, ports: [{name: http, port: 80, target: http}, {name: grpc, target: 9000}]}"},
		{name: "default satisfies the rule", doc: head + "spec: {maxReplicas: 1}"},
		{name: "CEL rule broken", doc: head + "spec: {minReplicas: 5, maxReplicas: 2}", want: []string{"minReplicas must not exceed maxReplicas", `Scaler "s" is invalid`}},
		{name: "default breaks the rule", doc: head + "spec: {maxReplicas: 0}", want: []string{"minReplicas must not exceed maxReplicas"}},
		{name: "enum", doc: head + "spec: {maxReplicas: 3, mode: Sometimes}", want: []string{"spec.mode", `Unsupported value: "Sometimes"`}},
		{name: "wrong type", doc: head + "spec: {maxReplicas: many}", want: []string{"spec.maxReplicas", "integer"}},
		{name: "minimum", doc: head + "spec: {maxReplicas: -1}", want: []string{"spec.maxReplicas", "greater than or equal to 0"}},
		{name: "required", doc: head + "spec: {mode: Auto}", want: []string{"spec.maxReplicas", "Required"}},
		{name: "unknown field", doc: head + "spec: {maxReplicas: 3, maxReplica: 4}", want: []string{"spec.maxReplica", "field not declared in schema"}},
		{name: "duplicate list-map key", doc: head + "spec: {maxReplicas: 3, ports: [{name: a}, {name: a}]}", want: []string{"spec.ports[1]", "Duplicate"}},
		{name: "several problems at once", doc: head + "spec: {maxReplicas: x, mode: y}", want: []string{"spec.maxReplicas", "spec.mode"}},
		{name: "bad name", doc: "apiVersion: example.test/v1\nkind: Scaler\nmetadata: {name: a/b, namespace: ns}\nspec: {maxReplicas: 1}", want: []string{"metadata.name"}},
		{name: "version not served", doc: "apiVersion: example.test/v0\nkind: Scaler\nmetadata: {name: s}\n", want: []string{"version v0", "not served"}},
		{name: "no such version", doc: "apiVersion: example.test/v9\nkind: Scaler\nmetadata: {name: s}\n", want: []string{"has no version v9"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := object(t, tc.doc)
			before := u.DeepCopy()
			err := v.Validate(context.Background(), u)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v, want valid", err)
				}
			} else {
				if err == nil {
					t.Fatalf("Validate: valid, want an error with %q", tc.want)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
			}
			if !equalJSON(before.Object, u.Object) {
				t.Errorf("Validate changed the object (defaults must go to a copy):\n%v\n%v", before.Object, u.Object)
			}
		})
	}
}

// A built-in kind with no schema source is not validated offline, and says
// so with ErrNoSchema (the caller leaves it to the server's dry-run).
func TestBuiltinWithoutSchemaSource(t *testing.T) {
	t.Parallel()
	v, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = v.Validate(context.Background(), object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: n}\n"))
	if !errors.Is(err, ErrNoSchema) {
		t.Fatalf("Validate: %v, want ErrNoSchema", err)
	}
}

func TestInlineStopsOnRecursion(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"openapi":"3.0.0","info":{"title":"t","version":"v"},"paths":{},"components":{"schemas":{
	  "Node":{"type":"object","x-kubernetes-group-version-kind":[{"group":"example.test","version":"v1","kind":"Node"}],
	    "required":["name"],
	    "properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},
	      "name":{"type":"string","format":"int-or-string"},"child":{"allOf":[{"$ref":"#/components/schemas/Node"}]}}}}}}`)
	v, err := New(nil, staticSource{doc})
	if err != nil {
		t.Fatal(err)
	}
	ok := "apiVersion: example.test/v1\nkind: Node\nmetadata: {name: node}\nname: a\nchild: {name: b, child: {name: c}}\n"
	if err := v.Validate(context.Background(), object(t, ok)); err != nil {
		t.Fatalf("valid recursive object: %v", err)
	}
	bad := "apiVersion: example.test/v1\nkind: Node\nmetadata: {name: node}\nname: a\nchild: {child: {name: c}}\n"
	if err := v.Validate(context.Background(), object(t, bad)); err == nil || !strings.Contains(err.Error(), "child.name") {
		t.Fatalf("missing child.name: %v, want an error naming it", err)
	}
}

type staticSource struct{ doc []byte }

func (s staticSource) OpenAPIV3(schema.GroupVersion) ([]byte, error) { return s.doc, nil }

func equalJSON(a, b map[string]any) bool {
	x, _ := yaml.Marshal(a)
	y, _ := yaml.Marshal(b)
	return string(x) == string(y)
}

// Errors about a Secret never quote its values, and still find them.
func TestSecretValuesNeverQuoted(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"openapi":"3.0.0","info":{"title":"t","version":"v"},"paths":{},"components":{"schemas":{
	  "Secret":{"type":"object","x-kubernetes-group-version-kind":[{"group":"","version":"v1","kind":"Secret"}],
	    "properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},"metadata":{"type":"object"},"type":{"type":"string"},
	      "data":{"type":"object","additionalProperties":{"type":"string","format":"byte"}},
	      "stringData":{"type":"object","additionalProperties":{"type":"string"}}}}}}}`)
	v, err := New(nil, staticSource{doc})
	if err != nil {
		t.Fatal(err)
	}
	bad := object(t, `apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: shop}
data:
  password: hunter2-not-base64!
  fine: aGVsbG8=
stringData:
  pin: 987654321
  token: s3cr3t-t0ken
`)
	err = v.Validate(context.Background(), bad)
	if err == nil {
		t.Fatal("Validate: valid, want errors for data.password and stringData.pin")
	}
	for _, want := range []string{"data.password", "stringData.pin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	for _, secret := range []string{"hunter2", "987654321", "s3cr3t", "aGVsbG8"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q quotes a secret value (%s)", err, secret)
		}
	}
	if bad.Object["data"].(map[string]any)["password"] != "hunter2-not-base64!" {
		t.Error("Validate changed the Secret it was given")
	}
}

// A misspelt or outdated apiVersion is answered with the one that serves
// the kind: the release's, or a CRD's of the set.
func TestMisspeltAPIVersionGetsASuggestion(t *testing.T) {
	t.Parallel()
	r, err := releases.Get("1.36")
	if err != nil {
		t.Fatal(err)
	}
	crd := object(t, widgetCRD("{type: object, x-kubernetes-preserve-unknown-fields: true}"))
	v, err := Offline([]*unstructured.Unstructured{crd}, nil, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]string{
		"apiVersion: app/v1\nkind: Deployment\nmetadata: {name: web, namespace: n}\n":     "did you mean apiVersion: apps/v1?",
		"apiVersion: apps/v2\nkind: Deployment\nmetadata: {name: web, namespace: n}\n":    "did you mean apiVersion: apps/v1?",
		"apiVersion: networking/v1\nkind: Ingress\nmetadata: {name: web, namespace: n}\n": "did you mean apiVersion: networking.k8s.io/v1?",
		"apiVersion: example.org/v1\nkind: Widget\nmetadata: {name: w, namespace: n}\n":   "did you mean apiVersion: example.com/v1?",
		"apiVersion: example.org/v1\nkind: Gadget\nmetadata: {name: g, namespace: n}\n":   "list example.org in allow-unknown-kinds",
	} {
		err := v.Validate(t.Context(), object(t, doc))
		var invalid *InvalidError
		if !errors.As(err, &invalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
			continue
		}
		if invalid.Problems[0].Field != "apiVersion" {
			t.Errorf("%s: field %q, want apiVersion", doc, invalid.Problems[0].Field)
		}
	}
}

// A type that refers to itself from many fields (a CRD's JSONSchemaProps,
// from some twenty) is inlined one level down, not once per path to the
// depth bound: the schema stays small, and a mistake one level down is
// still caught.
func TestSelfReferringTypeInlinesOneLevel(t *testing.T) {
	t.Parallel()
	r, err := releases.Get("1.36")
	if err != nil {
		t.Fatal(err)
	}
	v, err := Offline(nil, nil, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.builtin(schema.GroupVersion{Group: "apiextensions.k8s.io", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := 0
	var count func(s *spec.Schema)
	count = func(s *spec.Schema) {
		if s == nil {
			return
		}
		nodes++
		for _, p := range s.Properties {
			count(&p)
		}
		if s.Items != nil {
			count(s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			count(s.AdditionalProperties.Schema)
		}
		for i := range s.AllOf {
			count(&s.AllOf[i])
		}
	}
	count(inline(b.byKind["CustomResourceDefinition"], b.defs, 0))
	if nodes > 100_000 {
		t.Errorf("the CustomResourceDefinition schema inlines to %d nodes", nodes)
	}
	crd := func(fieldType string) string {
		return widgetCRD("{type: object, properties: {size: {type: " + fieldType + "}}}")
	}
	if err := v.Validate(t.Context(), object(t, crd("integer"))); err != nil {
		t.Errorf("valid CRD: %v", err)
	}
	if err := v.Validate(t.Context(), object(t, crd("[integer]"))); err == nil || !strings.Contains(err.Error(), "properties[size].type") && !strings.Contains(err.Error(), "properties.size.type") {
		t.Errorf("a list for a type one level down: %v, want it named", err)
	}
}

// A null is a field left out, as the API server decodes it: a chart's
// empty "annotations:" on a built-in kind, a null field of a custom
// resource whose schema does not make it nullable.
func TestNullIsAFieldLeftOut(t *testing.T) {
	t.Parallel()
	r, err := releases.Get("1.36")
	if err != nil {
		t.Fatal(err)
	}
	crd := object(t, widgetCRD("{type: object, properties: {spec: {type: object, properties: {size: {type: integer}, tags: {type: array, items: {type: string}}}}}}"))
	v, err := Offline([]*unstructured.Unstructured{crd}, nil, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		"apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: admission\n  annotations:\n  labels:\nwebhooks:\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop, annotations: null}\nspec:\n  selector:\n  ports: [{port: 80}]\n",
		"apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: shop}\nspec:\n  size:\n  tags:\n",
	} {
		if err := v.Validate(t.Context(), object(t, doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	if err := v.Validate(t.Context(), object(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: shop}\nspec: {size: big}\n")); err == nil {
		t.Error("a string for an integer passed")
	}
}

// widgetCRD is a CRD of example.com's Widget, v1, with the schema given.
func widgetCRD(schema string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: ` + schema + `}
`
}
