package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// unchangedCase is one object applied by gantry, then changed by another
// hand (interfere), then desired again as edit says. The server's dry-run
// of the desired object decides whether it is unchanged; the fast path
// must never say so when the server does not.
type unchangedCase struct {
	name string
	base string // applied with gantry's field manager first
	// interfere, when set, is a merge patch another manager sends next
	// (subresource "status" for a status-only change).
	interfere, subresource string
	// edit turns base into the desired object ("" keeps it).
	edit func(string) string
	// fast: the fast path must decide this case unchanged (a re-apply
	// of what is there), so that it is known to work, not only to refuse.
	fast bool
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic(fmt.Sprintf("edit: %q not in the object", old))
		}
		return strings.Replace(s, old, new, 1)
	}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.unchanged.gantry.test}
spec:
  group: unchanged.gantry.test
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 3}
              mode: {type: string, default: fast}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    weight: {type: integer, default: 1}
          status:
            type: object
            properties:
              phase: {type: string}
`

// The corpus: what real configurations change and what clusters do to
// them.
func unchangedCorpus(ns string) []unchangedCase {
	deploy := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: NS
  labels: {app: web, gantry.dev/inventory-name: shop}
  annotations: {team: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.k8s.io/pause:3.10
        args: ["--a", "--b"]
        ports: [{containerPort: 8080, name: http}]
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
        resources: {limits: {cpu: 500m, memory: 64Mi}}
      - name: side
        image: registry.k8s.io/pause:3.10
`
	svc := `apiVersion: v1
kind: Service
metadata: {name: web, namespace: NS}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
`
	cm := `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS, labels: {tier: web}}
data: {greeting: hello, mode: fast}
`
	secret := `apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: NS}
type: Opaque
data: {password: aHVudGVyMg==}
`
	stringSecret := `apiVersion: v1
kind: Secret
metadata: {name: string-creds, namespace: NS}
stringData: {password: hunter2}
`
	widget := `apiVersion: unchanged.gantry.test/v1
kind: Widget
metadata: {name: w, namespace: NS}
spec:
  size: 5
  tags: [a, b]
  parts: [{name: wheel, weight: 2}, {name: axle}]
`
	udp := `apiVersion: v1
kind: Service
metadata: {name: dns, namespace: NS}
spec:
  selector: {app: dns}
  ports: [{name: dns, port: 53, protocol: UDP}]
`
	cs := []unchangedCase{
		// The same object again: the fast path's whole point.
		{name: "deployment re-applied", base: deploy, fast: true},
		{name: "service re-applied (int-or-string port, defaulted protocol)", base: svc, fast: true},
		{name: "configmap re-applied", base: cm, fast: true},
		{name: "secret re-applied", base: secret, fast: true},
		{name: "custom resource re-applied (defaults, set and map lists)", base: widget, fast: true},
		{name: "udp service re-applied", base: udp, fast: true},
		{name: "crd re-applied", base: widgetCRD, fast: true},
		{name: "status changed by a controller", base: widget, interfere: `{"status":{"phase":"Ready"}}`, subresource: "status", fast: true},
		{name: "a label another manager added", base: cm, interfere: `{"metadata":{"labels":{"other":"x"}}}`, fast: true},
		{name: "creationTimestamp: null, as generators write it", base: strings.Replace(cm, "name: settings,", "name: settings, creationTimestamp: null,", 1), fast: true},

		// Changes the fast path must see, or leave to the dry-run.
		{name: "replicas changed", base: deploy, edit: replace("replicas: 2", "replicas: 3")},
		{name: "quantity written otherwise (0.5 for 500m)", base: deploy, edit: replace("cpu: 500m", "cpu: \"0.5\"")},
		{name: "quantity changed", base: deploy, edit: replace("cpu: 500m", "cpu: 600m")},
		{name: "memory written otherwise (64Mi as bytes)", base: deploy, edit: replace("memory: 64Mi", "memory: \"67108864\"")},
		{name: "targetPort as a number", base: svc, edit: replace("targetPort: http", "targetPort: 8080")},
		{name: "port protocol written out (the default)", base: svc, edit: replace("port: 80,", "port: 80, protocol: TCP,")},
		{name: "udp protocol left out (key changes to TCP)", base: udp, edit: replace(", protocol: UDP", "")},
		{name: "env reordered", base: deploy, edit: replace(`env: [{name: A, value: "1"}, {name: B, value: "2"}]`, `env: [{name: B, value: "2"}, {name: A, value: "1"}]`)},
		{name: "env entry removed", base: deploy, edit: replace(`, {name: B, value: "2"}`, "")},
		{name: "env value changed", base: deploy, edit: replace(`value: "2"`, `value: "3"`)},
		{name: "containers reordered", base: deploy, edit: func(s string) string {
			s = replace("      - name: side\n        image: registry.k8s.io/pause:3.10\n", "")(s)
			return replace("      containers:\n", "      containers:\n      - name: side\n        image: registry.k8s.io/pause:3.10\n")(s)
		}},
		{name: "container removed", base: deploy, edit: replace("      - name: side\n        image: registry.k8s.io/pause:3.10\n", "")},
		{name: "atomic args changed", base: deploy, edit: replace(`args: ["--a", "--b"]`, `args: ["--b", "--a"]`)},
		{name: "selector (atomic) label added", base: svc, edit: replace("selector: {app: web}", "selector: {app: web, tier: x}")},
		{name: "label removed", base: cm, edit: replace("labels: {tier: web}", "labels: {}")},
		{name: "label added", base: cm, edit: replace("labels: {tier: web}", "labels: {tier: web, new: x}")},
		{name: "annotation changed", base: deploy, edit: replace("annotations: {team: shop}", "annotations: {team: ops}")},
		{name: "annotation removed", base: deploy, edit: replace("  annotations: {team: shop}\n", "")},
		{name: "data key removed", base: cm, edit: replace(", mode: fast", "")},
		{name: "data value taken by another manager", base: cm, interfere: `{"data":{"greeting":"hi"}}`},
		{name: "replicas taken by another manager", base: deploy, interfere: `{"spec":{"replicas":5}}`},
		{name: "a field set to null", base: cm, edit: replace("data: {greeting: hello, mode: fast}", "data: {greeting: hello, mode: null}")},
		{name: "secret data changed", base: secret, edit: replace("aHVudGVyMg==", "aHVudGVyMw==")},
		{name: "secret stringData (stored as data)", base: stringSecret},
		{name: "custom resource default written out", base: widget, edit: replace("size: 5", "size: 5\n  mode: fast")},
		{name: "custom resource defaulted field left out", base: widget, edit: replace("{name: wheel, weight: 2}", "{name: wheel}")},
		{name: "custom resource unknown field (pruned)", base: widget, edit: replace("size: 5", "size: 5\n  colour: red")},
		{name: "custom resource set reordered", base: widget, edit: replace("tags: [a, b]", "tags: [b, a]")},
		{name: "custom resource map list item added", base: widget, edit: replace("{name: axle}", "{name: axle}, {name: hub}")},
		{name: "status given in the configuration", base: widget, edit: func(s string) string { return s + "status: {phase: Done}\n" }},
	}
	for i := range cs {
		cs[i].base = strings.ReplaceAll(cs[i].base, "NS", ns)
	}
	return cs
}

// A differential test of the fast path against the API server: for every
// case, when unchangedOnServer says unchanged, the server's dry-run of the
// same apply must change nothing.
func TestUnchangedAgreesWithTheServer(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	crd := decode(t, widgetCRD)
	if _, err := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
		Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, crd.GetName())

	agreed, conservative := 0, 0
	for _, c := range unchangedCorpus(ns) {
		base := decode(t, c.base)
		res := resourceOf(t, base)
		dyn := env.Dynamic.Resource(res).Namespace(base.GetNamespace())
		if base.GetNamespace() == "" {
			dyn = env.Dynamic.Resource(res)
		}
		// Each case starts from the base as gantry applied it, alone.
		_ = dyn.Delete(ctx, base.GetName(), metav1.DeleteOptions{})
		waitGoneByName(t, dyn, base.GetName(), base.GetKind() == "CustomResourceDefinition")
		if _, err := dyn.Apply(ctx, base.GetName(), base, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			t.Fatalf("%s: applying the base: %v", c.name, err)
		}
		if base.GetKind() == "CustomResourceDefinition" {
			waitEstablished(t, base.GetName())
		}
		if c.interfere != "" {
			var sub []string
			if c.subresource != "" {
				sub = append(sub, c.subresource)
			}
			if _, err := dyn.Patch(ctx, base.GetName(), types.MergePatchType, []byte(c.interfere), metav1.PatchOptions{FieldManager: "other"}, sub...); err != nil {
				t.Fatalf("%s: interfering: %v", c.name, err)
			}
		}
		desiredText := c.base
		if c.edit != nil {
			desiredText = c.edit(c.base)
		}
		desired := decode(t, desiredText)
		// The live object must hold still around the dry-run (controllers
		// write status and annotations of their own): the truth is taken
		// only when it did.
		var liveObj, dry *unstructured.Unstructured
		var dryErr error
		for try := 0; ; try++ {
			before, err := dyn.Get(ctx, base.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dry, dryErr = dyn.Apply(ctx, desired.GetName(), appliedObject(desired), metav1.ApplyOptions{FieldManager: FieldManager, Force: true, DryRun: []string{metav1.DryRunAll}})
			after, err := dyn.Get(ctx, base.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if before.GetResourceVersion() == after.GetResourceVersion() {
				liveObj = before
				break
			}
			if try == 50 {
				t.Fatalf("%s: the live object never held still", c.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
		fast := unchangedOnServer(appliedObject(desired), liveObj)
		err := dryErr
		serverUnchanged := err == nil && sameButManagedFields(liveObj, dry)
		switch {
		case fast && !serverUnchanged:
			t.Errorf("%s: the fast path says unchanged; the server's dry-run (err %v) says otherwise", c.name, err)
		case fast:
			agreed++
			t.Logf("%s: unchanged, decided without a dry-run", c.name)
		case serverUnchanged:
			conservative++
			t.Logf("%s: unchanged on the server, left to the dry-run", c.name)
		}
		if c.fast && !fast {
			t.Errorf("%s: a re-apply of what is there was not decided unchanged", c.name)
		}
	}
	t.Logf("%d cases decided unchanged without a dry-run, the server agreeing; %d unchanged left to the dry-run", agreed, conservative)
}

// sameButManagedFields: the dry-run changed no value of the live object.
func sameButManagedFields(live, dry *unstructured.Unstructured) bool {
	a, b := live.DeepCopy(), dry.DeepCopy()
	a.SetManagedFields(nil)
	b.SetManagedFields(nil)
	return apiequality.Semantic.DeepEqual(a.Object, b.Object)
}

func decode(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// resourceOf is the resource of the corpus's kinds.
func resourceOf(t *testing.T, u *unstructured.Unstructured) schema.GroupVersionResource {
	t.Helper()
	gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
	plural := map[string]string{"Deployment": "deployments", "Service": "services", "ConfigMap": "configmaps", "Secret": "secrets",
		"Widget": "widgets", "CustomResourceDefinition": "customresourcedefinitions"}[u.GetKind()]
	if plural == "" {
		t.Fatalf("no resource for %s", u.GetKind())
	}
	return gv.WithResource(plural)
}

func waitEstablished(t *testing.T, name string) {
	t.Helper()
	res := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for range 100 {
		u, err := env.Dynamic.Resource(res).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("CRD %s not established", name)
}

type getter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error)
}

func waitGoneByName(t *testing.T, g getter, name string, slow bool) {
	t.Helper()
	tries := 50
	if slow {
		tries = 300
	}
	for range tries {
		if _, err := g.Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not gone", name)
}
