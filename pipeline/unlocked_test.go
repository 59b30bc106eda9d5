package pipeline

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/kube"
)

// A plan made before the Lease holds only while what it read is as it
// was: changedSince finds an object changed, deleted or created since,
// whether its group was read by a LIST or by GETs, and nothing when all
// is as read.
func TestChangedSinceFindsEveryChange(t *testing.T) {
	t.Parallel()
	cases := map[string]func(ctx context.Context, c client.Client) error{
		"nothing": func(context.Context, client.Client) error { return nil },
		"changed": func(ctx context.Context, c client.Client) error {
			u := newObject(cmGVK, "many", "cm-3", nil)
			u.Object["data"] = map[string]any{"k": "v2"}
			return c.Update(ctx, u)
		},
		"deleted": func(ctx context.Context, c client.Client) error {
			return c.Delete(ctx, newObject(cmGVK, "many", "cm-5", nil))
		},
		"created": func(ctx context.Context, c client.Client) error {
			return c.Create(ctx, newObject(cmGVK, "many", "cm-0", nil))
		},
		"changed, read by GET": func(ctx context.Context, c client.Client) error {
			u := newObject(saGVK, "few", "runner", nil)
			u.SetAnnotations(map[string]string{"by": "hand"})
			return c.Update(ctx, u)
		},
		"created, read by GET": func(ctx context.Context, c client.Client) error {
			return c.Create(ctx, newObject(saGVK, "few", "new", nil))
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var objs []client.Object
			var keys []objectKey
			for i := range listThreshold + 2 {
				u := newObject(cmGVK, "many", fmt.Sprintf("cm-%d", i), nil)
				if i != 0 { // cm-0 is absent when planned
					objs = append(objs, u.DeepCopy())
				}
				keys = append(keys, keyOf(u))
			}
			objs = append(objs, newObject(saGVK, "few", "runner", nil))
			keys = append(keys, keyOf(newObject(saGVK, "few", "runner", nil)), keyOf(newObject(saGVK, "few", "new", nil)))
			c, mapper, _ := readsCluster(t, objs)
			p := newPlanner(&kube.Clients{Client: c, Mapper: mapper}, nil, false)
			p.keepOwnerLabels = true
			p.seen = map[objectKey]string{} // planned before the Lease
			ctx := t.Context()
			p.prefetch(ctx, keys, 4)
			for _, k := range keys {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(k.group.gvk)
				_ = p.get(ctx, k, u)
			}
			if len(p.seen) != len(keys) {
				t.Fatalf("the plan recorded %d reads, want %d", len(p.seen), len(keys))
			}
			if err := change(ctx, c); err != nil {
				t.Fatal(err)
			}
			got, err := p.changedSince(ctx, 4)
			if err != nil {
				t.Fatal(err)
			}
			if want := name != "nothing"; got != want {
				t.Errorf("changedSince = %v, want %v", got, want)
			}
		})
	}
}
