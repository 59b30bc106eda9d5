package entrypoint

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// release prints the Flux objects that reconcile the artifact: its
// repository and tag or digest, the path inside it, cosign verification
// and SOPS decryption when gantry used them, and Secrets by name only.
func TestFluxObjectsForRelease(t *testing.T) {
	t.Parallel()
	cfg, err := Load([]string{"release", "--inventory=shop", "--inventory-namespace=prod", "--artifact=oci://ghcr.io/acme/shop-config:1.4.0",
		"--artifact-path=apps/shop", "--registry-username=ci", "--registry-password=canary-pw-51"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeFluxObjects(&b, cfg); err != nil {
		t.Fatal(err)
	}
	want := `# Flux objects that reconcile oci://ghcr.io/acme/shop-config:1.4.0, as gantry deployed it.
# Create the Secrets they name first: shop-registry (kubernetes.io/dockerconfigjson).
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: shop
  namespace: prod
spec:
  interval: 5m
  ref:
    tag: 1.4.0
  secretRef:
    name: shop-registry
  url: oci://ghcr.io/acme/shop-config
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: shop
  namespace: prod
spec:
  interval: 10m
  path: ./apps/shop
  prune: true
  sourceRef:
    kind: OCIRepository
    name: shop
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
