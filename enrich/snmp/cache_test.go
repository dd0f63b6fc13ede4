package snmp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/internal/config"
	"flowzero/internal/testutil"
)

// fakeAgents answers polls from a table, or fails while down, and records the requests.
type fakeAgents struct {
	mu       sync.Mutex
	down     bool
	sysName  string
	ifaces   map[uint32]Interface
	requests [][]uint32
	targets  []netip.AddrPort
	creds    []*Credentials
	// block, when set, holds every poll until it is closed.
	block    chan struct{}
	inFlight int
	maxIn    int
}

func (f *fakeAgents) poll(ctx context.Context, target netip.AddrPort, creds *Credentials, indexes []uint32) (pollResult, error) {
	f.mu.Lock()
	f.requests = append(f.requests, slices.Clone(indexes))
	f.targets = append(f.targets, target)
	f.creds = append(f.creds, creds)
	f.inFlight++
	f.maxIn = max(f.maxIn, f.inFlight)
	block := f.block
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return pollResult{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return pollResult{}, errors.New("request timeout (after 1 retries)")
	}
	res := pollResult{sysName: f.sysName, hasSysName: true, interfaces: map[uint32]polledInterface{}}
	for _, index := range indexes {
		if i, ok := f.ifaces[index]; ok {
			res.interfaces[index] = polledInterface{iface: i, found: true}
		} else {
			res.interfaces[index] = polledInterface{} // noSuchInstance
		}
	}
	return res, nil
}

func (f *fakeAgents) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

type fixture struct {
	c       *Cache
	agents  *fakeAgents
	clock   *testutil.ManualClock
	reg     *prometheus.Registry
	mu      sync.Mutex
	updates []Update
}

func newFixture(t *testing.T, edit func(*Configuration)) *fixture {
	t.Helper()
	cfg := DefaultConfiguration()
	cfg.CacheCheckInterval = time.Hour // the test calls check itself
	if edit != nil {
		edit(&cfg)
	}
	f := &fixture{
		agents: &fakeAgents{sysName: "edge1.par1", ifaces: map[uint32]Interface{}},
		clock:  testutil.NewManualClock(),
		reg:    prometheus.NewRegistry(),
	}
	for i := uint32(1); i <= 40; i++ {
		f.agents.ifaces[i] = Interface{Name: fmt.Sprintf("et-0/0/%d", i), Description: fmt.Sprintf("port %d", i), Speed: 10000}
	}
	c, err := New(f.reg, cfg, Dependencies{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	c.poll = f.agents.poll
	c.OnUpdate(func(u Update) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.updates = append(f.updates, u)
	})
	f.c = c
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return f
}

// waitUpdates waits until the OnUpdate function has been told of updates for which done
// returns true and returns them all: a poller stores an answer, then calls it after
// releasing the cache's lock, so an answer in the cache does not mean its update was told.
func (f *fixture) waitUpdates(t *testing.T, what string, done func([]Update) bool) []Update {
	t.Helper()
	var updates []Update
	testutil.WaitUntil(t, what, func() bool {
		f.mu.Lock()
		updates = slices.Clone(f.updates)
		f.mu.Unlock()
		return done(updates)
	})
	return updates
}

func (f *fixture) waitFor(t *testing.T, exporter netip.Addr, index uint32) Answer {
	t.Helper()
	var a Answer
	testutil.WaitUntil(t, fmt.Sprintf("interface %d of %s in the cache", index, exporter), func() bool {
		var ok bool
		f.c.mu.Lock()
		e := f.c.exporters[exporter.Unmap()]
		if e != nil {
			if en, found := e.entries[index]; found {
				a, ok = Answer{ExporterName: e.sysName, Interface: en.iface, Found: en.found}, true
			}
		}
		f.c.mu.Unlock()
		return ok
	})
	return a
}

var exporter1 = netip.MustParseAddr("192.0.2.1")

func TestLookup(t *testing.T) {
	f := newFixture(t, nil)
	// A miss answers at once and queues a poll.
	if a, ok := f.c.Lookup(exporter1, 3); ok || a != (Answer{}) {
		t.Fatalf("first lookup: %+v, %v", a, ok)
	}
	want := Answer{ExporterName: "edge1.par1", Interface: Interface{Name: "et-0/0/3", Description: "port 3", Speed: 10000}, Found: true}
	if got := f.waitFor(t, exporter1, 3); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// IPv4-mapped addresses are the same exporter.
	if a, ok := f.c.Lookup(netip.MustParseAddr("::ffff:192.0.2.1"), 3); !ok || a != want {
		t.Errorf("hit: %+v, %v", a, ok)
	}
	updates := f.waitUpdates(t, "the update", func(u []Update) bool { return len(u) > 0 })
	if len(updates) != 1 || !updates[0].ExporterName || !slices.Equal(updates[0].Indexes, []uint32{3}) || updates[0].Exporter != exporter1 {
		t.Errorf("updates: %+v", updates)
	}
	// An interface the agent does not have is cached as not found.
	f.c.Lookup(exporter1, 999)
	if got := f.waitFor(t, exporter1, 999); got != (Answer{ExporterName: "edge1.par1"}) {
		t.Errorf("unknown interface: %+v", got)
	}
	if name, ok := f.c.ExporterName(exporter1); !ok || name != "edge1.par1" {
		t.Errorf("ExporterName: %q, %v", name, ok)
	}
	if h, m := promtest.ToFloat64(f.c.metrics.hits), promtest.ToFloat64(f.c.metrics.misses); h != 1 || m != 2 {
		t.Errorf("%v hits, %v misses", h, m)
	}
	if n := promtest.ToFloat64(f.c.metrics.entries); n != 2 {
		t.Errorf("%v entries", n)
	}
}

func TestExporterNameAlone(t *testing.T) {
	f := newFixture(t, nil)
	if _, ok := f.c.ExporterName(exporter1); ok {
		t.Fatal("name known before any poll")
	}
	testutil.WaitUntil(t, "the sysName", func() bool {
		name, ok := f.c.ExporterName(exporter1)
		return ok && name == "edge1.par1"
	})
	if r := f.agents.requests[0]; len(r) != 0 {
		t.Errorf("sysName poll asked for interfaces %v", r)
	}
}

// A sysName-only poll (an exporter whose flows name no interface SNMP is asked about) that
// fails is retried once the breaker's cooldown ends, and the exporter is not forgotten
// meanwhile.
func TestExporterNameRetried(t *testing.T) {
	f := newFixture(t, func(c *Configuration) { c.BreakerFailures = 1; c.BreakerCooldown = time.Minute })
	f.agents.mu.Lock()
	f.agents.down = true
	f.agents.mu.Unlock()
	if _, ok := f.c.ExporterName(exporter1); ok {
		t.Fatal("name known before any poll")
	}
	testutil.WaitUntil(t, "the failed poll", func() bool { return f.c.BreakerOpen(exporter1) && !f.inFlight(exporter1) })
	f.agents.mu.Lock()
	f.agents.down = false
	f.agents.mu.Unlock()
	f.c.check() // cooldown not over: the exporter waits, with its sysName queued
	if n := f.agents.requestCount(); n != 1 {
		t.Fatalf("%d polls during the cooldown", n)
	}
	f.clock.Advance(time.Minute)
	f.c.check()
	testutil.WaitUntil(t, "the sysName after the cooldown", func() bool {
		name, ok := f.c.ExporterName(exporter1)
		return ok && name == "edge1.par1"
	})
}

// An exporter whose sysName is known and which has no interface entry keeps its sysName
// while it is used, whatever its agent does, and forgets it after cache-duration unused.
func TestExporterNameKept(t *testing.T) {
	f := newFixture(t, func(c *Configuration) { c.CacheDuration = 2 * time.Hour })
	f.c.ExporterName(exporter1)
	testutil.WaitUntil(t, "the sysName", func() bool {
		name, ok := f.c.ExporterName(exporter1)
		return ok && name == "edge1.par1" && !f.inFlight(exporter1)
	})
	f.agents.mu.Lock()
	f.agents.down = true
	f.agents.mu.Unlock()
	for range 3 {
		f.clock.Advance(time.Hour)
		f.c.Touch(exporter1) // flows without SNMP interfaces
		f.c.check()
		if name, ok := f.c.ExporterName(exporter1); !ok || name != "edge1.par1" {
			t.Fatalf("used, agent down: ExporterName = %q, %v; want the last good answer", name, ok)
		}
	}
	if n := f.agents.requestCount(); n != 1 {
		t.Errorf("%d polls for a known sysName", n)
	}
	f.clock.Advance(2 * time.Hour)
	f.c.check()
	f.c.mu.Lock()
	_, kept := f.c.exporters[exporter1]
	f.c.mu.Unlock()
	if kept {
		t.Error("exporter kept after cache-duration unused")
	}
	// Touch without indexes does not create an exporter.
	f.c.Touch(exporter1)
	f.c.mu.Lock()
	_, kept = f.c.exporters[exporter1]
	f.c.mu.Unlock()
	if kept {
		t.Error("Touch without indexes created the exporter")
	}
}

func (f *fixture) inFlight(exporter netip.Addr) bool {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	e := f.c.exporters[exporter]
	return e != nil && (e.inFlight || e.queued)
}

func TestBatches(t *testing.T) {
	f := newFixture(t, func(c *Configuration) { c.MaxBatchRequests = 10 })
	f.agents.block = make(chan struct{})
	// The first poll holds the exporter; the 25 others wait and go in batches of 10.
	f.c.Lookup(exporter1, 40)
	testutil.WaitUntil(t, "the first poll", func() bool { return f.agents.requestCount() == 1 })
	for i := uint32(1); i <= 25; i++ {
		f.c.Lookup(exporter1, i)
	}
	close(f.agents.block)
	for i := uint32(1); i <= 25; i++ {
		f.waitFor(t, exporter1, i)
	}
	f.agents.mu.Lock()
	defer f.agents.mu.Unlock()
	want := [][]uint32{{40}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, {21, 22, 23, 24, 25}}
	if fmt.Sprint(f.agents.requests) != fmt.Sprint(want) {
		t.Errorf("requests %v, want %v", f.agents.requests, want)
	}
}

// Flows missing an interface whose poll is in flight do not queue it again: the agent is
// asked once. Another interface missed meanwhile waits for the next request.
func TestMissWhilePolledAskedOnce(t *testing.T) {
	f := newFixture(t, nil)
	f.agents.block = make(chan struct{})
	f.c.Lookup(exporter1, 5)
	testutil.WaitUntil(t, "the first poll", func() bool { return f.agents.requestCount() == 1 })
	f.c.Lookup(exporter1, 5)
	f.c.ExporterName(exporter1)
	f.c.Lookup(exporter1, 6)
	f.c.Lookup(exporter1, 5)
	close(f.agents.block)
	f.waitFor(t, exporter1, 5)
	f.waitFor(t, exporter1, 6)
	testutil.WaitUntil(t, "the polls to end", func() bool { return !f.inFlight(exporter1) })
	f.agents.mu.Lock()
	defer f.agents.mu.Unlock()
	if want := [][]uint32{{5}, {6}}; fmt.Sprint(f.agents.requests) != fmt.Sprint(want) {
		t.Errorf("requests %v, want %v", f.agents.requests, want)
	}
}

// An agent answering tooBig gets the same interfaces in requests half as large, without its
// breaker counting it, down to one interface per request, which then fails as any poll.
func TestTooBigHalvesBatch(t *testing.T) {
	f := newFixture(t, func(c *Configuration) { c.MaxBatchRequests = 10; c.BreakerFailures = 2 })
	fits := 4 // the most interfaces an answer holds
	f.c.poll = func(ctx context.Context, target netip.AddrPort, creds *Credentials, indexes []uint32) (pollResult, error) {
		f.agents.mu.Lock()
		tooBig := len(indexes) > fits
		if tooBig {
			f.agents.requests = append(f.agents.requests, slices.Clone(indexes))
		}
		f.agents.mu.Unlock()
		if tooBig {
			return pollResult{}, errTooBig
		}
		return f.agents.poll(ctx, target, creds, indexes)
	}
	f.agents.block = make(chan struct{})
	f.c.Lookup(exporter1, 40) // holds the exporter while the 10 others queue
	testutil.WaitUntil(t, "the first poll", func() bool { return f.agents.requestCount() == 1 })
	for i := uint32(1); i <= 10; i++ {
		f.c.Lookup(exporter1, i)
	}
	close(f.agents.block)
	for i := uint32(1); i <= 10; i++ {
		f.waitFor(t, exporter1, i)
	}
	f.agents.mu.Lock()
	requests := fmt.Sprint(f.agents.requests)
	f.agents.mu.Unlock()
	if want := "[[40] [1 2 3 4 5 6 7 8 9 10] [1 2 3 4 5] [1 2] [3 4] [5 6] [7 8] [9 10]]"; requests != want {
		t.Errorf("requests %s, want %s", requests, want)
	}
	if n := promtest.ToFloat64(f.c.metrics.tooBig.WithLabelValues("192.0.2.1")); n != 2 {
		t.Errorf("%v tooBig counted, want 2", n)
	}
	if n := promtest.ToFloat64(f.c.metrics.errors.WithLabelValues("192.0.2.1")); n != 0 || f.c.BreakerOpen(exporter1) {
		t.Errorf("tooBig counted as %v failures (breaker open: %v)", n, f.c.BreakerOpen(exporter1))
	}
	// Not even one interface fits: a failure, which opens the breaker as any other.
	fits = 0
	f.c.Lookup(exporter1, 20)
	testutil.WaitUntil(t, "the breaker", func() bool { return f.c.BreakerOpen(exporter1) })
	if n := promtest.ToFloat64(f.c.metrics.errors.WithLabelValues("192.0.2.1")); n != 2 {
		t.Errorf("%v failures, want 2", n)
	}
}

// An agent answering a refresh with values of the wrong type does not erase the previous
// answer: it is kept, and the bad answer counted.
func TestWrongTypesKeepLastAnswer(t *testing.T) {
	f := newFixture(t, nil)
	f.c.Lookup(exporter1, 3)
	good := f.waitFor(t, exporter1, 3)
	if !good.Found {
		t.Fatal("not found")
	}
	f.c.poll = func(ctx context.Context, target netip.AddrPort, creds *Credentials, indexes []uint32) (pollResult, error) {
		f.agents.mu.Lock()
		f.agents.requests = append(f.agents.requests, slices.Clone(indexes))
		f.agents.mu.Unlock()
		vars := []gosnmp.SnmpPDU{{Name: "." + oidSysName, Type: gosnmp.Integer, Value: 7}}
		for _, i := range indexes {
			for _, oid := range interfaceOIDs {
				vars = append(vars, gosnmp.SnmpPDU{Name: fmt.Sprintf(".%s.%d", oid, i), Type: gosnmp.Integer, Value: -1})
			}
		}
		return decodeAnswer(vars, indexes), nil
	}
	f.clock.Advance(31 * time.Minute)
	f.c.Touch(exporter1, 3)
	f.c.check()
	bad := f.c.metrics.badAnswers.WithLabelValues("192.0.2.1")
	testutil.WaitUntil(t, "the bad answer counted", func() bool { return promtest.ToFloat64(bad) == 2 }) // sysName and interface 3
	if a, ok := f.c.Lookup(exporter1, 3); !ok || a != good {
		t.Errorf("after a refresh answered with wrong types: %+v, %v; want %+v", a, ok, good)
	}
	// It is asked again at the next check.
	f.c.check()
	testutil.WaitUntil(t, "the second refresh", func() bool { return promtest.ToFloat64(bad) == 4 })
	if f.c.BreakerOpen(exporter1) {
		t.Error("wrong types opened the breaker")
	}
}

func TestConcurrentPollsBound(t *testing.T) {
	f := newFixture(t, func(c *Configuration) { c.Workers = 2 })
	f.agents.block = make(chan struct{})
	for i := range 6 {
		f.c.Lookup(netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}), 1)
	}
	testutil.WaitUntil(t, "two polls in flight", func() bool { return f.agents.requestCount() == 2 })
	close(f.agents.block)
	for i := range 6 {
		f.waitFor(t, netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}), 1)
	}
	if f.agents.maxIn != 2 {
		t.Errorf("%d polls in flight at once, want 2", f.agents.maxIn)
	}
}

func TestQueueBound(t *testing.T) {
	f := newFixture(t, func(c *Configuration) { c.QueueSize = 5 })
	f.agents.block = make(chan struct{})
	f.c.Lookup(exporter1, 1)
	testutil.WaitUntil(t, "the first poll", func() bool { return f.agents.requestCount() == 1 })
	for i := uint32(2); i <= 10; i++ {
		f.c.Lookup(exporter1, i)
	}
	if n := promtest.ToFloat64(f.c.metrics.queueFull); n != 4 {
		t.Errorf("%v refused, want 4", n)
	}
	close(f.agents.block)
	f.waitFor(t, exporter1, 6)
	// Refused interfaces are queued when asked again.
	f.c.Lookup(exporter1, 10)
	f.waitFor(t, exporter1, 10)
}

func TestBreaker(t *testing.T) {
	f := newFixture(t, func(c *Configuration) {
		c.BreakerFailures = 3
		c.BreakerCooldown = time.Minute
	})
	reg := f.reg
	f.agents.down = true
	f.c.Lookup(exporter1, 1)
	testutil.WaitUntil(t, "the breaker to open", func() bool { return f.c.BreakerOpen(exporter1) })
	if n := f.agents.requestCount(); n != 3 {
		t.Errorf("%d polls before the breaker opened, want 3", n)
	}
	open := `
# HELP flowzero_enrich_snmp_breaker_open 1 while the exporter's circuit breaker is open: its agent did not answer breaker-failures polls in a row, and is not polled until the cooldown ends.
# TYPE flowzero_enrich_snmp_breaker_open gauge
flowzero_enrich_snmp_breaker_open{exporter="192.0.2.1"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(open), "flowzero_enrich_snmp_breaker_open"); err != nil {
		t.Error(err)
	}
	// Lookups answer at once while it is open, and send nothing.
	f.c.Lookup(exporter1, 2)
	f.c.check()
	if n := f.agents.requestCount(); n != 3 {
		t.Errorf("%d polls while open", n)
	}
	// After the cooldown one poll tries; it fails: open for twice as long.
	f.clock.Advance(time.Minute)
	f.c.check()
	testutil.WaitUntil(t, "the poll after the cooldown", func() bool { return f.agents.requestCount() == 4 })
	testutil.WaitUntil(t, "the failed try recorded", func() bool {
		f.c.mu.Lock()
		defer f.c.mu.Unlock()
		return f.c.exporters[exporter1].breaker.cooldown == 2*time.Minute && !f.c.exporters[exporter1].inFlight
	})
	f.clock.Advance(time.Minute)
	f.c.check()
	if n := f.agents.requestCount(); n != 4 {
		t.Errorf("%d polls one minute into the doubled cooldown", n)
	}
	// The agent answers again: the breaker closes and the waiting interfaces are polled.
	f.agents.mu.Lock()
	f.agents.down = false
	f.agents.mu.Unlock()
	f.clock.Advance(time.Minute)
	f.c.check()
	f.waitFor(t, exporter1, 1)
	f.waitFor(t, exporter1, 2)
	if f.c.BreakerOpen(exporter1) {
		t.Error("breaker still open")
	}
	if n := promtest.ToFloat64(f.c.metrics.breakerTrips.WithLabelValues("192.0.2.1")); n != 1 {
		t.Errorf("%v trips", n)
	}
	if n := promtest.ToFloat64(f.c.metrics.errors.WithLabelValues("192.0.2.1")); n != 4 {
		t.Errorf("%v errors", n)
	}
}

func TestRefreshAndExpiry(t *testing.T) {
	f := newFixture(t, func(c *Configuration) {
		c.CacheRefresh = 30 * time.Minute
		c.CacheDuration = 2 * time.Hour
	})
	f.c.Lookup(exporter1, 1)
	f.c.Lookup(exporter1, 2)
	f.waitFor(t, exporter1, 1)
	f.waitFor(t, exporter1, 2)
	// Interfaces 1 and 2 were asked in one request or two: wait for their updates.
	before := len(f.waitUpdates(t, "the updates of interfaces 1 and 2", func(updates []Update) bool {
		var indexes []uint32
		for _, u := range updates {
			indexes = append(indexes, u.Indexes...)
		}
		return slices.Contains(indexes, 1) && slices.Contains(indexes, 2)
	}))
	polls := f.agents.requestCount()
	// The agent renames interface 1; nothing asks before cache-refresh.
	f.agents.mu.Lock()
	f.agents.ifaces[1] = Interface{Name: "et-0/0/1", Description: "Transit: Cogent", Speed: 100000}
	f.agents.mu.Unlock()
	f.clock.Advance(29 * time.Minute)
	f.c.check()
	if n := f.agents.requestCount(); n != polls {
		t.Fatalf("refreshed before cache-refresh")
	}
	// Interface 1 is used, interface 2 is not; both are refreshed after cache-refresh.
	f.clock.Advance(time.Minute)
	f.c.Touch(exporter1, 1)
	f.c.check()
	testutil.WaitUntil(t, "the refreshed description", func() bool {
		a, _ := f.c.Lookup(exporter1, 1)
		return a.Interface.Description == "Transit: Cogent"
	})
	updates := f.waitUpdates(t, "the refresh's update", func(u []Update) bool { return len(u) > before })
	if refresh := updates[before:]; len(refresh) != 1 || !slices.Equal(refresh[0].Indexes, []uint32{1}) || refresh[0].ExporterName {
		t.Errorf("updates %+v, want one of interface 1 only", refresh)
	}
	// Interface 2, unused for cache-duration, is forgotten; interface 1 stays.
	f.clock.Advance(91 * time.Minute)
	f.c.Touch(exporter1, 1)
	f.c.check()
	f.c.mu.Lock()
	_, has1 := f.c.exporters[exporter1].entries[1]
	_, has2 := f.c.exporters[exporter1].entries[2]
	f.c.mu.Unlock()
	if !has1 || has2 {
		t.Errorf("after cache-duration: interface 1 kept %v, interface 2 kept %v", has1, has2)
	}
	if n := promtest.ToFloat64(f.c.metrics.refreshes); n < 2 {
		t.Errorf("%v refreshes", n)
	}
}

func TestCredentialsAgentsPorts(t *testing.T) {
	f := newFixture(t, func(c *Configuration) {
		c.Credentials = map[string]Credentials{
			"::/0":            {Communities: Strings{"public"}},
			"192.0.2.0/24":    {Communities: Strings{"private", "other"}},
			"192.0.2.128/25":  {UserName: "flowzero", AuthenticationProtocol: AuthProtocol(3), AuthenticationPassphrase: "authpass1"},
			"2001:db8::/32":   {Communities: Strings{"v6"}},
			"198.51.100.0/24": {UserName: "noauth"},
		}
		c.Agents = map[string]string{"192.0.2.129": "10.0.0.1", "192.0.2.130": "[2001:db8::9]:1161"}
		c.Ports = map[string]uint16{"::/0": 161, "192.0.2.128/25": 1161}
	})
	for _, tc := range []struct {
		exporter string
		target   string
		creds    string
	}{
		{"203.0.113.1", "203.0.113.1:161", "[public]"},
		{"192.0.2.1", "192.0.2.1:161", "[private other]"},
		{"192.0.2.129", "10.0.0.1:1161", "flowzero"},
		{"192.0.2.130", "[2001:db8::9]:1161", "flowzero"},
		{"2001:db8::1", "[2001:db8::1]:161", "[v6]"},
		{"198.51.100.7", "198.51.100.7:161", "noauth"},
	} {
		f.c.mu.Lock()
		e := f.c.exporter(netip.MustParseAddr(tc.exporter))
		f.c.mu.Unlock()
		creds := fmt.Sprint(e.creds.Communities)
		if e.creds.UserName != "" {
			creds = e.creds.UserName
		}
		if e.target.String() != tc.target || creds != tc.creds {
			t.Errorf("%s: agent %s with %s, want %s with %s", tc.exporter, e.target, creds, tc.target, tc.creds)
		}
	}
}

func TestNoCredentials(t *testing.T) {
	// Without credentials for an exporter, it is never polled.
	f := newFixture(t, func(c *Configuration) {
		c.Credentials = map[string]Credentials{"10.0.0.0/8": {Communities: Strings{"public"}}}
	})
	if _, ok := f.c.Lookup(exporter1, 1); ok {
		t.Fatal("hit")
	}
	f.c.check()
	if n := f.agents.requestCount(); n != 0 {
		t.Errorf("%d polls", n)
	}
}

func TestPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snmp-cache.json")
	f := newFixture(t, func(c *Configuration) { c.CachePersistFile = path })
	f.c.Lookup(exporter1, 1)
	f.c.Lookup(netip.MustParseAddr("2001:db8::1"), 7)
	f.c.Lookup(exporter1, 999)
	f.waitFor(t, exporter1, 1)
	f.waitFor(t, exporter1, 999)
	f.waitFor(t, netip.MustParseAddr("2001:db8::1"), 7)
	if err := f.c.Stop(); err != nil {
		t.Fatal(err)
	}
	// A new cache, whose agents never answer, serves the file's answers at once.
	g := newFixture(t, func(c *Configuration) { c.CachePersistFile = path })
	g.agents.down = true
	for _, tc := range []struct {
		exporter string
		index    uint32
		want     Answer
	}{
		{"192.0.2.1", 1, Answer{ExporterName: "edge1.par1", Interface: Interface{Name: "et-0/0/1", Description: "port 1", Speed: 10000}, Found: true}},
		{"192.0.2.1", 999, Answer{ExporterName: "edge1.par1"}},
		{"2001:db8::1", 7, Answer{ExporterName: "edge1.par1", Interface: Interface{Name: "et-0/0/7", Description: "port 7", Speed: 10000}, Found: true}},
	} {
		if a, ok := g.c.Lookup(netip.MustParseAddr(tc.exporter), tc.index); !ok || a != tc.want {
			t.Errorf("%s %d: %+v, %v", tc.exporter, tc.index, a, ok)
		}
	}
	if n := g.agents.requestCount(); n != 0 {
		t.Errorf("%d polls", n)
	}
	// Entries are polled again when older than cache-refresh.
	g.clock.Advance(31 * time.Minute)
	g.c.check()
	testutil.WaitUntil(t, "a refresh of the loaded entries", func() bool { return g.agents.requestCount() > 0 })
}

func TestLoadErrors(t *testing.T) {
	f := newFixture(t, nil)
	polled := f.clock.Now().UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, data, err string
		loaded          int
	}{
		{"not JSON", `{"format":`, "unexpected end of JSON input", 0},
		{"other format", `{"format":"flowzero-snmp-cache/2"}`, `format "flowzero-snmp-cache/2"`, 0},
		// Another version's layout is reported as its format, not as a JSON type error.
		{"other layout", `{"format":"flowzero-snmp-cache/2","exporters":{"192.0.2.7":{}}}`, `format "flowzero-snmp-cache/2"`, 0},
		{"no format", `{"exporters":[]}`, `format missing`, 0},
		{"exporters not a list", `{"format":"flowzero-snmp-cache/1","exporters":{}}`, `exporters: not a list`, 0},
		// One bad entry costs only itself.
		{"bad interface", `{"format":"flowzero-snmp-cache/1","exporters":[{"exporter":"192.0.2.9","name":"r1","name-polled":true,"interfaces":[` +
			`{"index":1,"name":"good","found":true,"polled":"` + polled + `"},{"index":2,"speed":-1,"found":true,"polled":"` + polled + `"}]}]}`,
			`exporters[0].interfaces[1]: json: cannot unmarshal number -1 into Go struct field persistInterface.speed of type uint32`, 1},
		{"bad exporter fields", `{"format":"flowzero-snmp-cache/1","exporters":[{"exporter":"192.0.2.10","name":5},{"exporter":"192.0.2.11","interfaces":[{"index":1,"polled":"` + polled + `"}]}]}`,
			`exporters[0]: json: cannot unmarshal number into Go struct field .name of type string`, 1},
		{"bad exporter", `{"format":"flowzero-snmp-cache/1","exporters":[{"exporter":"x"},{"exporter":"192.0.2.7","interfaces":[{"index":1,"name":"a","found":true,"polled":"` + polled + `"}]}]}`, `exporters[0].exporter: not an address: "x"`, 1},
		{"no polled time", `{"format":"flowzero-snmp-cache/1","exporters":[{"exporter":"192.0.2.8","interfaces":[{"index":1},{"index":2,"polled":"` + polled + `"}]}]}`, `exporters[0].interfaces[0].polled: missing`, 1},
	} {
		n, err := f.c.load([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.err) || n != tc.loaded {
			t.Errorf("%s: %d loaded, error %v, want %d and %q", tc.name, n, err, tc.loaded, tc.err)
		}
	}
	if n := promtest.ToFloat64(f.c.metrics.loadErrors); n != 9 {
		t.Errorf("%v load errors", n)
	}
	// A missing file is not an error at start.
	if _, err := f.c.Load(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestClean(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	if got := clean(long); len(got) != 254 || !strings.HasPrefix(long, got) {
		t.Errorf("clean cut %d bytes", len(got))
	}
	if got := clean("ge-0/0/1\xff"); got != "ge-0/0/1\uFFFD" {
		t.Errorf("invalid UTF-8: %q", got)
	}
}

func TestConfigurationErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"credentials:\n  300.0.0.0/8:\n    communities: x\n", "credentials.300.0.0.0/8"},
		{"credentials:\n  ::/0:\n    communities: []\n", "credentials.::/0.communities"},
		{"credentials:\n  ::/0:\n    communities: [public]\n    user-name: bob\n", "credentials.::/0.communities"},
		{"credentials:\n  10.0.0.0/8:\n    user-name: bob\n    authentication-protocol: SHA\n    authentication-passphrase: short\n", "credentials.10.0.0.0/8.authentication-passphrase"},
		{"credentials:\n  10.0.0.0/8:\n    user-name: bob\n    privacy-protocol: AES\n    privacy-passphrase: longenough\n", "credentials.10.0.0.0/8.privacy-protocol"},
		{"credentials:\n  10.0.0.0/8:\n    user-name: bob\n    authentication-protocol: SHA1\n", "SHA1"},
		{"agents:\n  192.0.2.1: 10.0.0.1:0\n", "agents.192.0.2.1"},
		{"agents:\n  192.0.2.1: router1\n", "agents.192.0.2.1"},
		{"ports:\n  ::/0: 0\n", "ports.::/0"},
		// Two keys for one prefix, or a prefix with host bits: which applies would be a guess.
		{"credentials:\n  192.0.2.0/24: {communities: a}\n  ::ffff:192.0.2.0/120: {communities: b}\n", `credentials.::ffff:192.0.2.0/120: same prefix as "192.0.2.0/24"`},
		{"credentials:\n  192.0.2.1/24: {communities: a}\n", "credentials.192.0.2.1/24: 192.0.2.1/24 has host bits set (192.0.2.0/24 or 192.0.2.1/32?)"},
		{"agents:\n  192.0.2.1: 10.0.0.1\n  ::ffff:192.0.2.1: 10.0.0.2\n", `agents.::ffff:192.0.2.1: same prefix as "192.0.2.1"`},
		{"ports:\n  2001:db8::/32: 1161\n  2001:db8:0::/32: 1162\n", `ports.2001:db8::/32: same prefix as "2001:db8:0::/32"`},
		{"ports:\n  10.0.0.1/8: 1161\n", "ports.10.0.0.1/8"},
		{"max-batch-requests: 20\n", "max-batch-requests"},
		{"workers: 0\n", "workers"},
		{"poller-timeout: 0s\n", "poller-timeout"},
		{"breaker-failures: 0\n", "breaker-failures"},
	} {
		cfg := DefaultConfiguration()
		err := config.Decode([]byte(tc.yaml), &cfg)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: error %v does not name %s", tc.yaml, err, tc.key)
		}
	}
	// A community gosnmp cannot encode, named by its position, never printed.
	long := strings.Repeat("s", 128)
	cfg := DefaultConfiguration()
	err := config.Decode([]byte("credentials:\n  ::/0:\n    communities: [public, "+long+"]\n"), &cfg)
	if err == nil || !strings.Contains(err.Error(), "credentials.::/0.communities[1]: 128 bytes") || strings.Contains(err.Error(), long) {
		t.Errorf("128-byte community: %v", err)
	}
	cfg = DefaultConfiguration()
	if err := config.Decode([]byte("credentials:\n  ::/0:\n    communities: "+long[:127]+"\n"), &cfg); err != nil {
		t.Errorf("127-byte community: %v", err)
	}
	// A map written by the user replaces the default one.
	cfg = DefaultConfiguration()
	if err := config.Decode([]byte("credentials:\n  10.0.0.0/8: {communities: private}\nports:\n  10.0.0.0/8: 1161\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Credentials) != 1 || len(cfg.Ports) != 1 {
		t.Errorf("merged with the defaults: credentials %v, ports %v", slices.Collect(maps.Keys(cfg.Credentials)), cfg.Ports)
	}
	// A single community, protocols in any case.
	cfg = DefaultConfiguration()
	if err := config.Decode([]byte("credentials:\n  10.0.0.0/8:\n    communities: secret\n  10.1.0.0/16:\n    user-name: bob\n    authentication-protocol: sha256\n    authentication-passphrase: longenough\n    privacy-protocol: aes256c\n    privacy-passphrase: longenough\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if c := cfg.Credentials["10.0.0.0/8"].Communities; !slices.Equal(c, []string{"secret"}) {
		t.Errorf("communities %v", c)
	}
	if c := cfg.Credentials["10.1.0.0/16"]; c.AuthenticationProtocol != AuthProtocol(5) || c.PrivacyProtocol != PrivProtocol(7) {
		t.Errorf("protocols %v %v", c.AuthenticationProtocol, c.PrivacyProtocol)
	}
}

// FuzzLoad reads arbitrary cache files: an error, or entries that save and load again alike.
func FuzzLoad(f *testing.F) {
	now := testutil.Now().UTC()
	f.Add([]byte(`{"format":"flowzero-snmp-cache/1","saved":"` + now.Format(time.RFC3339) + `","exporters":[{"exporter":"192.0.2.1","name":"edge1","name-polled":true,"interfaces":[{"index":1,"name":"et-0/0/1","description":"Transit: Cogent","speed":100000,"found":true,"polled":"` + now.Format(time.RFC3339) + `"},{"index":2,"found":false,"polled":"` + now.Format(time.RFC3339) + `"}]},{"exporter":"2001:db8::1","interfaces":[]}]}`))
	f.Add([]byte(`{"format":"flowzero-snmp-cache/1","exporters":[{"exporter":"::ffff:192.0.2.1","name":"\xff\xfe","name-polled":true}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		clk := testutil.NewManualClock()
		c, err := New(nil, DefaultConfiguration(), Dependencies{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.load(data); err != nil && c.entries == 0 {
			return
		}
		path := filepath.Join(t.TempDir(), "cache.json")
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}
		c2, _ := New(nil, DefaultConfiguration(), Dependencies{Clock: clk})
		if _, err := c2.Load(path); err != nil {
			t.Fatalf("saved file does not load: %v", err)
		}
		if c2.entries != c.entries {
			t.Fatalf("%d entries saved, %d loaded", c.entries, c2.entries)
		}
	})
}
