package artifact

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"filippo.io/age/agessh"
)

// EncryptedMediaType is the layer media type of an age-encrypted artifact:
// Flux's content type with +age, so that no tool mistakes the ciphertext
// for a tarball. Flux itself cannot consume encrypted artifacts.
const EncryptedMediaType = ContentMediaType + "+age"

// EncryptionAnnotation records on the manifest how the layer is encrypted.
const EncryptionAnnotation = "dev.gantry.artifact.encryption"

// ParseRecipients reads age recipients, one per line: age1... X25519
// recipients or ssh-ed25519/ssh-rsa public keys. Blank lines and # comments
// are skipped; an invalid line is named by number.
func ParseRecipients(text string) ([]age.Recipient, error) {
	var out []age.Recipient
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var r age.Recipient
		var err error
		switch {
		case strings.HasPrefix(line, "age1"):
			r, err = age.ParseX25519Recipient(line)
		case strings.HasPrefix(line, "ssh-"):
			r, err = agessh.ParseRecipient(line)
		default:
			err = errors.New("not an age (age1...) or SSH (ssh-...) public key")
		}
		if err != nil {
			return nil, fmt.Errorf("recipient on line %d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseIdentities reads age identities: AGE-SECRET-KEY-1... lines, or one
// unencrypted OpenSSH private key. The key material never appears in
// errors.
func ParseIdentities(text string) ([]age.Identity, error) {
	if strings.Contains(text, "PRIVATE KEY-----") {
		id, err := agessh.ParseIdentity([]byte(strings.TrimSpace(text) + "\n"))
		if err != nil {
			return nil, errors.New("the SSH private key could not be read (passphrase-protected keys are not supported)")
		}
		return []age.Identity{id}, nil
	}
	ids, err := age.ParseIdentities(strings.NewReader(text))
	if err != nil {
		return nil, errors.New("not age identities (AGE-SECRET-KEY-1... lines) or an OpenSSH private key")
	}
	return ids, nil
}

// encryptFile encrypts src into dst for the recipients.
func encryptFile(dst, src string, recipients []age.Recipient) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	w, err := age.Encrypt(out, recipients...)
	if err != nil {
		out.Close()
		return fmt.Errorf("encrypting: %w", err)
	}
	if _, err := io.Copy(w, in); err != nil {
		out.Close()
		return fmt.Errorf("encrypting: %w", err)
	}
	if err := w.Close(); err != nil {
		out.Close()
		return fmt.Errorf("encrypting: %w", err)
	}
	return out.Close()
}

// decryptFile decrypts src with the identities and returns a reader of the
// plaintext.
func decryptFile(src string, identities []age.Identity) (io.ReadCloser, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	r, err := age.Decrypt(f, identities...)
	if err != nil {
		f.Close()
		var noMatch *age.NoIdentityMatchError
		if errors.As(err, &noMatch) {
			return nil, errors.New("none of the age identities given can decrypt it (it was encrypted for other recipients)")
		}
		return nil, fmt.Errorf("decrypting: %w", err)
	}
	return struct {
		io.Reader
		io.Closer
	}{r, f}, nil
}
