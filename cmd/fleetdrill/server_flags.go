package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
)

// addServerFlags adds the flags of a listener's limits (see
// internal/httpguard), defaulting to httpguard.Defaults.
func addServerFlags(cmd *cobra.Command, l *httpguard.Limits) {
	*l = httpguard.Defaults()
	fs := cmd.Flags()
	fs.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", l.ReadHeaderTimeout, "longest wait for a request's headers")
	fs.DurationVar(&l.BodyTimeout, "body-timeout", l.BodyTimeout, "longest wait for a request's body, after its headers (0: none)")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", l.MaxHeaderBytes, "largest request headers in bytes")
	fs.IntVar(&l.MaxConns, "max-conns", l.MaxConns, "connections open at once, per listener; more wait to be accepted (0: no cap)")
	fs.IntVar(&l.MaxConnsPerIP, "max-conns-per-ip", l.MaxConnsPerIP, "connections open at once from one client address, per listener; more are closed at once (0: no cap)")
}

// addTLSFlags adds --tls-cert, --tls-key and --tls-client-ca.
func addTLSFlags(cmd *cobra.Command, f *httpguard.TLSFiles) {
	fs := cmd.Flags()
	fs.StringVar(&f.Cert, "tls-cert", "", "serve https: certificate `FILE` (PEM, with --tls-key; reloaded on SIGHUP)")
	fs.StringVar(&f.Key, "tls-key", "", "serve https: private key `FILE` (PEM, with --tls-cert)")
	fs.StringVar(&f.ClientCA, "tls-client-ca", "", "require client certificates signed by a CA in this `FILE` (PEM)")
}

// tlsListener returns ln wrapped in TLS per conf (ln itself when conf is
// nil) and the URL scheme it serves.
func tlsListener(ln net.Listener, conf *tls.Config) (net.Listener, string) {
	if conf == nil {
		return ln, "http"
	}
	return tls.NewListener(ln, conf), "https"
}

// reloadOnSIGHUP reloads r's certificate on each SIGHUP until ctx ends,
// logging success or the error (the old certificate stays). It returns
// at once when r is nil; the returned stop waits for the watcher to end.
func reloadOnSIGHUP(ctx context.Context, r *httpguard.CertReloader, logger *slog.Logger) (stop func()) {
	if r == nil {
		return func() {}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := r.Reload(); err != nil {
					logger.Error("tls reload failed, keeping the old certificate", "err", err)
				} else {
					logger.Info("tls certificate reloaded")
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}
