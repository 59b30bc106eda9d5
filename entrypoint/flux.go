package entrypoint

import (
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/artifact"
	"github.com/gantry-dev/gantry/config"
)

// fluxObjects are the OCIRepository and Kustomization that reconcile the
// artifact a released inventory came from, for release to print: the same
// artifact, verified as gantry verified it, pruned as gantry pruned it.
func fluxObjects(cfg *config.Config) ([]map[string]any, error) {
	ref, err := artifact.ParseRef(cfg.Artifact, cfg.Registry.Insecure)
	if err != nil {
		return nil, err
	}
	src := map[string]any{"url": "oci://" + ref.Context().String(), "interval": "5m"}
	switch r := ref.(type) {
	case name.Digest:
		src["ref"] = map[string]any{"digest": r.DigestStr()}
	case name.Tag:
		src["ref"] = map[string]any{"tag": r.TagStr()}
	}
	if cfg.Registry.Insecure {
		src["insecure"] = true
	}
	if cfg.Registry.Username != "" {
		src["secretRef"] = map[string]any{"name": cfg.Inventory + "-registry"}
	}
	if cfg.Verify != nil {
		src["verify"] = map[string]any{"provider": "cosign", "secretRef": map[string]any{"name": cfg.Inventory + "-cosign"}}
	}
	ks := map[string]any{
		"interval":  "10m",
		"path":      "./" + cfg.ArtifactPath,
		"prune":     cfg.Prune,
		"sourceRef": map[string]any{"kind": "OCIRepository", "name": cfg.Inventory},
	}
	if len(cfg.SOPSIdentities) > 0 {
		ks["decryption"] = map[string]any{"provider": "sops", "secretRef": map[string]any{"name": cfg.Inventory + "-sops-age"}}
	}
	meta := map[string]any{"name": cfg.Inventory, "namespace": cfg.InventoryNamespace}
	return []map[string]any{
		{"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "metadata": meta, "spec": src},
		{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": meta, "spec": ks},
	}, nil
}

// writeFluxObjects prints fluxObjects as a YAML stream, with a comment
// naming the Secrets they refer to (never their content).
func writeFluxObjects(w io.Writer, cfg *config.Config) error {
	objs, err := fluxObjects(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "# Flux objects that reconcile %s, as gantry deployed it.\n", cfg.Artifact)
	var secrets []string
	if cfg.Registry.Username != "" {
		secrets = append(secrets, cfg.Inventory+"-registry (kubernetes.io/dockerconfigjson)")
	}
	if cfg.Verify != nil {
		secrets = append(secrets, cfg.Inventory+"-cosign (cosign.pub)")
	}
	if len(cfg.SOPSIdentities) > 0 {
		secrets = append(secrets, cfg.Inventory+"-sops-age (age.agekey)")
	}
	if len(secrets) > 0 {
		fmt.Fprintf(w, "# Create the Secrets they name first: %s.\n", strings.Join(secrets, ", "))
	}
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(w, "---")
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}
