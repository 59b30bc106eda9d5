package entrypoint

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/artifact"
)

// runArtifact runs the commands that only read or tag artifacts.
func runArtifact(ctx context.Context, cfg *Config, client *artifact.Client, stdout io.Writer, console *console) int {
	fail := func(err error) int {
		console.printf("gantry %s: %v\n", cfg.Command, err)
		return ExitFailed
	}
	switch cfg.Command {
	case "pull":
		p, err := client.Pull(ctx, cfg.Artifact, cfg.Path)
		if err != nil {
			return fail(err)
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
		flux := in.ConfigMediaType == artifact.ConfigMediaType && len(in.Layers) == 1 && strings.HasPrefix(in.Layers[0].MediaType, artifact.ContentMediaType)
		fmt.Fprintf(stdout, "flux format:  %v\n", flux)
	}
	return ExitOK
}
