package httpguard

import (
	"crypto/tls"
	"crypto/x509"
	"github.com/fleetdrill/fleetdrill/internal/httpguard/certtest"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// serveTLS accepts and handshakes on a TLS listener of conf until the test ends.
func serveTLS(t *testing.T, conf *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	tln := tls.NewListener(ln, conf)
	go func() {
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// peerCert handshakes with addr and returns the server's certificate.
func peerCert(t *testing.T, addr string, conf *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

func TestCertReloaderServesAndReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := certtest.WriteSelfSigned(t, dir, "first")
	r, err := NewCertReloader(certFile, keyFile)
	require.NoError(t, err)
	conf := r.Config(nil)
	require.Equal(t, uint16(tls.VersionTLS12), conf.MinVersion)
	addr := serveTLS(t, conf)

	pool := x509.NewCertPool()
	pool.AddCert(first)
	got, err := peerCert(t, addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	require.NoError(t, err)
	require.Equal(t, first.Raw, got.Raw)

	// A second pair over the same files: the next handshake sees it.
	c2, k2, second := certtest.WriteSelfSigned(t, dir, "second")
	require.NoError(t, os.Rename(c2, certFile))
	require.NoError(t, os.Rename(k2, keyFile))
	require.NoError(t, r.Reload())
	pool.AddCert(second)
	got, err = peerCert(t, addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	require.NoError(t, err)
	require.Equal(t, second.Raw, got.Raw)

	// A broken pair is refused and the old one stays.
	_, k3, _ := certtest.WriteSelfSigned(t, dir, "third")
	require.NoError(t, os.Rename(k3, keyFile))
	err = r.Reload()
	require.ErrorContains(t, err, "private key does not match public key")
	got, err = peerCert(t, addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	require.NoError(t, err)
	require.Equal(t, second.Raw, got.Raw)
}

func TestCertReloaderMismatchedPair(t *testing.T) {
	dir := t.TempDir()
	certFile, _, _ := certtest.WriteSelfSigned(t, dir, "a")
	_, keyFile, _ := certtest.WriteSelfSigned(t, dir, "b")
	_, err := NewCertReloader(certFile, keyFile)
	require.ErrorContains(t, err, "private key does not match public key")
	require.ErrorContains(t, err, certFile)
}

func TestTLSFilesCheck(t *testing.T) {
	require.NoError(t, TLSFiles{}.Check())
	require.NoError(t, TLSFiles{Cert: "c", Key: "k"}.Check())
	require.ErrorContains(t, TLSFiles{Cert: "c"}.Check(), "--tls-cert needs --tls-key")
	require.ErrorContains(t, TLSFiles{Key: "k"}.Check(), "--tls-key needs --tls-cert")
	require.ErrorContains(t, TLSFiles{ClientCA: "ca"}.Check(), "--tls-client-ca needs")
	r, conf, err := TLSFiles{}.Load()
	require.NoError(t, err)
	require.Nil(t, r)
	require.Nil(t, conf)
}

func TestClientCARequired(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, server := certtest.WriteSelfSigned(t, dir, "server")
	clientCert, clientKey, _ := certtest.WriteSelfSigned(t, dir, "client")
	_, conf, err := TLSFiles{Cert: certFile, Key: keyFile, ClientCA: clientCert}.Load()
	require.NoError(t, err)
	require.Equal(t, tls.RequireAndVerifyClientCert, conf.ClientAuth)
	addr := serveTLS(t, conf)
	pool := x509.NewCertPool()
	pool.AddCert(server)

	// Without a client certificate the handshake fails (TLS 1.3 reports
	// it on the first read).
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err == nil {
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	require.Error(t, err)

	pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	require.NoError(t, err)
	_, err = peerCert(t, addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}})
	require.NoError(t, err)
}
