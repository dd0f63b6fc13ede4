package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"flowzero/internal/clock"
)

// newTLSConfig builds the listener's TLS configuration (nil when disabled); certificates are
// checked against clk.
func newTLSConfig(c TLSConfiguration, clk clock.Clock) (*tls.Config, error) {
	if !c.Enable {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, Time: clk.Now}
	if c.ClientCA != "" {
		pem, err := os.ReadFile(c.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls.client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.client-ca: %s: no PEM certificate", c.ClientCA)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}
