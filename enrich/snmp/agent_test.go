package snmp_test

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/enrich/snmp"
	"flowzero/enrich/snmp/snmptest"
	"flowzero/internal/testutil"
)

// metric returns the value of a series of reg (0 when absent).
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// TestRealAgent polls Debian's snmpd, started on a loopback port, for the machine's real
// interfaces (names as /sys/class/net has them, descriptions and speeds set by a
// pass-through script), with SNMPv2c and SNMPv3; then pauses it (the breaker opens, lookups
// keep answering from the cache) and restarts the cache from its file while the agent is
// still silent.
func TestRealAgent(t *testing.T) {
	ifaces := snmptest.Interfaces(t)
	indexes := make([]uint32, 0, len(ifaces))
	for index := range ifaces {
		indexes = append(indexes, index)
	}
	slices.Sort(indexes)
	aliases, speeds := map[uint32]string{}, map[uint32]uint32{}
	for i, index := range indexes {
		aliases[index] = fmt.Sprintf("Transit: Provider%d %s", i, ifaces[index])
		speeds[index] = 1000 * uint32(i+1)
	}
	agent := snmptest.Start(t, snmptest.Options{
		Community: "flowzero-ro",
		Users: []snmptest.User{
			{Name: "fz-sha-aes", AuthProtocol: "SHA", AuthPassphrase: "authpass123", PrivProtocol: "AES", PrivPassphrase: "privpass123"},
			{Name: "fz-sha256", AuthProtocol: "SHA-256", AuthPassphrase: "authpass456"},
		},
		SysName: "agent1.par1",
		Aliases: aliases,
		Speeds:  speeds,
	})
	port := uint16(agent.Addr.Port)
	path := filepath.Join(t.TempDir(), "snmp-cache.json")
	v2c := netip.MustParseAddr("127.0.0.1")
	v3priv := netip.MustParseAddr("192.0.2.2")
	v3auth := netip.MustParseAddr("192.0.2.3")
	v3bad := netip.MustParseAddr("192.0.2.4")
	cfg := snmp.DefaultConfiguration()
	cfg.Credentials = map[string]snmp.Credentials{
		// The first community is refused (no answer): the second is tried.
		"127.0.0.1/32": {Communities: snmp.Strings{"wrong", "flowzero-ro"}},
		"192.0.2.2/32": {UserName: "fz-sha-aes", AuthenticationProtocol: mustAuth(t, "SHA"), AuthenticationPassphrase: "authpass123",
			PrivacyProtocol: mustPriv(t, "AES"), PrivacyPassphrase: "privpass123"},
		"192.0.2.3/32": {UserName: "fz-sha256", AuthenticationProtocol: mustAuth(t, "SHA256"), AuthenticationPassphrase: "authpass456"},
		"192.0.2.4/32": {UserName: "fz-sha256", AuthenticationProtocol: mustAuth(t, "SHA256"), AuthenticationPassphrase: "not-the-passphrase"},
	}
	cfg.Ports = map[string]uint16{"127.0.0.1": port}
	cfg.Agents = map[string]string{"192.0.2.0/24": agent.Addr.String()}
	cfg.PollerTimeout = 300 * time.Millisecond
	cfg.PollerRetries = 0
	cfg.MaxBatchRequests = 3
	cfg.BreakerFailures = 2
	cfg.BreakerCooldown = 500 * time.Millisecond
	cfg.CacheCheckInterval = 100 * time.Millisecond
	cfg.CachePersistFile = path

	reg := prometheus.NewRegistry()
	c, err := snmp.New(reg, cfg, snmp.Dependencies{Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	check := func(c *snmp.Cache, exporter netip.Addr) {
		t.Helper()
		for i, index := range indexes {
			var a snmp.Answer
			testutil.WaitUntil(t, fmt.Sprintf("interface %d of %s", index, exporter), func() bool {
				var ok bool
				a, ok = c.Lookup(exporter, index)
				return ok
			})
			want := snmp.Answer{
				ExporterName: "agent1.par1",
				Interface:    snmp.Interface{Name: ifaces[index], Description: aliases[index], Speed: 1000 * uint32(i+1)},
				Found:        true,
			}
			if a != want {
				t.Errorf("%s, interface %d: %+v, want %+v", exporter, index, a, want)
			}
		}
	}
	for _, exporter := range []netip.Addr{v2c, v3priv, v3auth} {
		check(c, exporter)
	}
	// An interface the agent does not have.
	testutil.WaitUntil(t, "interface 999999", func() bool {
		a, ok := c.Lookup(v2c, 999999)
		return ok && !a.Found && a.ExporterName == "agent1.par1"
	})

	// A wrong passphrase: every poll fails, the breaker opens.
	c.Lookup(v3bad, indexes[0])
	testutil.WaitUntil(t, "the breaker of the exporter with a wrong passphrase", func() bool { return c.BreakerOpen(v3bad) })
	if n := metric(t, reg, "flowzero_enrich_snmp_poll_errors_total", "exporter", "192.0.2.4"); n < 2 {
		t.Errorf("%v poll errors for a wrong passphrase", n)
	}
	if a, ok := c.Lookup(v3bad, indexes[0]); ok {
		t.Errorf("answer with a wrong passphrase: %+v", a)
	}

	// The agent stops answering: polls time out, the breaker opens, and lookups keep
	// answering from the cache at once.
	agent.Pause(t)
	c.Lookup(v2c, 4242)
	testutil.WaitUntil(t, "the breaker of the silent agent", func() bool { return c.BreakerOpen(v2c) })
	if n := metric(t, reg, "flowzero_enrich_snmp_breaker_open", "exporter", "127.0.0.1"); n != 1 {
		t.Errorf("breaker_open = %v", n)
	}
	if n := metric(t, reg, "flowzero_enrich_snmp_breaker_trips_total", "exporter", "127.0.0.1"); n != 1 {
		t.Errorf("breaker_trips_total = %v", n)
	}
	for _, index := range indexes {
		if a, ok := c.Lookup(v2c, index); !ok || a.Interface.Name != ifaces[index] {
			t.Errorf("interface %d while the agent is silent: %+v, %v", index, a, ok)
		}
	}

	// A restart while the agent is still silent is served from the cache file.
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	reg2 := prometheus.NewRegistry()
	c2, err := snmp.New(reg2, cfg, snmp.Dependencies{Clock: testutil.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	for i, index := range indexes {
		for _, exporter := range []netip.Addr{v2c, v3priv, v3auth} {
			a, ok := c2.Lookup(exporter, index)
			want := snmp.Answer{ExporterName: "agent1.par1", Interface: snmp.Interface{Name: ifaces[index], Description: aliases[index], Speed: 1000 * uint32(i+1)}, Found: true}
			if !ok || a != want {
				t.Errorf("after restart, %s interface %d: %+v, %v", exporter, index, a, ok)
			}
		}
	}
	if n := metric(t, reg2, "flowzero_enrich_snmp_polls_total"); n != 0 {
		t.Errorf("%v polls answered by a silent agent", n)
	}
	if n := metric(t, reg2, "flowzero_enrich_snmp_cache_entries"); n < float64(3*len(indexes)) {
		t.Errorf("%v entries loaded", n)
	}

	// The agent answers again: the interface asked meanwhile is polled once the cooldown
	// ends and the breaker closes.
	agent.Resume(t)
	c2.Lookup(v2c, 4242)
	testutil.WaitUntil(t, "the answer for the interface asked while the agent was silent", func() bool {
		a, ok := c2.Lookup(v2c, 4242)
		return ok && !a.Found
	})
	if c2.BreakerOpen(v2c) {
		t.Error("breaker still open")
	}
}

func mustAuth(t *testing.T, name string) snmp.AuthProtocol {
	t.Helper()
	var p snmp.AuthProtocol
	if err := p.UnmarshalText([]byte(name)); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustPriv(t *testing.T, name string) snmp.PrivProtocol {
	t.Helper()
	var p snmp.PrivProtocol
	if err := p.UnmarshalText([]byte(name)); err != nil {
		t.Fatal(err)
	}
	return p
}
