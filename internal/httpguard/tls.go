package httpguard

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// TLSFiles name a listener's certificate and key pair (PEM), and
// optionally a CA whose client certificates it requires.
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// Enabled reports whether any file is named.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" || f.ClientCA != "" }

// Check says which flag is missing: the certificate and key come together,
// and a client CA needs them.
func (f TLSFiles) Check() error {
	switch {
	case f.Cert != "" && f.Key == "":
		return errors.New("--tls-cert needs --tls-key")
	case f.Key != "" && f.Cert == "":
		return errors.New("--tls-key needs --tls-cert")
	case f.ClientCA != "" && f.Cert == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	return nil
}

// CertReloader holds a certificate and key pair loaded from files, swapped
// atomically by Reload: a handshake after a Reload sees the new pair.
type CertReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// NewCertReloader loads the pair from certFile and keyFile.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload loads the pair again; on error the old pair stays.
func (r *CertReloader) Reload() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls: certificate %s, key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert.Store(&c)
	return nil
}

// GetCertificate is a tls.Config's GetCertificate.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// Config returns a server configuration (TLS 1.2 at least) serving r's
// pair, requiring and verifying client certificates when clientCAs is set.
func (r *CertReloader) Config(clientCAs *x509.CertPool) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
	if clientCAs != nil {
		c.ClientCAs, c.ClientAuth = clientCAs, tls.RequireAndVerifyClientCert
	}
	return c
}

// LoadCertPool reads a PEM file of one or more CA certificates.
func LoadCertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", file)
	}
	return pool, nil
}

// Load checks f and, when enabled, returns its reloader and server
// configuration (nil, nil, nil when no file is named).
func (f TLSFiles) Load() (*CertReloader, *tls.Config, error) {
	if err := f.Check(); err != nil {
		return nil, nil, err
	}
	if !f.Enabled() {
		return nil, nil, nil
	}
	r, err := NewCertReloader(f.Cert, f.Key)
	if err != nil {
		return nil, nil, err
	}
	var pool *x509.CertPool
	if f.ClientCA != "" {
		if pool, err = LoadCertPool(f.ClientCA); err != nil {
			return nil, nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
	}
	return r, r.Config(pool), nil
}
