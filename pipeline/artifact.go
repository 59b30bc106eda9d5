package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/result"
	"github.com/gantry-dev/gantry/sources"
)

// ArtifactOptions say which OCI artifact a run pushes or pulls.
type ArtifactOptions struct {
	// Ref is oci://registry/repository[:tag|@digest].
	Ref string
	// Path is the folder inside a pulled artifact to build (Flux's
	// spec.path); empty builds its root.
	Path string
	// Tags are extra tags for a push.
	Tags   []string
	Client *artifact.Client
	Meta   artifact.Meta
}

// pushStage pushes the built objects as an artifact.
func (r *run) pushStage() stage {
	return stage{name: "push", reason: result.ReasonArtifactFailed, stopOnError: true, run: func(ctx context.Context) error {
		a := r.opts.Artifact
		packed := r.artifactObjects
		if packed == nil {
			packed = r.objects
		}
		manifests, err := sources.ManifestsYAML(packed)
		if err != nil {
			return err
		}
		pushed, err := a.Client.Push(ctx, a.Ref, manifests, a.Meta, a.Tags)
		if err != nil {
			return err
		}
		r.res.Artifact = &result.Artifact{URL: pushed.URL, Digest: pushed.Digest, Tags: pushed.Tags, Signed: pushed.Signed}
		how := "not signed"
		if pushed.Signed {
			how = "digest signed with cosign"
		}
		r.obs.Info(fmt.Sprintf("pushed %s (%s)", pushed.URL, how))
		return nil
	}}
}

// pullStage pulls the artifact into a temporary folder, which the build
// then reads.
func (r *run) pullStage() stage {
	return stage{name: "pull", reason: result.ReasonArtifactFailed, stopOnError: true, run: func(ctx context.Context) error {
		a := r.opts.Artifact
		dir, err := os.MkdirTemp("", "gantry-pull-")
		if err != nil {
			return err
		}
		r.cleanup = append(r.cleanup, func() { os.RemoveAll(dir) })
		pulled, err := a.Client.Pull(ctx, a.Ref, dir)
		var tooLarge *artifact.TooLargeError
		if errors.As(err, &tooLarge) {
			r.res.Reason = result.ReasonInvalidInput
		}
		if err != nil {
			return err
		}
		r.opts.Build.Path = dir
		r.opts.Build.WorkDir = dir
		r.opts.Build.Packed = true
		if a.Path != "" {
			// Inside what was pulled, whoever names it (the workflow's
			// artifact-path, or a revision): relative, without .., and
			// no link out of the folder on the way.
			clean := filepath.Clean(a.Path)
			if !filepath.IsLocal(clean) {
				return fmt.Errorf("artifact-path %s is not a folder inside the artifact (relative, without ..): refused", quoted(a.Path))
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				return err
			}
			info, err := root.Stat(clean)
			root.Close()
			if err != nil || !info.IsDir() {
				return fmt.Errorf("artifact-path %s: no such folder in %s", quoted(a.Path), pulled.URL)
			}
			if resolved, err := filepath.EvalSymlinks(filepath.Join(dir, clean)); err != nil || !inside(dir, resolved) {
				return fmt.Errorf("artifact-path %s leads out of the artifact: refused", quoted(a.Path))
			}
			r.opts.Build.Path = filepath.Join(dir, clean)
		}
		r.res.Artifact = &result.Artifact{URL: pulled.URL, Digest: pulled.Digest, Verified: pulled.Verified}
		if r.res.Revision == "" {
			r.res.Revision = pulled.Revision
		}
		how := "not verified"
		if pulled.Verified {
			how = "signature verified"
		}
		r.obs.Info(fmt.Sprintf("pulled %s (revision %s, %s)", pulled.URL, pulled.Revision, how))
		return nil
	}}
}

// Push builds and pushes an artifact, for the push command.
func Push(ctx context.Context, opts Options, obs Observer) *result.Result {
	// Packed as in git, never decrypted.
	opts.Build.KeepSOPSEncrypted = true
	opts.Build.SOPSIdentities = nil
	r := newRun("push", opts, nil, obs)
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	return r.execute(ctx, []stage{r.buildStage(), r.pushStage()})
}

// inside reports whether path p lies in folder dir (both resolved).
func inside(dir, p string) bool {
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && filepath.IsLocal(rel)
}
