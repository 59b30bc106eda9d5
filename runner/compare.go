package runner

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
)

// ObjectDiff is one object of diff-artifact's result: changed, only in
// the artifact, only in what it is compared to, or the same.
type ObjectDiff struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	State      string `json:"state"`
	Diff       string `json:"diff,omitempty"`
}

// CompareArtifacts compares cfg's artifact's objects with compare-to's
// (another artifact or a folder), object by object, by kind, then
// namespace and name, as the diff of a cluster reads. Secret values are
// masked in the diffs; redact masks what else must not be printed.
func (s *Session) CompareArtifacts(ctx context.Context, cfg *config.Config, client *artifact.Client, redact func(string) string) ([]ObjectDiff, error) {
	objectsOf := func(source string) (map[string]*unstructured.Unstructured, error) {
		dir, packed := source, false
		if strings.HasPrefix(source, "oci://") {
			packed = true
			tmp, err := os.MkdirTemp("", "gantry-diff-artifact-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(tmp)
			if _, err := client.Pull(ctx, source, tmp); err != nil {
				return nil, err
			}
			dir = tmp
		}
		objs, err := sources.Build(sources.BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: cfg.SOPSIdentities, Decrypted: s.Decrypted, NoOrigins: true, Packed: packed, CredentialFiles: cfg.CredentialFiles})
		if err != nil {
			return nil, err
		}
		out := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			out[inventory.EntryFor(o.Unstructured).ID] = o.Unstructured
		}
		return out, nil
	}
	a, err := objectsOf(cfg.Artifact)
	if err != nil {
		return nil, err
	}
	b, err := objectsOf(cfg.CompareTo)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for id := range a {
		ids[id] = true
	}
	for id := range b {
		ids[id] = true
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	either := func(id string) *unstructured.Unstructured {
		if u := a[id]; u != nil {
			return u
		}
		return b[id]
	}
	sort.Slice(sorted, func(i, j int) bool {
		x, y := either(sorted[i]), either(sorted[j])
		return fmt.Sprint(x.GetKind(), "\x00", x.GetNamespace(), "\x00", x.GetName()) < fmt.Sprint(y.GetKind(), "\x00", y.GetNamespace(), "\x00", y.GetName())
	})
	label := func(source string) string { return strings.TrimPrefix(source, "oci://") }
	objects := make([]ObjectDiff, 0, len(sorted))
	for _, id := range sorted {
		u := either(id)
		ref := result.Ref(u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName())
		d, err := diffs.BetweenMasked(ref, label(cfg.Artifact), label(cfg.CompareTo), a[id], b[id], redact)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		o := ObjectDiff{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), State: "same", Diff: redact(d)}
		switch {
		case a[id] == nil:
			o.State = "only-compared"
		case b[id] == nil:
			o.State = "only-artifact"
		case d != "":
			o.State = "changed"
		}
		objects = append(objects, o)
	}
	return objects, nil
}
