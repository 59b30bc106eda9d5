package artifact

// The KMS providers cosign accepts in key references (awskms://,
// gcpkms://, azurekms://, hashivault://) register themselves when imported.
import (
	_ "github.com/sigstore/sigstore/pkg/signature/kms/aws"
	_ "github.com/sigstore/sigstore/pkg/signature/kms/azure"
	_ "github.com/sigstore/sigstore/pkg/signature/kms/gcp"
	_ "github.com/sigstore/sigstore/pkg/signature/kms/hashivault"
)
