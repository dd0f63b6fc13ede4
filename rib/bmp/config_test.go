package bmp

import (
	"strings"
	"testing"
	"time"

	"flowzero/internal/config"
)

func TestConfiguration(t *testing.T) {
	cfg := DefaultConfiguration()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	err := config.Decode([]byte(`
listen: "[::]:10179"
allowed-routers: [192.0.2.0/24, "2001:db8::/32"]
rds: ["0:0", "65017:101", "192.0.2.1:5"]
adj-rib-in: post-policy
keep: 30s
collect-as-paths: false
max-sessions: 8
initiation-timeout: 10s
idle-timeout: 0s
`), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "[::]:10179" || len(cfg.AllowedRouters) != 2 || len(cfg.RDs) != 3 ||
		cfg.RDs[2].String() != "192.0.2.1:5" || cfg.AdjRIBIn != "post-policy" || cfg.Keep != 30*time.Second ||
		cfg.CollectASPaths || !cfg.CollectCommunities || cfg.MaxSessions != 8 || cfg.InitiationTimeout != 10*time.Second ||
		cfg.IdleTimeout != 0 {
		t.Errorf("decoded %+v", cfg)
	}
	for _, tc := range []struct{ yaml, key string }{
		{"adj-rib-in: both\n", "adj-rib-in"},
		{"keep: 10ms\n", "keep"},
		{"listen: nope\n", "listen"},
		{"rds: [\"1:2:3:4\"]\n", "route distinguisher \"1:2:3:4\""},
		{"receive-buffer: -1\n", "receive-buffer"},
		{"max-sessions: -1\n", "max-sessions"},
		{"initiation-timeout: 0s\n", "initiation-timeout"},
		{"idle-timeout: 10s\n", "idle-timeout"},
		{"unknown: 1\n", "unknown"},
	} {
		cfg := DefaultConfiguration()
		err := config.Decode([]byte(tc.yaml), &cfg)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v, want one naming %s", tc.yaml, err, tc.key)
		}
	}
}
