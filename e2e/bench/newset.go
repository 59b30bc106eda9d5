package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// newSetScenarios: the first apply of sets that bring what their objects
// need, the shape most applications and operators ship. One Namespace plus
// N ConfigMaps in it; one CRD plus N/2 custom resources of it. The floor
// applies the Namespace (or the CRD, and waits until it is established),
// then the objects with its workers. kubectl and kapp, when available,
// apply the same folder.
func (b *bench) newSetScenarios(ctx context.Context) []row {
	type set struct {
		name  string
		write func(dir, ns, group string) error
		floor func(ns, group string) error
		// kubectl applies dir as its users must: a CRD before its
		// custom resources, which it cannot map until it is established.
		kubectl func(dir, group string) error
		// kappWait: kapp waits (it orders the CRD before its custom
		// resources, but without waiting it does not wait for the CRD to
		// be established, and fails when the API server is slower).
		kappWait bool
	}
	kubectlApply := func(dir, _ string) error { return b.exec(b.kubectl, "apply", "--server-side", "-f", dir) }
	crs := b.objects / 2
	sets := []set{
		{
			name: fmt.Sprintf("first apply of a Namespace plus %d ConfigMaps in it", b.objects),
			write: func(dir, ns, _ string) error {
				return namespacedSet(dir, ns, b.objects)
			},
			kubectl: kubectlApply,
			floor: func(ns, _ string) error {
				if err := b.floorApply(ctx, "/api/v1/namespaces/"+ns, fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns)); err != nil {
					return err
				}
				return b.floor(ctx, ns, false)
			},
		},
		{
			name: fmt.Sprintf("first apply of a CRD plus %d of its custom resources", crs),
			write: func(dir, ns, group string) error {
				return crdSet(dir, ns, group, crs)
			},
			kappWait: true,
			kubectl: func(dir, group string) error {
				if err := b.exec(b.kubectl, "apply", "--server-side", "-f", filepath.Join(dir, "crd.yaml")); err != nil {
					return err
				}
				if err := b.exec(b.kubectl, "wait", "--for=condition=Established", "--timeout=60s", "crd/widgets."+group); err != nil {
					return err
				}
				return b.exec(b.kubectl, "apply", "--server-side", "-f", filepath.Join(dir, "widgets.yaml"))
			},
			floor: func(ns, group string) error {
				if err := b.floorApply(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets."+group, crdJSON(group)); err != nil {
					return err
				}
				if err := b.waitEstablished(ctx, "widgets."+group); err != nil {
					return err
				}
				return b.workersDo(0, crs, func(i int) error {
					return b.floorApply(ctx, fmt.Sprintf("/apis/%s/v1/namespaces/%s/widgets/w-%04d", group, ns, i), widgetJSON(group, ns, i))
				})
			},
		},
	}
	var rows []row
	for i, s := range sets {
		var g, f, k, kp []time.Duration
		for rep := range b.reps {
			// floor
			ns := fmt.Sprintf("bench-new-floor-%d-%d", i, rep)
			group := ns + ".bench.test"
			if i == 1 {
				var err error
				ns, err = b.namespace(ctx, "floor")
				b.must(err)
				group = ns + ".bench.test"
			}
			d, err := timed(func() error { return s.floor(ns, group) })
			b.must(err)
			f = append(f, d)

			// gantry, with its inventory in a namespace of its own
			inv, err := b.namespace(ctx, "inv")
			b.must(err)
			ns, group = fmt.Sprintf("bench-new-gantry-%d-%d", i, rep), fmt.Sprintf("gantry-%d-%d.bench.test", i, rep)
			if i == 1 {
				ns = inv
			}
			dir := filepath.Join(b.work, "new", ns+"-"+fmt.Sprint(i))
			b.must(s.write(dir, ns, group))
			d, err = timed(func() error {
				return b.exec(b.gantry, "apply", "--path="+dir, "--inventory=bench", "--inventory-namespace="+inv, "--wait=false", "--timeout=5m")
			})
			b.must(err)
			g = append(g, d)

			if rep < b.kubectlReps {
				ns, group = fmt.Sprintf("bench-new-kubectl-%d-%d", i, rep), fmt.Sprintf("kubectl-%d-%d.bench.test", i, rep)
				if i == 1 {
					ns, err = b.namespace(ctx, "kubectl")
					b.must(err)
				}
				dir := filepath.Join(b.work, "new", ns+"-"+fmt.Sprint(i))
				b.must(s.write(dir, ns, group))
				d, err = timed(func() error { return s.kubectl(dir, group) })
				b.must(err)
				k = append(k, d)
				b.logf("%s, rep %d: kubectl %s", s.name, rep+1, d)
			}
			if b.kapp != "" && rep < b.kubectlReps {
				ns, group = fmt.Sprintf("bench-new-kapp-%d-%d", i, rep), fmt.Sprintf("kapp-%d-%d.bench.test", i, rep)
				appNS, err := b.namespace(ctx, "kapp")
				b.must(err)
				if i == 1 {
					ns = appNS
				}
				dir := filepath.Join(b.work, "new", ns+"-"+fmt.Sprint(i))
				b.must(s.write(dir, ns, group))
				d, err = timed(func() error {
					return b.exec(b.kapp, "deploy", "--yes", "--app=bench", "--namespace="+appNS, "--file="+dir, fmt.Sprintf("--wait=%t", s.kappWait))
				})
				b.must(err)
				kp = append(kp, d)
				b.logf("%s, rep %d: kapp %s", s.name, rep+1, d)
			}
			b.logf("%s, rep %d: floor %s, gantry %s", s.name, rep+1, f[rep], g[rep])
		}
		rows = append(rows, row{name: s.name, gantry: median(g), flr: median(f), kubectl: median(k), kapp: median(kp),
			ratios: ratios(g, f), target: "≤ 2.0 × floor, faster than kubectl and kapp"})
	}
	return rows
}

// namespacedSet writes a Namespace and n ConfigMaps in it, as one stream
// with the Namespace first (kubectl applies in file order).
func namespacedSet(dir, ns string, n int) error {
	if err := configMaps(dir, ns, n); err != nil {
		return err
	}
	file := filepath.Join(dir, "configmaps.yaml")
	body, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, append([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"), body...), 0o644)
}

// crdSet writes a CRD of kind Widget in group (crd.yaml) and n Widgets in ns
// (widgets.yaml).
func crdSet(dir, ns, group string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var s strings.Builder
	fmt.Fprintf(&s, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget}
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
              x-kubernetes-validations:
                - rule: self.min <= self.max
              properties:
                min: {type: integer, default: 0}
                max: {type: integer}
                payload: {type: string}
`, group)
	if err := os.WriteFile(filepath.Join(dir, "crd.yaml"), []byte(s.String()), 0o644); err != nil {
		return err
	}
	s.Reset()
	for i := range n {
		fmt.Fprintf(&s, "---\napiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: w-%04d\n  namespace: %s\nspec:\n  max: %d\n  payload: %s\n", group, i, ns, i+1, strings.Repeat("x", 150))
	}
	return os.WriteFile(filepath.Join(dir, "widgets.yaml"), []byte(s.String()), 0o644)
}

func crdJSON(group string) string {
	return fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.%[1]s"},"spec":{"group":%[1]q,"scope":"Namespaced","names":{"kind":"Widget","plural":"widgets","singular":"widget"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-validations":[{"rule":"self.min <= self.max"}],"properties":{"min":{"type":"integer","default":0},"max":{"type":"integer"},"payload":{"type":"string"}}}}}}}]}}`, group)
}

func widgetJSON(group, ns string, i int) string {
	return fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"Widget","metadata":{"name":"w-%04d","namespace":%q},"spec":{"max":%d,"payload":%q}}`, group, i, ns, i+1, strings.Repeat("x", 150))
}

// floorApply sends one server-side apply PATCH of body to path.
func (b *bench) floorApply(ctx context.Context, path, body string) error {
	return b.client.CoreV1().RESTClient().Patch(types.ApplyPatchType).AbsPath(path).
		Param("fieldManager", "floor").Param("force", "true").Body([]byte(body)).Do(ctx).Error()
}

// waitEstablished polls a CRD until it is Established, as any client must
// before it creates custom resources.
func (b *bench) waitEstablished(ctx context.Context, name string) error {
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		raw, err := b.client.CoreV1().RESTClient().Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name).DoRaw(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // not there yet: poll again
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := json.Unmarshal(raw, crd); err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
