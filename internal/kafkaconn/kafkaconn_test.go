package kafkaconn

import "testing"

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c   Configuration
		err string
	}{
		{Configuration{}, "brokers: at least one broker is needed"},
		{Configuration{Brokers: []string{"kafka1"}}, `brokers: "kafka1" is not host:port`},
		{Configuration{Brokers: []string{"k:1"}, SASL: SASLConfiguration{Mechanism: "plain", Username: "u"}}, "sasl.mechanism: plain sends the password in clear: set tls: true, or use scram-sha-256 or scram-sha-512"},
		{Configuration{Brokers: []string{"k:1"}, SASL: SASLConfiguration{Mechanism: "scram-sha-256"}}, "sasl.username: required with mechanism scram-sha-256"},
		{Configuration{Brokers: []string{"k:1"}, SASL: SASLConfiguration{Mechanism: "md5"}}, `sasl.mechanism: must be plain, scram-sha-256 or scram-sha-512, not "md5"`},
		{Configuration{Brokers: []string{"k:1"}, SASL: SASLConfiguration{Mechanism: "scram-sha-512", Username: "u"}}, ""},
	} {
		err := tc.c.Validate()
		if (err == nil && tc.err != "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%+v: got %v, want %q", tc.c, err, tc.err)
		}
	}
	for _, name := range []string{"zstd", "lz4", "snappy", "gzip", "none"} {
		if _, ok := Compression(name); !ok {
			t.Errorf("compression %s refused", name)
		}
	}
	if _, ok := Compression("brotli"); ok {
		t.Error("unknown compression accepted")
	}
}
