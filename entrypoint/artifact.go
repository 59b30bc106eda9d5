package entrypoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/config"
	"github.com/gantry-dev/gantry/reporters"
	"github.com/gantry-dev/gantry/runner"
)

// runArtifact runs the commands that only read or tag artifacts.
func (s *session) runArtifact(ctx context.Context, cfg *config.Config, stdout io.Writer) int {
	client, console := runner.ArtifactClient(cfg), s.console
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if s.platform == githubActions {
		// What an artifact holds (annotations, diffs) is printed, never
		// read as workflow commands.
		end, err := fence(stdout)
		if err != nil {
			return ExitFailed
		}
		defer end()
	}
	fail := func(err error) int {
		console.printf("gantry %s: %v\n", cfg.Command, err)
		var tooLarge *artifact.TooLargeError
		if errors.As(err, &tooLarge) {
			return ExitInvalid
		}
		return ExitFailed
	}
	switch cfg.Command {
	case "diff-artifact":
		return s.diffArtifact(ctx, cfg, client, stdout)
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
func (s *session) diffArtifact(ctx context.Context, cfg *config.Config, client *artifact.Client, stdout io.Writer) int {
	console := s.console
	objects, err := s.run.CompareArtifacts(ctx, cfg, client, console.redact.String)
	if err != nil {
		console.printf("gantry diff-artifact: %v\n", err)
		return ExitFailed
	}
	counts := map[string]int{}
	for _, o := range objects {
		counts[o.State]++
	}
	sorted := objects
	changed := len(sorted) - counts["same"]
	if err := writeArtifactDiff(stdout, cfg, objects, counts, useColor(cfg.Color, stdout, s.env)); err != nil {
		console.warn("printing the diff: " + err.Error())
	}
	console.printf("gantry diff-artifact: %d of %d %s between %s and %s\n", changed, len(sorted), plural(len(sorted), "object differs", "objects differ"), cfg.Artifact, cfg.CompareTo)
	if changed > 0 && cfg.DetailedExitcode {
		return ExitChanges
	}
	return ExitOK
}

// writeArtifactDiff prints what diff-artifact found, as diff prints its
// own: the diffs and a summary line, or the objects as JSON or YAML.
// Secret values are masked in the diffs already.
func writeArtifactDiff(w io.Writer, cfg *config.Config, objects []runner.ObjectDiff, counts map[string]int, color bool) error {
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
