package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a set of PEM files for TLS tests, made by NewPKI. It is a plain
// value; the zero value names no files.
type PKI struct {
	CA                    string // the certificate authority
	ServerCert, ServerKey string // a server certificate for 127.0.0.1, signed by CA
	ClientCert, ClientKey string // a client certificate, signed by CA
	OtherCA               string // another certificate authority, which signed nothing here
}

// Server returns the files of a server WithTLS that accepts the clients of
// p.CA.
func (p PKI) Server() TLSFiles { return TLSFiles{Cert: p.ServerCert, Key: p.ServerKey, CA: p.CA} }

// NewPKI writes a fresh PKI (ECDSA P-256 keys, valid for an hour either
// side of now) in a temporary folder of t, or fails t.
func NewPKI(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(t, err)
		return k
	}
	serial := int64(0)
	cert := func(tmpl *x509.Certificate, parent *x509.Certificate, pub, signer any) (*x509.Certificate, []byte) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		must(t, err)
		c, err := x509.ParseCertificate(der)
		must(t, err)
		return c, der
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalECPrivateKey(k)
		must(t, err)
		return der
	}
	caKey := key()
	ca, caDER := cert(&x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, &caKey.PublicKey, caKey)
	var p PKI
	p.CA = write("ca.pem", "CERTIFICATE", caDER)
	sk := key()
	_, sDER := cert(&x509.Certificate{Subject: pkix.Name{CommonName: "redis"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}, ca, &sk.PublicKey, caKey)
	p.ServerCert, p.ServerKey = write("server.pem", "CERTIFICATE", sDER), write("server-key.pem", "EC PRIVATE KEY", keyDER(sk))
	ck := key()
	_, cDER := cert(&x509.Certificate{Subject: pkix.Name{CommonName: "replica"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, &ck.PublicKey, caKey)
	p.ClientCert, p.ClientKey = write("client.pem", "CERTIFICATE", cDER), write("client-key.pem", "EC PRIVATE KEY", keyDER(ck))
	ok := key()
	_, oDER := cert(&x509.Certificate{Subject: pkix.Name{CommonName: "other CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, &ok.PublicKey, ok)
	p.OtherCA = write("other-ca.pem", "CERTIFICATE", oDER)
	return p
}

// must fails t with err, if any.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
}
