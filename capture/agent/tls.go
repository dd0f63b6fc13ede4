package agent

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"

	"flowzero/internal/clock"
)

// newTLSConfig builds the agent's TLS configuration (nil when disabled). The server
// certificate is always verified, against clk.
func newTLSConfig(c TLSConfiguration, server string, clk clock.Clock) (*tls.Config, error) {
	if !c.Enable {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, Time: clk.Now}
	if conf.ServerName == "" {
		host, _, err := net.SplitHostPort(server)
		if err != nil {
			return nil, err
		}
		conf.ServerName = host
	}
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, fmt.Errorf("tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca: %s: no PEM certificate", c.CA)
		}
		conf.RootCAs = pool
	}
	if c.Cert != "" {
		cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("tls.cert: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}
