package entrypoint

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/diffs"
	"github.com/gantry-dev/gantry/inventory"
	"github.com/gantry-dev/gantry/pipeline"
	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/result"
)

// runArtifact runs the commands that only read or tag artifacts.
func runArtifact(ctx context.Context, cfg *config.Config, client *artifact.Client, stdout io.Writer, console *console, decrypted func([]string)) int {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	fail := func(err error) int {
		console.printf("gantry %s: %v\n", cfg.Command, err)
		return ExitFailed
	}
	switch cfg.Command {
	case "diff-artifact":
		return diffArtifact(ctx, cfg, client, stdout, console, decrypted)
	case "pull":
		p, err := client.Pull(ctx, cfg.Artifact, cfg.Path)
		if err != nil {
			return fail(err)
		}
		// Run as root in a container, in a workspace the runner's user
		// owns: what was pulled is that user's to read and remove.
		if err := reporters.GiveTree(cfg.Path); err != nil {
			console.warn("pulled files: " + err.Error())
		}
		fmt.Fprintf(stdout, "pulled %s (revision %s) into %s\n", p.URL, orNone(p.Revision), cfg.Path)
	case "tag":
		for _, t := range cfg.Tags {
			ref, err := client.Tag(ctx, cfg.Artifact, t)
			if err != nil {
				return fail(err)
			}
			fmt.Fprintf(stdout, "tagged %s\n", ref)
		}
	case "list":
		tags, err := client.List(ctx, cfg.Artifact, cfg.Semver)
		if err != nil {
			return fail(err)
		}
		for _, l := range tags {
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", l.Tag, l.Digest, orNone(l.Revision))
		}
	case "inspect":
		in, err := client.Inspect(ctx, cfg.Artifact)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "artifact:     %s\ndigest:       %s\nmedia type:   %s\nconfig:       %s\n", in.URL, in.Digest, in.MediaType, in.ConfigMediaType)
		keys := make([]string, 0, len(in.Annotations))
		for k := range in.Annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(stdout, "annotation:   %s=%s\n", k, in.Annotations[k])
		}
		for _, l := range in.Layers {
			fmt.Fprintf(stdout, "layer:        %s %s (%d bytes)\n", l.MediaType, l.Digest, l.Size)
		}
		fmt.Fprintf(stdout, "signatures:   %d\n", in.Signatures)
		if in.Verification != nil {
			if *in.Verification == nil {
				fmt.Fprintf(stdout, "verified:     yes\n")
			} else {
				fmt.Fprintf(stdout, "verified:     no (%v)\n", *in.Verification)
			}
		}
		fmt.Fprintf(stdout, "flux format:  %s\n", fluxFormat(in))
	}
	return ExitOK
}

// diffArtifact compares an artifact's objects with another artifact's or a
// folder's, object by object, and prints the diffs (Secret values masked).
// Exit 0 when they match; with differences 3 under detailed-exitcode, else 0.
func diffArtifact(ctx context.Context, cfg *config.Config, client *artifact.Client, stdout io.Writer, console *console, decrypted func([]string)) int {
	objectsOf := func(source string) (map[string]*unstructured.Unstructured, error) {
		dir := source
		if strings.HasPrefix(source, "oci://") {
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
		objs, err := pipeline.Build(pipeline.BuildOptions{Path: dir, WorkDir: dir, SOPSIdentities: cfg.SOPSIdentities, Decrypted: decrypted, NoOrigins: true})
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
		console.printf("gantry diff-artifact: %v\n", err)
		return ExitFailed
	}
	b, err := objectsOf(cfg.CompareTo)
	if err != nil {
		console.printf("gantry diff-artifact: %v\n", err)
		return ExitFailed
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
	// By kind, then namespace and name, as the diff of a cluster reads.
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
	var objects []artifactDiff
	counts := map[string]int{}
	for _, id := range sorted {
		u := either(id)
		ref := result.Ref(u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName())
		d, err := diffs.Between(ref, label(cfg.Artifact), label(cfg.CompareTo), a[id], b[id])
		if err != nil {
			console.printf("gantry diff-artifact: %s: %v\n", id, err)
			return ExitFailed
		}
		o := artifactDiff{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), State: "same", Diff: console.redact.String(d)}
		switch {
		case a[id] == nil:
			o.State = "only-compared"
		case b[id] == nil:
			o.State = "only-artifact"
		case d != "":
			o.State = "changed"
		}
		counts[o.State]++
		objects = append(objects, o)
	}
	changed := len(sorted) - counts["same"]
	if err := writeArtifactDiff(stdout, cfg, objects, counts, colorTerminal(stdout)); err != nil {
		console.warn("printing the diff: " + err.Error())
	}
	console.printf("gantry diff-artifact: %d of %d objects differ between %s and %s\n", changed, len(sorted), cfg.Artifact, cfg.CompareTo)
	if changed > 0 && cfg.DetailedExitcode {
		return ExitChanges
	}
	return ExitOK
}

// artifactDiff is one object of diff-artifact's result: changed, only in
// the artifact, only in what it is compared to, or the same.
type artifactDiff struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	State      string `json:"state"`
	Diff       string `json:"diff,omitempty"`
}

// writeArtifactDiff prints what diff-artifact found, as diff prints its
// own: the diffs and a summary line, or the objects as JSON or YAML.
// Secret values are masked in the diffs already.
func writeArtifactDiff(w io.Writer, cfg *config.Config, objects []artifactDiff, counts map[string]int, color bool) error {
	switch cfg.Output {
	case "json", "yaml":
		b, err := marshalAs(cfg.Output, map[string]any{"artifact": cfg.Artifact, "compareTo": cfg.CompareTo, "objects": objects})
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, b)
		return err
	}
	var b strings.Builder
	for _, o := range objects {
		if o.Diff != "" {
			b.WriteString(paintDiff(o.Diff, color))
		}
	}
	fmt.Fprintf(&b, "%d changed, %d only in %s, %d only in %s, %d the same\n", counts["changed"],
		counts["only-artifact"], cfg.Artifact, counts["only-compared"], cfg.CompareTo, counts["same"])
	_, err := io.WriteString(w, b.String())
	return err
}

// fluxFormat says whether Flux's source-controller can consume an
// artifact, and why not when it cannot.
func fluxFormat(in *artifact.Inspection) string {
	switch {
	case in.ConfigMediaType != artifact.ConfigMediaType || len(in.Layers) != 1:
		return "false (not Flux's config media type and one layer)"
	case in.Layers[0].MediaType == artifact.EncryptedMediaType:
		return "false (age-encrypted: Flux cannot decrypt it)"
	case in.Layers[0].MediaType != artifact.ContentMediaType:
		return "false (layer " + in.Layers[0].MediaType + ")"
	}
	return "true"
}
