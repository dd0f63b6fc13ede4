package capture

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return pool, nil
}

// serverTLS builds the server's TLS configuration (nil when disabled).
func serverTLS(c TLSServerConfiguration) (*tls.Config, error) {
	if !c.Enable {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCA != "" {
		pool, err := loadPool(c.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls.client-ca: %w", err)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// clientTLS builds the agent's TLS configuration (nil when disabled). The server certificate
// is always verified.
func clientTLS(c TLSClientConfiguration, server string) (*tls.Config, error) {
	if !c.Enable {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if conf.ServerName == "" {
		host, _, err := net.SplitHostPort(server)
		if err != nil {
			return nil, err
		}
		conf.ServerName = host
	}
	if c.CA != "" {
		pool, err := loadPool(c.CA)
		if err != nil {
			return nil, fmt.Errorf("tls.ca: %w", err)
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
