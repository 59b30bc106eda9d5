package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the key material of one local cluster, written as PEM files into
// its data dir. ECDSA P-256 throughout: key generation is instant, which
// keeps start-up fast, and every component accepts it.
type pki struct {
	CACert, ServingCert, ServingKey, AdminCert, AdminKey, SAKey, SAPub string

	dir string
	ca  *keyPair
}

// issueClient writes a client certificate signed by the cluster's CA, for
// the identity cn in the groups orgs, and returns the paths of the
// certificate and its key.
func (p *pki) issueClient(file, cn string, orgs ...string) (cert, key string, err error) {
	kp, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ca)
	if err != nil {
		return "", "", fmt.Errorf("creating the certificate of %s: %w", cn, err)
	}
	cert, key = filepath.Join(p.dir, file+".crt"), filepath.Join(p.dir, file+".key")
	if err := writePEM(cert, "CERTIFICATE", kp.der); err != nil {
		return "", "", err
	}
	if err := writeKey(key, kp.key); err != nil {
		return "", "", err
	}
	return cert, key, nil
}

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
	der  []byte
}

func newKeyPair(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(7 * 24 * time.Hour)
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, der: der}, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der)
}

// newPKI creates a CA, a serving certificate for the API server on loopback,
// an admin client certificate in group system:masters, and the service
// account signing key.
func newPKI(dir string) (*pki, error) {
	ca, err := newKeyPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "gantry-test-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("creating CA: %w", err)
	}
	serving, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}, ca)
	if err != nil {
		return nil, fmt.Errorf("creating serving certificate: %w", err)
	}
	admin, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "gantry-admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return nil, fmt.Errorf("creating admin certificate: %w", err)
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("creating service account key: %w", err)
	}
	saPub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return nil, err
	}

	p := &pki{
		CACert:      filepath.Join(dir, "ca.crt"),
		ServingCert: filepath.Join(dir, "apiserver.crt"),
		ServingKey:  filepath.Join(dir, "apiserver.key"),
		AdminCert:   filepath.Join(dir, "admin.crt"),
		AdminKey:    filepath.Join(dir, "admin.key"),
		SAKey:       filepath.Join(dir, "sa.key"),
		SAPub:       filepath.Join(dir, "sa.pub"),
		dir:         dir,
		ca:          ca,
	}
	for _, w := range []error{
		writePEM(p.CACert, "CERTIFICATE", ca.der),
		writePEM(p.ServingCert, "CERTIFICATE", serving.der),
		writeKey(p.ServingKey, serving.key),
		writePEM(p.AdminCert, "CERTIFICATE", admin.der),
		writeKey(p.AdminKey, admin.key),
		writeKey(p.SAKey, sa),
		writePEM(p.SAPub, "PUBLIC KEY", saPub),
	} {
		if w != nil {
			return nil, fmt.Errorf("writing certificates: %w", w)
		}
	}
	return p, nil
}
