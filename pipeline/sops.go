package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"filippo.io/age"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"google.golang.org/grpc"
)

// sopsKeys decrypts SOPS data keys with the age identities it is given and
// nothing else: no environment variables, key files or cloud KMS, so what
// a run can decrypt is exactly what its inputs allow.
type sopsKeys struct {
	ids sopsage.ParsedIdentities
}

var _ keyservice.KeyServiceClient = sopsKeys{}

func (sopsKeys) Encrypt(context.Context, *keyservice.EncryptRequest, ...grpc.CallOption) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("gantry only decrypts")
}

func (k sopsKeys) Decrypt(_ context.Context, req *keyservice.DecryptRequest, _ ...grpc.CallOption) (*keyservice.DecryptResponse, error) {
	ak := req.GetKey().GetAgeKey()
	if ak == nil {
		return nil, errors.New("only age keys are supported")
	}
	mk := &sopsage.MasterKey{Recipient: ak.GetRecipient(), EncryptedKey: string(req.GetCiphertext())}
	k.ids.ApplyToMasterKey(mk)
	plain, err := mk.Decrypt()
	if err != nil {
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

// decryptSOPS decrypts one SOPS-encrypted YAML document, checking its MAC,
// and returns the plain YAML.
func decryptSOPS(doc []byte, ids []age.Identity) ([]byte, error) {
	store := sopsyaml.NewStore(&config.YAMLStoreConfig{})
	tree, err := store.LoadEncryptedFile(doc)
	if err != nil {
		return nil, fmt.Errorf("reading SOPS metadata: %w", err)
	}
	key, err := tree.Metadata.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{sopsKeys{ids: ids}}, sops.DefaultDecryptionOrder)
	if err != nil {
		return nil, errors.New("none of the sops-age-key identities can decrypt it (it was encrypted for other recipients)")
	}
	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(key, cipher)
	if err != nil {
		return nil, fmt.Errorf("decrypting: %w", err)
	}
	stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, key, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil || stored != mac {
		return nil, errors.New("SOPS integrity check (MAC) failed: the file was changed after it was encrypted (a kustomize transformer such as labels, namespace or a patch that touches an encrypted object breaks it; encrypt with --mac-only-encrypted, or keep transformers off encrypted objects)")
	}
	return store.EmitPlainFile(tree.Branches)
}
