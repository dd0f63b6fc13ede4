//go:build chdb

package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowzero/internal/clock"
	"flowzero/internal/testutil"
	"flowzero/query/internal/querytest"
	"flowzero/store/engine"
)

// The engine tests share one engine holding the data set (querytest.Dataset), anchored at
// the hour before the test clock's current one.
var (
	envOnce sync.Once
	envErr  error
	theEnv  *querytest.Env
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theEnv != nil {
		theEnv.Close()
	}
	os.Exit(code)
}

func env(t *testing.T) *querytest.Env {
	t.Helper()
	envOnce.Do(func() {
		theEnv, envErr = querytest.Start(testutil.Now().Truncate(time.Hour))
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return theEnv
}

// engineConfig is the configuration of the engine tests: queries and completion values may
// take the time a loaded machine (or faketime, make test-future) needs.
func engineConfig() Configuration {
	cfg := DefaultConfiguration()
	cfg.Timeout, cfg.CompletionTimeout = 5*time.Minute, 5*time.Minute
	return cfg
}

func newService(t *testing.T) (*Service, *querytest.Env) {
	t.Helper()
	e := env(t)
	s, err := New(engineConfig(), e.Catalog, e.Engine, testutil.Clock(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

// oracle sums the data set's flows in Go: per row key and bucket, the unit's value (bits,
// packets or flows) of the flows keep accepts, over w (start, interval, n buckets).
func oracle(flows []querytest.Flow, start time.Time, interval time.Duration, n int, u Unit,
	keep func(querytest.Flow) bool, key func(querytest.Flow) string) map[string][]float64 {
	out := map[string][]float64{}
	for _, f := range flows {
		if f.Time.Before(start) || !f.Time.Before(start.Add(time.Duration(n)*interval)) || (keep != nil && !keep(f)) {
			continue
		}
		k := ""
		if key != nil {
			k = key(f)
		}
		if out[k] == nil {
			out[k] = make([]float64, n)
		}
		b := int(f.Time.Sub(start) / interval)
		var v float64
		switch u {
		case UnitL3bps:
			v = float64(f.Bytes * f.SamplingRate * 8)
		case UnitL2bps:
			v = float64((f.Bytes + 38*f.Packets) * f.SamplingRate * 8)
		case UnitPps:
			v = float64(f.Packets * f.SamplingRate)
		case UnitFps:
			v = 1
		}
		out[k][b] += v
	}
	return out
}

func rates(values []float64, interval time.Duration) []float64 {
	out := make([]float64, len(values))
	for i, v := range values {
		out[i] = v / interval.Seconds()
	}
	return out
}

func closeTo(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !closeTo(a[i], b[i]) {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// asText is how the service shows an AS number: AS64500, with its name when the
// dictionary has one.
func asText(n uint32) string {
	if name, ok := querytest.ASNames[n]; ok {
		return fmt.Sprintf("AS%d: %s", n, name)
	}
	return fmt.Sprintf("AS%d", n)
}

func srcAS(f querytest.Flow) string { return asText(f.SrcAS) }

// checkLine compares the series of one axis with the oracle's: the rows kept are top (in
// order), the others fold into Other.
func checkLine(t *testing.T, res *LineResult, axis int, want map[string][]float64, top []string, interval time.Duration) {
	t.Helper()
	other := make([]float64, len(res.Time))
	hasOther := false
	for _, k := range keys(want) {
		if !slices.Contains(top, k) {
			hasOther = true
			for i, v := range want[k] {
				other[i] += v
			}
		}
	}
	var got []string
	for i, r := range res.Rows {
		if res.Axis[i] != axis {
			continue
		}
		name := strings.Join(r, ",")
		got = append(got, name)
		w, ok := want[name]
		if name == "Other" {
			w, ok = other, hasOther
		}
		if !ok {
			t.Errorf("axis %d: unexpected row %q", axis, name)
			continue
		}
		if !sameFloats(res.Points[i], rates(w, interval)) {
			t.Errorf("axis %d row %q:\n got %v\nwant %v", axis, name, res.Points[i], rates(w, interval))
		}
		st := statsOf(rates(w, interval))
		if !closeTo(res.Min[i], st.min) || !closeTo(res.Max[i], st.max) || !closeTo(res.Avg[i], st.avg) ||
			!closeTo(res.P95[i], st.p95) || !closeTo(res.Last[i], st.last) {
			t.Errorf("axis %d row %q: stats %v %v %v %v %v, want %+v", axis, name, res.Min[i], res.Max[i], res.Avg[i], res.P95[i], res.Last[i], st)
		}
	}
	wantRows := slices.Clone(top)
	if hasOther {
		wantRows = append(wantRows, "Other")
	}
	if !slices.Equal(got, wantRows) {
		t.Errorf("axis %d rows %q, want %q", axis, got, wantRows)
	}
}

func TestLineTotal(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-querytest.Recent)
	res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor}, Points: 200})
	if err != nil {
		t.Fatal(err)
	}
	if res.Table != "flows_1m" || res.Interval != 60 || len(res.Time) != 360 || !res.Time[0].Equal(start) {
		t.Fatalf("table %s, interval %d, %d points from %s", res.Table, res.Interval, len(res.Time), res.Time[0])
	}
	want := oracle(e.Flows, start, time.Minute, 360, UnitL3bps, nil, nil)
	checkLine(t, res, 1, want, []string{""}, time.Minute)
	var bytes float64
	for _, f := range e.Flows {
		if !f.Time.Before(start) {
			bytes += float64(f.Bytes * f.SamplingRate)
		}
	}
	if !closeTo(res.Total[0], bytes) || res.AxisNames[1] != "Direct" || len(res.Rows[0]) != 0 {
		t.Errorf("total %v, want %v bytes; axis names %v; rows %v", res.Total[0], bytes, res.AxisNames, res.Rows)
	}
}

// TestLineTopBy checks the rows each ranking keeps, and Other, on the minutes' table.
func TestLineTopBy(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-querytest.Recent)
	want := oracle(e.Flows, start, time.Minute, 360, UnitL3bps, nil, srcAS)
	for _, c := range []struct {
		topBy TopBy
		limit int
		top   []string
	}{
		{TopByAvg, 2, []string{asText(64502), asText(64500)}},
		{TopByAvg, 3, []string{asText(64502), asText(64500), asText(64504)}},
		{"", 1, []string{asText(64502)}},
		{TopByMax, 1, []string{asText(64504)}},
		{TopByMax, 2, []string{asText(64504), asText(64502)}},
		{TopByLast, 1, []string{asText(64504)}},
		{TopByP95, 2, []string{asText(64504), asText(64502)}},
		{TopByAvg, 10, []string{asText(64502), asText(64500), asText(64504), asText(64501), asText(64510), asText(64503)}},
	} {
		t.Run(fmt.Sprintf("%s-%d", c.topBy, c.limit), func(t *testing.T) {
			res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor,
				Dimensions: []string{"srcas"}, Limit: c.limit, TopBy: c.topBy}, Points: 360})
			if err != nil {
				t.Fatal(err)
			}
			if res.Table != "flows_1m" {
				t.Errorf("table %s", res.Table)
			}
			checkLine(t, res, 1, want, c.top, time.Minute)
		})
	}
}

// TestLineBidirectional checks the reverse axis: for each row of the direct one, the traffic
// of the other direction (DstAS for SrcAS, the filter's In and Out swapped).
func TestLineBidirectional(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-querytest.Recent)
	res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor,
		Dimensions: []string{"SrcAS"}, Limit: 2, Filter: "InIfBoundary = external"}, Points: 360, Bidirectional: true})
	if err != nil {
		t.Fatal(err)
	}
	direct := oracle(e.Flows, start, time.Minute, 360, UnitL3bps, func(f querytest.Flow) bool { return f.InBoundary == 1 }, srcAS)
	top := []string{asText(64502), asText(64500)}
	checkLine(t, res, 1, direct, top, time.Minute)
	reverse := oracle(e.Flows, start, time.Minute, 360, UnitL3bps, func(f querytest.Flow) bool { return f.OutBoundary == 1 },
		func(f querytest.Flow) string { return asText(f.DstAS) })
	// AS64502 receives nothing from outside: its reverse row is absent.
	checkLine(t, res, 2, reverse, []string{asText(64500)}, time.Minute)
	if res.AxisNames[2] != "Reverse" {
		t.Errorf("axis names %v", res.AxisNames)
	}
	if !strings.Contains(res.SQL, "OutIfBoundary = 'external'") {
		t.Errorf("reverse filter missing from %s", res.SQL)
	}
}

// TestLinePreviousPeriod checks the previous period: the day before for 6 hours, its total
// shifted onto the same times, with and without bidirectional.
func TestLinePreviousPeriod(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-querytest.Recent)
	res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor,
		Dimensions: []string{"SrcAS"}, Limit: 1, Filter: "InIfBoundary = external"}, Points: 360, PreviousPeriod: true, Bidirectional: true})
	if err != nil {
		t.Fatal(err)
	}
	external := func(f querytest.Flow) bool { return f.InBoundary == 1 }
	yesterday := start.Add(-24 * time.Hour)
	checkLine(t, res, 3, oracle(e.Flows, yesterday, time.Minute, 360, UnitL3bps, external, nil), []string{""}, time.Minute)
	checkLine(t, res, 4, oracle(e.Flows, yesterday, time.Minute, 360, UnitL3bps, func(f querytest.Flow) bool { return f.OutBoundary == 1 }, nil),
		[]string{""}, time.Minute)
	if res.AxisNames[3] != "Previous day" || res.AxisNames[4] != "Previous day, reverse" {
		t.Errorf("axis names %v", res.AxisNames)
	}
	// Two hours: the previous period is the day before as well; one hour: the hour before.
	res, err = s.Line(context.Background(), LineRequest{Common: Common{Start: e.Anchor.Add(-time.Hour), End: e.Anchor}, Points: 60, PreviousPeriod: true})
	if err != nil {
		t.Fatal(err)
	}
	checkLine(t, res, 3, oracle(e.Flows, e.Anchor.Add(-2*time.Hour), time.Minute, 60, UnitL3bps, nil, nil), []string{""}, time.Minute)
	if res.AxisNames[3] != "Previous hour" {
		t.Errorf("axis names %v", res.AxisNames)
	}
}

// TestLineUnits checks each unit against the oracle, flows per second included (the
// aggregated tables count flows).
func TestLineUnits(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-querytest.Recent)
	for _, u := range []Unit{UnitL3bps, UnitL2bps, UnitPps, UnitFps} {
		t.Run(string(u), func(t *testing.T) {
			res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor, Units: u,
				Dimensions: []string{"Proto"}}, Points: 200})
			if err != nil {
				t.Fatal(err)
			}
			table, interval := "flows_1m", time.Minute
			if res.Table != table || res.Interval != int64(interval/time.Second) {
				t.Fatalf("table %s, interval %d", res.Table, res.Interval)
			}
			want := oracle(e.Flows, start, interval, len(res.Time), u, nil, func(f querytest.Flow) string {
				return map[uint64]string{6: "TCP", 17: "UDP"}[f.Proto]
			})
			top := []string{"TCP", "UDP"}
			if u == UnitPps {
				top = []string{"UDP", "TCP"} // 2 packets sampled 1/1000 a minute against 18 sampled 1/100
			}
			checkLine(t, res, 1, want, top, interval)
			var total float64
			for _, v := range want[top[0]] {
				total += v
			}
			if u == UnitL3bps || u == UnitL2bps {
				total /= 8
			}
			if !closeTo(res.Total[0], total) {
				t.Errorf("total %v, want %v", res.Total[0], total)
			}
		})
	}
	t.Run("inl2%", func(t *testing.T) {
		res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor, Units: UnitInL2Pct,
			Dimensions: []string{"ExporterName"}}, Points: 360})
		if err != nil {
			t.Fatal(err)
		}
		// Per bucket: the L2 bits × 100 / speed summed, over the distinct interfaces.
		want := map[string][]float64{}
		ifaces := map[string][]map[uint32]bool{}
		for _, f := range e.Flows {
			if f.Time.Before(start) || !f.Time.Before(e.Anchor) {
				continue
			}
			k := f.ExporterName
			if want[k] == nil {
				want[k] = make([]float64, 360)
				ifaces[k] = make([]map[uint32]bool, 360)
			}
			b := int(f.Time.Sub(start) / time.Minute)
			want[k][b] += float64((f.Bytes+38*f.Packets)*f.SamplingRate*8) * 100 / float64(f.InIfSpeed*1000000)
			if ifaces[k][b] == nil {
				ifaces[k][b] = map[uint32]bool{}
			}
			ifaces[k][b][f.InIf] = true
		}
		for k := range want {
			for b := range want[k] {
				if n := len(ifaces[k][b]); n > 0 {
					want[k][b] /= float64(n)
				}
			}
		}
		checkLine(t, res, 1, want, []string{"edge2", "edge1"}, time.Minute)
	})
}

// TestLineTruncate checks address dimensions cut to prefixes, which need the flows table.
func TestLineTruncate(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-time.Hour)
	res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor,
		Dimensions: []string{"SrcAddr"}, Truncate4: 24, Truncate6: 48, Limit: 2}, Points: 60})
	if err != nil {
		t.Fatal(err)
	}
	if res.Table != "flows" || res.Interval != 60 {
		t.Fatalf("table %s, interval %d", res.Table, res.Interval)
	}
	want := oracle(e.Flows, start, time.Minute, 60, UnitL3bps, nil, func(f querytest.Flow) string {
		if f.SrcAddr.Is4() {
			return netip.PrefixFrom(f.SrcAddr, 24).Masked().String()
		}
		return netip.PrefixFrom(f.SrcAddr, 48).Masked().String()
	})
	checkLine(t, res, 1, want, []string{"198.51.100.0/24", "203.0.113.0/24"}, time.Minute)
	// Without truncation, addresses as text.
	res, err = s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor,
		Dimensions: []string{"SrcAddr"}, Limit: 20, Filter: "EType = IPv6"}, Points: 60})
	if err != nil {
		t.Fatal(err)
	}
	want = oracle(e.Flows, start, time.Minute, 60, UnitL3bps, func(f querytest.Flow) bool { return f.EType == 0x86dd },
		func(f querytest.Flow) string { return f.SrcAddr.String() })
	checkLine(t, res, 1, want, []string{"2001:db8:1::1", "2001:db8:1::2", "2001:db8:1::3"}, time.Minute)
}

// TestLineFilters runs filters of every kind of column against the oracle.
func TestLineFilters(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-time.Hour)
	for _, c := range []struct {
		filter string
		table  string
		keep   func(querytest.Flow) bool
	}{
		{"InIfBoundary = external AND Proto = TCP", "flows_1m", func(f querytest.Flow) bool { return f.InBoundary == 1 && f.Proto == 6 }},
		{"SrcAS IN (AS64500, 64502) OR ExporterName = 'edge2'", "flows_1m", func(f querytest.Flow) bool {
			return f.SrcAS == 64500 || f.SrcAS == 64502 || f.ExporterName == "edge2"
		}},
		{"NOT SrcAS = AS64500", "flows_1m", func(f querytest.Flow) bool { return f.SrcAS != 64500 }},
		{"ExporterAddress << 192.0.2.0/31", "flows_1m", func(f querytest.Flow) bool { return f.Exporter.String() == "192.0.2.1" }},
		{"ExporterAddress = 192.0.2.2", "flows_1m", func(f querytest.Flow) bool { return f.ExporterName == "edge2" }},
		{`InIfName LIKE "et-%" AND OutIfName UNLIKE "%/1"`, "flows_1m", func(f querytest.Flow) bool {
			return strings.HasPrefix(f.InIfName, "et-") && !strings.HasSuffix(f.OutIfName, "/1")
		}},
		{`InIfName ILIKE "XE-%"`, "flows_1m", func(f querytest.Flow) bool { return f.ExporterName == "edge2" }},
		{`SrcCountry = "FR"`, "flows_1m", func(f querytest.Flow) bool { return f.SrcCountry == "FR" }},
		{`SrcCountry NOTIN ("FR", "DE")`, "flows_1m", func(f querytest.Flow) bool { return f.SrcCountry == "US" }},
		{"EType = IPv6", "flows_1m", func(f querytest.Flow) bool { return f.EType == 0x86dd }},
		{"InIfSpeed > OutIfSpeed", "flows_1m", func(f querytest.Flow) bool { return f.InIfSpeed > f.OutIfSpeed }},
		{"Dst1stAS = AS64511", "flows_1m", func(f querytest.Flow) bool { return len(f.DstASPath) > 0 && f.DstASPath[0] == 64511 }},
		{"SrcAddr << 198.51.100.0/30", "flows", func(f querytest.Flow) bool {
			return netip.MustParsePrefix("198.51.100.0/30").Contains(f.SrcAddr)
		}},
		{"SrcAddr = 2001:db8:1::2 OR DstAddr = 203.0.113.99", "flows", func(f querytest.Flow) bool {
			return f.SrcAddr.String() == "2001:db8:1::2" || f.DstAddr.String() == "203.0.113.99"
		}},
		{"SrcAddr IN (198.51.100.20, 2001:db8:1::/48)", "flows", func(f querytest.Flow) bool {
			return f.SrcAddr.String() == "198.51.100.20" || f.EType == 0x86dd
		}},
		{"SrcPort < DstPort", "flows", func(f querytest.Flow) bool { return f.SrcPort < f.DstPort }},
		{"DstPort >= 40000 AND DstPort <= 50050", "flows", func(f querytest.Flow) bool { return f.DstPort >= 40000 && f.DstPort <= 50050 }},
		{"DstASPath = AS174", "flows", func(f querytest.Flow) bool { return slices.Contains(f.DstASPath, 174) }},
		{"DstASPath NOTIN (AS174, AS3356)", "flows", func(f querytest.Flow) bool {
			return !slices.Contains(f.DstASPath, 174) && !slices.Contains(f.DstASPath, 3356)
		}},
		{"SrcCommunities = 65000:100", "flows", func(f querytest.Flow) bool { return len(f.SrcCommunities) > 0 }},
		{"SrcCommunities = 65000:1:2", "flows", func(f querytest.Flow) bool { return len(f.SrcLargeCommunities) > 0 }},
		{"SrcLargeCommunities != 65000:1:3", "flows", func(f querytest.Flow) bool { return true }},
		{"SrcMAC = 00:11:22:33:44:aa", "flows", func(f querytest.Flow) bool { return f.SrcMAC == 0x0011223344aa }},
		{"SrcNetPrefix = 198.51.100.0/24", "flows", func(f querytest.Flow) bool {
			return f.EType == 0x800 && netip.MustParsePrefix("198.51.100.0/24").Contains(f.SrcAddr)
		}},
		{"DstNetPrefix = 2001:db8:2::/48", "flows", func(f querytest.Flow) bool { return f.EType == 0x86dd }},
	} {
		t.Run(c.filter, func(t *testing.T) {
			res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor, Filter: c.filter, Units: UnitPps}, Points: 60})
			if err != nil {
				t.Fatal(err)
			}
			if res.Table != c.table {
				t.Errorf("table %s, want %s", res.Table, c.table)
			}
			want := oracle(e.Flows, start, time.Minute, 60, UnitPps, c.keep, nil)
			if len(want) == 0 {
				t.Fatal("the filter keeps no flow of the data set")
			}
			checkLine(t, res, 1, want, []string{""}, time.Minute)
		})
	}
}

// TestTableChoice checks the table and interval chosen for a range, and that the queries
// give the same totals on each.
func TestTableChoice(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-querytest.Recent)
	for _, c := range []struct {
		points   int
		offset   time.Duration // of the start, which the table's resolution aligns
		table    string
		interval time.Duration
		force    string
		filter   string
	}{
		{360, 0, "flows_1m", time.Minute, "", ""},
		{200, 0, "flows_1m", time.Minute, "", ""},
		{72, 0, "flows_5m", 5 * time.Minute, "", ""},
		{20, 0, "flows_5m", 15 * time.Minute, "", ""},
		{20, 17 * time.Second, "flows_5m", 15 * time.Minute, "", ""},
		{6, 0, "flows_1h", time.Hour, "", ""},
		{5, 0, "flows_1h", time.Hour, "", ""},
		{200, 0, "flows", 108 * time.Second, "flows", ""},
		{5, 0, "flows", 72 * time.Minute, "", "SrcPort = 443"},
		{200, 17 * time.Second, "flows", 107 * time.Second, "", "SrcPort = 443"},
	} {
		t.Run(fmt.Sprintf("%d-%s-%s-%s", c.points, c.offset, c.force, c.filter), func(t *testing.T) {
			res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start.Add(c.offset), End: e.Anchor,
				Table: c.force, Filter: c.filter, Dimensions: []string{"InIfBoundary"}}, Points: c.points})
			if err != nil {
				t.Fatal(err)
			}
			first := start
			if c.table == "flows" {
				first = start.Add(c.offset)
			}
			n := int(e.Anchor.Sub(first) / c.interval)
			if res.Table != c.table || res.Interval != int64(c.interval/time.Second) || len(res.Time) != n || !res.Time[0].Equal(first) {
				t.Fatalf("table %s, interval %d, %d points from %s", res.Table, res.Interval, len(res.Time), res.Time[0])
			}
			var keep func(querytest.Flow) bool
			if c.filter != "" {
				keep = func(f querytest.Flow) bool { return f.SrcPort == 443 }
			}
			want := oracle(e.Flows, first, c.interval, n, UnitL3bps, keep, func(f querytest.Flow) string {
				return map[uint64]string{1: "external", 2: "internal"}[f.InBoundary]
			})
			top := []string{"external", "internal"}
			if c.filter != "" {
				top = top[:1]
			}
			checkLine(t, res, 1, want, top, c.interval)
		})
	}
}

// TestTableChoiceOldest checks that a table whose data does not reach back to the start
// of the range is not chosen: flows_1h loses the rows older than 3 hours (as its TTL would
// drop them) and a 6 hour range with 5 points goes to flows_5m.
func TestTableChoiceOldest(t *testing.T) {
	s, e := newService(t)
	cut := e.Anchor.Add(-3 * time.Hour).Unix()
	if err := e.Exec(fmt.Sprintf("DELETE FROM flowzero.flows_1h WHERE TimeReceived < toDateTime(%d)", cut)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Back as they were, from flows_5m, for the other tests.
		if err := e.Exec(fmt.Sprintf("INSERT INTO flowzero.flows_1h SELECT * REPLACE (toStartOfInterval(TimeReceived, toIntervalSecond(3600)) AS TimeReceived) "+
			"FROM flowzero.flows_5m WHERE TimeReceived < toDateTime(%d)", cut)); err != nil {
			t.Error(err)
		}
		s.InvalidateTables()
	})
	tables, err := s.Tables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		want := e.Anchor.Add(-querytest.Recent - querytest.Yesterday)
		switch tb.Name {
		case "flows":
			want = want.Add(5 * time.Second) // the first flow's time
		case "flows_1h":
			want = e.Anchor.Add(-3 * time.Hour)
		}
		if tb.Oldest == nil || !tb.Oldest.Equal(want) {
			t.Errorf("%s: oldest %v, want %s", tb.Name, tb.Oldest, want)
		}
	}
	// A Sankey over a range split across the tables: flows_1h from 3 hours ago only, the
	// hours before from flows_5m.
	checkSankey(t, s, e, e.Anchor.Add(-querytest.Recent+17*time.Second), e.Anchor.Add(-23*time.Minute-13*time.Second), UnitL3bps,
		[]string{"flows_1h", "flows_5m", "flows_1m", "flows"})
	checkSankey(t, s, e, e.Anchor.Add(-querytest.Recent), e.Anchor, UnitL3bps, []string{"flows_1h", "flows_5m"})
	start := e.Anchor.Add(-querytest.Recent)
	res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor}, Points: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Table != "flows_5m" || res.Interval != 70*60 || len(res.Time) != 5 {
		t.Fatalf("table %s, interval %d, %d points", res.Table, res.Interval, len(res.Time))
	}
	checkLine(t, res, 1, oracle(e.Flows, start, 70*time.Minute, 5, UnitL3bps, nil, nil), []string{""}, 70*time.Minute)
	// The last 2 hours: flows_1h reaches back.
	res, err = s.Line(context.Background(), LineRequest{Common: Common{Start: e.Anchor.Add(-2 * time.Hour), End: e.Anchor}, Points: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Table != "flows_5m" || res.Interval != 20*60 {
		t.Errorf("2h, 5 points: table %s, interval %d", res.Table, res.Interval)
	}
	res, err = s.Line(context.Background(), LineRequest{Common: Common{Start: e.Anchor.Add(-2 * time.Hour), End: e.Anchor}, Points: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Table != "flows" {
		t.Errorf("2h, 2000 points: table %s", res.Table)
	}
}

func TestSankey(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-querytest.Recent)
	res, err := s.Sankey(context.Background(), SankeyRequest{Common{Start: start, End: e.Anchor,
		Dimensions: []string{"SrcAS", "DstAS"}, Limit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Table != "flows_1h" { // whole hours
		t.Errorf("table %s", res.Table)
	}
	// The first 3 (SrcAS, DstAS) by average: each dimension keeps the values of those rows.
	srcs := []uint32{64502, 64500, 64504}
	dsts := []uint32{64511, 64510}
	want := map[string]float64{}
	for _, f := range e.Flows {
		if f.Time.Before(start) || !f.Time.Before(e.Anchor) {
			continue
		}
		src, dst := "Other", "Other"
		if slices.Contains(srcs, f.SrcAS) {
			src = asText(f.SrcAS)
		}
		if slices.Contains(dsts, f.DstAS) {
			dst = asText(f.DstAS)
		}
		want[src+","+dst] += float64(f.Bytes*f.SamplingRate*8) / querytest.Recent.Seconds()
	}
	got := map[string]float64{}
	for i, r := range res.Rows {
		got[strings.Join(r, ",")] = res.Values[i]
		if i > 0 && res.Values[i] > res.Values[i-1] {
			t.Errorf("rows not sorted by value")
		}
	}
	if len(got) != len(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	for k, v := range want {
		if !closeTo(got[k], v) {
			t.Errorf("row %s: %v, want %v", k, got[k], v)
		}
	}
	link := func(src, dst string) float64 {
		for _, l := range res.Links {
			if l.Source == "SrcAS: "+src && l.Target == "DstAS: "+dst {
				return l.Value
			}
		}
		return -1
	}
	if v := link(asText(64500), asText(64510)); !closeTo(v, want[asText(64500)+","+asText(64510)]) {
		t.Errorf("link AS64500 → AS64510: %v", v)
	}
	if !slices.Contains(res.Nodes, "SrcAS: Other") || !slices.Contains(res.Nodes, "DstAS: "+asText(64511)) {
		t.Errorf("nodes %v", res.Nodes)
	}
}

func TestTable(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-querytest.Recent)
	for _, force := range []string{"", "flows"} {
		res, err := s.Table(context.Background(), TableRequest{Common: Common{Start: start, End: e.Anchor,
			Dimensions: []string{"SrcAS"}, Limit: 2, Table: force}, Points: 360})
		if err != nil {
			t.Fatal(err)
		}
		interval := time.Minute
		if force == "flows" {
			interval = 60 * time.Second
		}
		want := oracle(e.Flows, start, interval, 360, UnitL3bps, nil, srcAS)
		top := map[string]bool{asText(64502): true, asText(64500): true}
		type totals struct{ bytes, packets, flows uint64 }
		sums := map[string]*totals{}
		for _, f := range e.Flows {
			if f.Time.Before(start) || !f.Time.Before(e.Anchor) {
				continue
			}
			k := asText(f.SrcAS)
			if !top[k] {
				k = "Other"
			}
			if sums[k] == nil {
				sums[k] = &totals{}
			}
			sums[k].bytes += f.Bytes * f.SamplingRate
			sums[k].packets += f.Packets * f.SamplingRate
			sums[k].flows++
		}
		var names []string
		for _, r := range res.Rows {
			name := strings.Join(r.Dimensions, ",")
			names = append(names, name)
			w := sums[name]
			if w == nil || r.Bytes != w.bytes || r.Packets != w.packets {
				t.Errorf("%s row %s: bytes %d packets %d, want %+v", force, name, r.Bytes, r.Packets, w)
				continue
			}
			if r.Flows == nil || uint64(*r.Flows) != w.flows {
				t.Errorf("%s row %s: flows %v, want %d", force, name, r.Flows, w.flows)
			}
			if name == "Other" {
				continue
			}
			st := statsOf(rates(want[name], interval))
			if !closeTo(r.Avg, st.avg) || !closeTo(r.Max, st.max) || !closeTo(r.Min, st.min) || !closeTo(r.P95, st.p95) ||
				!closeTo(r.Last, st.last) || !closeTo(r.Total, float64(w.bytes)) {
				t.Errorf("%s row %s: %+v, want %+v", force, name, r, st)
			}
		}
		if !slices.Equal(names, []string{asText(64502), asText(64500), "Other"}) {
			t.Errorf("rows %v", names)
		}
	}
}

func TestFlows(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-10 * time.Minute)
	res, err := s.Flows(context.Background(), FlowsRequest{Start: start, End: e.Anchor, Filter: "Proto = TCP AND SrcAS != 64504", Limit: 5,
		Columns: []string{"TimeReceived", "SrcAddr", "srcport", "SrcAS", "Bytes", "DstASPath", "SrcCommunities", "SrcLargeCommunities", "SrcMAC", "InIfBoundary", "SrcCountry"}})
	if err != nil {
		t.Fatal(err)
	}
	var want []querytest.Flow
	for _, f := range e.Flows {
		if !f.Time.Before(start) && f.Time.Before(e.Anchor) && f.Proto == 6 && f.SrcAS != 64504 {
			want = append(want, f)
		}
	}
	slices.SortStableFunc(want, func(a, b querytest.Flow) int { return b.Time.Compare(a.Time) })
	if len(res.Rows) != 5 || res.Table != "flows" || res.Columns[2] != "SrcPort" {
		t.Fatalf("%d rows from %s, columns %v", len(res.Rows), res.Table, res.Columns)
	}
	text := func(row []any) string {
		var out []string
		for _, v := range row {
			out = append(out, fmt.Sprint(v))
		}
		return strings.Join(out, "|")
	}
	for i, row := range res.Rows {
		f := want[i]
		exp := fmt.Sprintf("%s|%s|%d|%d|%d|", f.Time.UTC().Format(time.RFC3339), f.SrcAddr, f.SrcPort, f.SrcAS, f.Bytes)
		if got := text(row); !strings.HasPrefix(got, exp) {
			t.Errorf("row %d: %s, want %s...", i, got, exp)
		}
	}
	// The newest flows of AS64500 and AS64510: lists, MAC addresses, enums, countries.
	for i, f := range want[:5] {
		var exp string
		switch f.SrcAS {
		case 64500:
			exp = "|[64510 174]|[65000:100]|[65000:1:2]|00:11:22:33:44:aa|external|FR"
		case 64510:
			exp = "|[]|[]|[]|00:00:00:00:00:00|internal|US"
		default:
			continue
		}
		if got := text(res.Rows[i]); !strings.HasSuffix(got, exp) {
			t.Errorf("row %d: %s, want ...%s", i, got, exp)
		}
	}
	// Paging: the next page starts where the first ended.
	page2, err := s.Flows(context.Background(), FlowsRequest{Start: start, End: e.Anchor, Filter: "Proto = TCP AND SrcAS != 64504", Limit: 5, Offset: 5,
		Columns: []string{"TimeReceived", "SrcAddr"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page2.Rows) != 5 || page2.Rows[0][1] != want[5].SrcAddr.String() {
		t.Errorf("page 2 starts with %v, want %s", page2.Rows[0], want[5].SrcAddr)
	}
	// Before and after.
	before := want[0].Time
	after := want[9].Time
	res, err = s.Flows(context.Background(), FlowsRequest{Start: start, End: e.Anchor, Filter: "Proto = TCP AND SrcAS != 64504",
		Before: &before, After: &after, Columns: []string{"TimeReceived"}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range want {
		if f.Time.Before(before) && f.Time.After(after) {
			n++
		}
	}
	if len(res.Rows) != n {
		t.Errorf("%d rows between, want %d", len(res.Rows), n)
	}
	// Default columns.
	res, err = s.Flows(context.Background(), FlowsRequest{Start: start, End: e.Anchor, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Columns) != len(DefaultFlowColumns) || len(res.Rows) != 1 {
		t.Errorf("columns %v, %d rows", res.Columns, len(res.Rows))
	}
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// widgetService is a service whose clock is 30 s after the data set's end.
func widgetService(t *testing.T) (*Service, *querytest.Env, time.Time) {
	t.Helper()
	e := env(t)
	now := e.Anchor.Add(30 * time.Second)
	s, err := New(engineConfig(), e.Catalog, e.Engine, clock.Clock(fixedClock{now}), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	return s, e, now
}

func TestWidgets(t *testing.T) {
	s, e, now := widgetService(t)
	ctx := context.Background()
	rate, err := s.FlowRate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The newest flow is at anchor − 1 s; the minute before it holds the last minute's 6 flows.
	if !closeTo(rate.Rate, 6.0/60) || rate.Period != 60 {
		t.Errorf("flow rate %+v", rate)
	}
	ex, err := s.Exporters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Count != 2 || !slices.Equal(ex.Exporters, []string{"192.0.2.1", "192.0.2.2"}) || ex.Table != "flows_1m" {
		t.Errorf("exporters %+v", ex)
	}
	last, err := s.LastFlow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(last.Flow["SrcAS"], last.Flow["TimeReceived"], last.Flow["ExporterAddress"], last.Flow["SrcAddr"]) !=
		fmt.Sprint(64504, e.Anchor.Add(-time.Second).UTC().Format(time.RFC3339), "192.0.2.1", "198.51.100.99") {
		t.Errorf("last flow %v", last.Flow)
	}
	if len(last.Flow) != len(e.Catalog.Columns()) {
		t.Errorf("last flow has %d columns, want %d", len(last.Flow), len(e.Catalog.Columns()))
	}
	// A collector that stopped receiving an hour ago: the newest flow, found past the
	// recent window.
	later, err := New(engineConfig(), e.Catalog, e.Engine, fixedClock{testutil.Now().Add(time.Hour)}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	stale, err := later.LastFlow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stale.Flow, last.Flow) {
		t.Errorf("last flow an hour later %v, want %v", stale.Flow, last.Flow)
	}
	top, err := s.Top(ctx, "SrcAS", "")
	if err != nil {
		t.Fatal(err)
	}
	from := e.Anchor.Add(-5 * time.Minute)
	bytes := map[string]float64{}
	var total float64
	for _, f := range e.Flows {
		if !f.Time.Before(from) && f.Time.Before(e.Anchor) {
			bytes[asText(f.SrcAS)] += float64(f.Bytes * f.SamplingRate)
			total += float64(f.Bytes * f.SamplingRate)
		}
	}
	if len(top.Top) != 6 || top.Table != "flows_1m" || top.Top[5].Name != "Other" {
		t.Fatalf("top %+v", top)
	}
	for _, it := range top.Top[:5] {
		if !closeTo(it.Percent, bytes[it.Name]*100/total) {
			t.Errorf("top %s: %v%%, want %v", it.Name, it.Percent, bytes[it.Name]*100/total)
		}
	}
	if _, err := s.Top(ctx, "Bytes", ""); err == nil || !strings.Contains(err.Error(), "dimension: Bytes cannot be a dimension") {
		t.Errorf("top of Bytes: %v", err)
	}
	g, err := s.Graph(ctx, 0, "InIfBoundary = external")
	if err != nil {
		t.Fatal(err)
	}
	if g.Table != "flows_5m" || g.Interval != 300 || !g.Time[0].Equal(alignDown(now.Add(-24*time.Hour), 5*time.Minute)) {
		t.Fatalf("graph on %s, interval %d, from %s", g.Table, g.Interval, g.Time[0])
	}
	checkLine(t, g, 1, oracle(e.Flows, g.Time[0], 5*time.Minute, len(g.Time), UnitL3bps, func(f querytest.Flow) bool { return f.InBoundary == 1 }, nil),
		[]string{""}, 5*time.Minute)
}

func TestComplete(t *testing.T) {
	s, _, _ := widgetService(t)
	ctx := context.Background()
	labels := func(r CompleteResult) string {
		var out []string
		for _, c := range r.Completions {
			out = append(out, c.Label+"="+c.Apply)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct{ text, want string }{
		// By traffic over the last 10 minutes.
		{"SrcAS = ", "AS64502=AS64502 AS64500=AS64500 AS64504=AS64504 AS64501=AS64501 AS64510=AS64510 AS64503=AS64503 DstAS=DstAS Dst1stAS=Dst1stAS Dst2ndAS=Dst2ndAS Dst3rdAS=Dst3rdAS"},
		{"SrcAS = AS6450", "AS64502=AS64502 AS64500=AS64500 AS64504=AS64504 AS64501=AS64501 AS64503=AS64503"},
		{"SrcAS = beta", "AS64501=AS64501"},
		{"SrcAS = eyeb", "AS64510=AS64510"},
		{`InIfName = "et`, `et-0/0/1="et-0/0/1" et-0/0/2="et-0/0/2"`},
		{"InIfBoundary = ", "undefined=undefined external=external internal=internal OutIfBoundary=OutIfBoundary"},
		{"Proto = t", "TCP=TCP"},
		{"EType = ", "IPv4=IPv4 IPv6=IPv6"},
		{"SrcAddr = 198.51.100.2", "198.51.100.20=198.51.100.20 198.51.100.2=198.51.100.2"},
		{"SrcCommunities = 6", "65000:100=65000:100"},
		{"DstASPath = AS17", "AS174=AS174"},
		{"ExporterN", "ExporterName=ExporterName"},
		{"SrcAS = 1 o", "OR=OR"},
		{"SrcAS IN", "IN=IN ("},
	} {
		r := s.Complete(ctx, c.text, len(c.text))
		if got := labels(r); got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.text, got, c.want)
		}
	}
	r := s.Complete(ctx, "SrcAS = beta", 12)
	if r.From != 8 || r.To != 12 || r.Completions[0].Detail != "BETA-NET" {
		t.Errorf("%+v", r)
	}
}

func TestConfig(t *testing.T) {
	s, e := newService(t)
	c, err := s.Config(context.Background(), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != "v1" || c.DefaultFilter != "InIfBoundary = external" || len(c.Columns) != len(e.Catalog.Columns()) || len(c.Tables) != 4 {
		t.Fatalf("%+v", c)
	}
	for _, col := range c.Columns {
		if col.Name == "Proto" && !slices.Contains(col.Values, "TCP") {
			t.Errorf("Proto values %v", col.Values)
		}
	}
	for _, tb := range c.Tables {
		if tb.Oldest == nil {
			t.Errorf("table %s without oldest row", tb.Name)
		}
	}
}

// TestDimensionKinds groups by columns of each kind and checks how their values show (in
// the order of their traffic).
func TestDimensionKinds(t *testing.T) {
	s, e := newService(t)
	start := e.Anchor.Add(-time.Hour)
	for _, c := range []struct {
		dims []string
		rows string
	}{
		{[]string{"DstASPath"}, "[64511 3356] [64510 174] [] [64510]"},
		{[]string{"SrcCommunities", "SrcLargeCommunities"}, "[ ] [65000:100 65000:1:2]"},
		{[]string{"SrcMAC"}, "[00:00:00:00:00:00] [00:11:22:33:44:aa]"},
		{[]string{"EType", "Proto"}, "[IPv4 TCP] [IPv4 UDP] [IPv6 UDP]"},
		{[]string{"SrcCountry"}, "[FR] [DE] [US]"},
		{[]string{"ExporterAddress"}, "[192.0.2.1] [192.0.2.2]"},
		{[]string{"DstNetPrefix"}, "[203.0.113.0/24] [198.51.100.0/24] [2001:db8:2::/48]"},
	} {
		res, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: e.Anchor, Dimensions: c.dims, Limit: 10}, Points: 60})
		if err != nil {
			t.Fatalf("%v: %v", c.dims, err)
		}
		var rows []string
		for _, r := range res.Rows {
			rows = append(rows, fmt.Sprint(r))
		}
		if got := strings.Join(rows, " "); got != c.rows {
			t.Errorf("%v: rows %s, want %s", c.dims, got, c.rows)
		}
	}
}

// TestRawSQL runs the user's statements of `flowzero store query` through the service:
// SELECTs answer in the format asked; statements that write, change settings, read files
// or URLs, or hold a second statement are refused, by the service or by the engine.
func TestRawSQL(t *testing.T) {
	s, e := newService(t)
	ctx := context.Background()
	res, err := s.RawSQL(ctx, RawSQLRequest{SQL: "SELECT count() FROM flowzero.flows;\n", Format: "TSV"})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d\n", len(e.Flows)); res.Output != want || res.Format != "TSV" {
		t.Errorf("count: %+v, want %q", res, want)
	}
	res, err = s.RawSQL(ctx, RawSQLRequest{SQL: "WITH 2 AS two SELECT two, format('{}-{}', 'a', 'b')"})
	if err != nil || res.Output != "2\ta-b\n" {
		t.Errorf("WITH: %+v %v", res, err)
	}
	for _, c := range []struct{ sql, format, field string }{
		{"INSERT INTO flowzero.flows (Bytes) VALUES (1)", "", "sql"},
		{"DROP TABLE flowzero.flows", "", "sql"},
		{"SELECT 1; DROP TABLE flowzero.flows", "", "sql"},
		{"SELECT 1 -- comment", "", "sql"},
		{"SELECT 1 SETTINGS readonly = 0", "", "sql"},
		{"SELECT 1 FORMAT JSON", "", "sql"},
		{"SELECT 1 INTO OUTFILE '/tmp/x'", "", "sql"},
		{"", "", "sql"},
		{"SELECT 1", "JSON; DROP", "format"},
		{"SELECT * FROM file('/etc/hostname', 'LineAsString')", "", "sql"},
		{"SELECT * FROM URL('http://127.0.0.1:1/', 'LineAsString')", "", "sql"},
		{"SELECT file('/etc/hostname')", "", "sql"},
		{"SELECT * FROM `s3`('http://127.0.0.1:1/x')", "", "sql"},
		{"SELECT 1) UNION ALL (SELECT 2", "", "sql"},
		{"SELECT (1", "", "sql"},
	} {
		_, err := s.RawSQL(ctx, RawSQLRequest{SQL: c.sql, Format: c.format})
		var re *RequestError
		if !errors.As(err, &re) || re.Field != c.field {
			t.Errorf("%q: %v, want an error on %s", c.sql, err, c.field)
		}
	}
	if res, err := s.RawSQL(ctx, RawSQLRequest{SQL: "SELECT sum(number) FROM numbers(10)"}); err != nil || res.Output != "45\n" {
		t.Errorf("numbers(): %+v %v", res, err)
	}
	for _, sql := range []string{
		"SELECT (SELECT 1) FROM (INSERT INTO flowzero.flows (Bytes) VALUES (1))",
	} {
		if res, err := s.RawSQL(ctx, RawSQLRequest{SQL: sql}); err == nil {
			t.Errorf("%q ran: %q", sql, res.Output)
		}
	}
	if got := e.Flows; fmt.Sprint(len(got)) != strings.TrimSpace(mustRaw(t, s, "SELECT count() FROM flowzero.flows")) {
		t.Error("the flows table changed")
	}
}

// TestRawSQLReadsNoFile: the embedded engine (clickhouse-local) resolves a table named by
// a path in its default database to that file, globs included, even on the store's
// read-only connections the query API runs on (readonly = 2): every way of naming one in a
// table position, and the ClickHouse protocol's settings naming files (format_template_*,
// format_schema), are refused with a 400 on sql or settings, and no statement reads a file
// or a URL. Tables, system tables and WITH names still read.
func TestRawSQLReadsNoFile(t *testing.T) {
	e := env(t)
	// The engine the collector's query API runs on: the sink's read-only connections, as
	// app.sinkEngine.
	s, err := New(engineConfig(), e.Catalog, e.Sink.Engine(), nil, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.csv")
	if err := os.WriteFile(secret, []byte("TOPSECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "row.txt"), []byte("TOPSECRET ${0:CSV}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s.proto"), []byte("syntax = \"proto3\"; message TOPSECRET { uint64 a = 1; }"), 0o644); err != nil {
		t.Fatal(err)
	}
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		io.WriteString(w, "TOPSECRET\n")
	}))
	defer srv.Close()
	// The engine itself reads the file: what the checks stand for.
	if out, err := e.Sink.Engine().Query(ctx, "SELECT * FROM '"+secret+"'", "TSV"); err != nil || string(out) != "TOPSECRET\n" {
		t.Logf("the engine no longer reads files named as tables (%q, %v): the check still stands", out, err)
	}
	for _, sql := range []string{
		"SELECT * FROM '" + secret + "'",
		"SELECT * FROM `" + secret + "`",
		"SELECT * FROM \"" + secret + "\"",
		"SELECT * FROM default.`" + secret + "`",
		"SELECT (SELECT * FROM '" + dir + "/*.csv')",
		"SELECT count() FROM '/etc/*'",
		"SELECT * FROM (SELECT * FROM `" + secret + "`)",
		"SELECT * FROM system.one AS o JOIN `" + secret + "` AS f ON 1",
		"SELECT * FROM system.one AS o, '" + secret + "'",
		"SELECT * FROM ((SELECT 'a') UNION ALL SELECT * FROM '" + secret + "')",
		"SELECT * FROM view((SELECT 'a') UNION ALL SELECT * FROM '" + secret + "')",
		"SELECT 'TOPSECRET' IN `" + secret + "`",
		"SELECT in('TOPSECRET', `" + secret + "`)",
		"SELECT * FROM loop(default, `" + secret + "`) LIMIT 1",
		"SELECT hasColumnInTable('default', '" + secret + "', 'c1')",
		"WITH x AS (SELECT 1) SELECT * FROM view(SELECT * FROM `" + secret + "`)",
		"SELECT * FROM (WITH `" + secret + "` AS (SELECT 1) SELECT 1) UNION ALL SELECT * FROM `" + secret + "`",
		"SELECT * FROM '" + srv.URL + "/a.csv'",
		"SELECT * FROM hostname", // a file of the working directory, if any
	} {
		res, err := s.RawSQL(ctx, RawSQLRequest{SQL: sql})
		var re *RequestError
		if !errors.As(err, &re) || re.Field != "sql" {
			t.Errorf("%q: %+v %v, want an error on sql", sql, res, err)
		}
		if res != nil && strings.Contains(res.Output, "TOPSECRET") {
			t.Errorf("%q read the file: %q", sql, res.Output)
		}
	}
	for _, c := range []struct {
		format   string
		settings map[string]string
	}{
		{"Template", map[string]string{"format_template_row": filepath.Join(dir, "row.txt")}},
		{"Template", map[string]string{"format_template_resultset": filepath.Join(dir, "row.txt")}},
		{"Protobuf", map[string]string{"format_schema": filepath.Join(dir, "s.proto") + ":TOPSECRET"}},
		{"CSV", map[string]string{"format_schema_path": dir}},
		{"CSV", map[string]string{"output_format_schema": filepath.Join(dir, "out.capnp")}},
		{"CSV", map[string]string{"input_format_csv_use_default_on_bad_values": "1"}},
		{"CSV", map[string]string{"format_display_secrets_in_show_and_select": "1"}},
	} {
		res, err := s.ClickHouse(ctx, ClickHouseRequest{SQL: "SELECT 1 AS a FORMAT " + c.format, Settings: c.settings})
		var re *RequestError
		if !errors.As(err, &re) || re.Field != "settings" {
			t.Errorf("%v: %+v %v, want an error on settings", c.settings, res, err)
		} else {
			for name := range c.settings {
				if !strings.Contains(re.Message, name) {
					t.Errorf("%v: %q does not name the setting", c.settings, re.Message)
				}
			}
		}
		if res != nil && strings.Contains(res.Output, "TOPSECRET") {
			t.Errorf("%v read the file: %q", c.settings, res.Output)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.capnp")); err == nil {
		t.Error("output_format_schema wrote a file")
	}
	if fetched.Load() != 0 {
		t.Errorf("the engine fetched %d URLs", fetched.Load())
	}
	// What still reads: tables, system tables (SHOW and DESCRIBE), WITH names, subqueries,
	// and the output settings clients send.
	for sql, want := range map[string]string{
		"SELECT count() FROM flowzero.flows":                                                               fmt.Sprintf("%d\n", len(e.Flows)),
		"SELECT count() > 0 FROM system.columns WHERE database = 'flowzero' AND table = 'flows'":           "1\n",
		"SELECT name FROM system.tables WHERE database = 'flowzero' AND name = 'flows_1m'":                 "flows_1m\n",
		"WITH x AS (SELECT 2 AS a) SELECT a FROM x WHERE a IN x UNION ALL SELECT * FROM (SELECT a FROM x)": "2\n2\n",
		"SELECT count() FROM flowzero.flows AS f JOIN (SELECT 1 AS k) AS o ON 1 WHERE f.Proto IN (6, 17)":  "",
	} {
		res, err := s.RawSQL(ctx, RawSQLRequest{SQL: sql})
		if err != nil || (want != "" && res.Output != want) {
			t.Errorf("%q: %+v %v, want %q", sql, res, err, want)
		}
	}
	res, err := s.ClickHouse(ctx, ClickHouseRequest{SQL: "SELECT 1 AS a, toUInt64(2) AS b FORMAT JSONEachRow",
		Settings: map[string]string{"output_format_json_quote_64bit_integers": "1", "max_execution_time": "10"}})
	if err != nil || res.Output != "{\"a\":1,\"b\":\"2\"}\n" {
		t.Errorf("output settings: %+v %v", res, err)
	}
}

// TestRequestsWithinQuerySizeEngine: requests whose statement the engine would not parse
// (max_query_size) are refused naming the field, on the real engine: 20,000 columns, and a
// 60 kB filter repeated per axis and period.
func TestRequestsWithinQuerySizeEngine(t *testing.T) {
	s, e := newService(t)
	ctx := context.Background()
	cols := make([]string, 20000)
	for i := range cols {
		cols[i] = "Bytes"
	}
	_, err := s.Flows(ctx, FlowsRequest{Start: e.Anchor.Add(-time.Hour), End: e.Anchor, Columns: cols})
	var re *RequestError
	if !errors.As(err, &re) || re.Field != "columns" {
		t.Errorf("20000 columns: %T %.300v, want a RequestError on columns", err, err)
	}
	f := "SrcAddr IN (" + strings.TrimSuffix(strings.Repeat("1.1.1.1,", 7500), ",") + ")"
	_, err = s.Line(ctx, LineRequest{Common: Common{Start: e.Anchor.Add(-time.Hour), End: e.Anchor, Filter: f},
		Bidirectional: true, PreviousPeriod: true})
	if !errors.As(err, &re) || re.Field != "filter" {
		t.Errorf("%d-byte filter: %T %.300v, want a RequestError on filter", len(f), err, err)
	}
	// The same filter on one axis fits, and runs.
	if _, err := s.Line(ctx, LineRequest{Common: Common{Start: e.Anchor.Add(-time.Hour), End: e.Anchor,
		Filter: "SrcAddr IN (" + strings.TrimSuffix(strings.Repeat("1.1.1.1,", 2000), ",") + ")"}}); err != nil {
		t.Errorf("a 16 kB filter: %.300v", err)
	}
}

func mustRaw(t *testing.T, s *Service, sql string) string {
	t.Helper()
	res, err := s.RawSQL(context.Background(), RawSQLRequest{SQL: sql})
	if err != nil {
		t.Fatal(err)
	}
	return res.Output
}

// TestHTTPClientPath runs every query kind through engine.HTTPClient, the client of a
// ClickHouse server, against a test double of ClickHouse's HTTP interface that runs the SQL
// in the real engine holding the data set (the double is only the transport: the statement
// in the body, the format in default_format, errors with X-ClickHouse-Exception-Code). The
// answers must be those of the embedded engine; an engine error keeps its kind.
func TestHTTPClientPath(t *testing.T) {
	direct, e := newService(t)
	var ran atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		out, err := e.Engine.Query(r.Context(), string(body), r.URL.Query().Get("default_format"))
		if err != nil {
			w.Header().Set("X-ClickHouse-Exception-Code", "1")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, strings.TrimPrefix(err.Error(), "chdb: "))
			return
		}
		ran.Add(1)
		w.Write(out)
	}))
	defer srv.Close()
	cfg := engine.DefaultHTTPConfiguration()
	cfg.URL = srv.URL
	client, err := engine.NewHTTPClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	viaHTTP, err := New(engineConfig(), e.Catalog, client, testutil.Clock(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	common := Common{Start: e.Anchor.Add(-querytest.Recent), End: e.Anchor, Dimensions: []string{"SrcAS", "Proto"}, Limit: 3}
	same := func(name string, run func(s *Service) (any, error)) {
		t.Helper()
		want, err := run(direct)
		if err != nil {
			t.Fatalf("%s embedded: %v", name, err)
		}
		got, err := run(viaHTTP)
		if err != nil {
			t.Fatalf("%s over HTTP: %v", name, err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("%s over HTTP:\n%s\nembedded:\n%s", name, g, w)
		}
	}
	same("line", func(s *Service) (any, error) {
		return s.Line(ctx, LineRequest{Common: common, Points: 60, Bidirectional: true, PreviousPeriod: true})
	})
	same("table", func(s *Service) (any, error) { return s.Table(ctx, TableRequest{Common: common, Points: 30}) })
	same("sankey", func(s *Service) (any, error) { return s.Sankey(ctx, SankeyRequest{Common: common}) })
	same("flows", func(s *Service) (any, error) {
		return s.Flows(ctx, FlowsRequest{Start: common.Start, End: common.End, Filter: "Proto = TCP", Limit: 20})
	})
	same("sql", func(s *Service) (any, error) {
		return s.RawSQL(ctx, RawSQLRequest{SQL: "SELECT count() FROM flowzero.flows_1m", Format: "TSV"})
	})
	if ran.Load() < 5 {
		t.Errorf("%d statements ran through the double", ran.Load())
	}
	// An error of the engine comes back as one.
	_, err = viaHTTP.RawSQL(ctx, RawSQLRequest{SQL: "SELECT nosuchcolumn FROM flowzero.flows"})
	var ee *EngineError
	if !errors.As(err, &ee) || ee.Kind != EngineFailed || !strings.Contains(err.Error(), "nosuchcolumn") {
		t.Errorf("engine error over HTTP: %v", err)
	}
}

// topKeys ranks the values key gives the flows in [start, end) by their bytes × sampling
// rate (their count for fps), first limit of them, ties by the order less gives.
func topKeys[K comparable](flows []querytest.Flow, start, end time.Time, limit int, u Unit, key func(querytest.Flow) K, less func(a, b K) int) []K {
	sums := map[K]uint64{}
	for _, f := range flows {
		if !f.Time.Before(start) && f.Time.Before(end) {
			if u == UnitFps {
				sums[key(f)]++
				continue
			}
			sums[key(f)] += f.Bytes * f.SamplingRate
		}
	}
	var out []K
	for k := range sums {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b K) int {
		if sums[a] != sums[b] {
			if sums[a] > sums[b] {
				return -1
			}
			return 1
		}
		return less(a, b)
	})
	return out[:min(limit, len(out))]
}

// checkSankey runs a Sankey of SrcAS and DstAS (3 rows kept) over [start, end) in bits or
// flows per second and compares it with the sums of the flows in exactly that range; tables
// are the tables it must read.
func checkSankey(t *testing.T, s *Service, e *querytest.Env, start, end time.Time, u Unit, tables []string) {
	t.Helper()
	res, err := s.Sankey(context.Background(), SankeyRequest{Common{Start: start, End: end,
		Dimensions: []string{"SrcAS", "DstAS"}, Limit: 3, Units: u}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tables, tables) || res.Table != tables[0] {
		t.Errorf("tables %s (%v), want %v\n%s", res.Table, res.Tables, tables, res.SQL)
	}
	type pair struct{ src, dst uint32 }
	top := topKeys(e.Flows, start, end, 3, u, func(f querytest.Flow) pair { return pair{f.SrcAS, f.DstAS} }, func(a, b pair) int {
		if a.src != b.src {
			return int(a.src) - int(b.src)
		}
		return int(a.dst) - int(b.dst)
	})
	want := map[string]float64{}
	for _, f := range e.Flows {
		if f.Time.Before(start) || !f.Time.Before(end) {
			continue
		}
		src, dst := "Other", "Other"
		if slices.ContainsFunc(top, func(p pair) bool { return p.src == f.SrcAS }) {
			src = asText(f.SrcAS)
		}
		if slices.ContainsFunc(top, func(p pair) bool { return p.dst == f.DstAS }) {
			dst = asText(f.DstAS)
		}
		v := float64(f.Bytes * f.SamplingRate * 8)
		if u == UnitFps {
			v = 1
		}
		want[src+","+dst] += v / end.Sub(start).Seconds()
	}
	got := map[string]float64{}
	for i, r := range res.Rows {
		got[strings.Join(r, ",")] = res.Values[i]
	}
	if len(got) != len(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	for k, v := range want {
		if !closeTo(got[k], v) {
			t.Errorf("row %s: %v, want %v", k, got[k], v)
		}
	}
}

// TestSplitRanges checks the queries whose rows are ranked over a range split across the
// tables (split): edges on no bucket of an hour, 5 minutes or a minute, a range inside one
// hour, an end in an hour not over (the hour's bucket holds flows after it), an end at
// now. Each answer is that of the flows in exactly the range.
func TestSplitRanges(t *testing.T) {
	s, e := newService(t)
	a := e.Anchor
	all := []string{"flows_1h", "flows_5m", "flows_1m", "flows"}
	for _, c := range []struct {
		name       string
		start, end time.Time
		tables     []string
	}{
		{"whole hours", a.Add(-querytest.Recent), a, []string{"flows_1h"}},
		{"edges on no bucket", a.Add(-querytest.Recent + 17*time.Second), a.Add(-23*time.Minute - 13*time.Second), all},
		{"edges on 5 minutes", a.Add(-querytest.Recent + 10*time.Minute), a.Add(-25 * time.Minute), []string{"flows_1h", "flows_5m"}},
		{"edges on minutes", a.Add(-querytest.Recent + 12*time.Minute), a.Add(-23 * time.Minute), []string{"flows_1h", "flows_5m", "flows_1m"}},
		{"inside one hour", a.Add(-2*time.Hour + 12*time.Minute + 30*time.Second), a.Add(-2*time.Hour + 48*time.Minute + 10*time.Second),
			[]string{"flows_5m", "flows_1m", "flows"}},
		{"inside one minute", a.Add(-2*time.Hour + 12*time.Minute + 3*time.Second), a.Add(-2*time.Hour + 12*time.Minute + 45*time.Second), []string{"flows"}},
		{"hour not over", a.Add(-3 * time.Hour), a.Add(-37*time.Minute - 13*time.Second), []string{"flows_1h", "flows_5m", "flows_1m", "flows"}},
		{"to now", a.Add(-time.Hour - 7*time.Minute - 29*time.Second), testutil.Now().Truncate(time.Second), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tables := c.tables
			if tables == nil { // depends on now
				tables = partTables(split(e.Catalog, mustState(t, s).oldest, c.start, c.end, false, false))
				if len(tables) < 2 {
					t.Fatalf("tables %v", tables)
				}
			}
			checkSankey(t, s, e, c.start, c.end, UnitL3bps, tables)
			checkSankey(t, s, e, c.start, c.end, UnitFps, tables)
		})
	}
	// A bidirectional line: its rows ranked apart (for the reverse axis), over its window
	// split across the tables, its points from the window's table. A table (and a line
	// without a reverse axis) ranks its rows in its one read of the window's table.
	start, end := a.Add(-querytest.Recent+17*time.Second), a.Add(-23*time.Minute-13*time.Second)
	for _, c := range []struct {
		points   int
		table    string
		interval time.Duration
		tables   []string
	}{
		{72, "flows_5m", 5 * time.Minute, []string{"flows_5m", "flows_1h"}},
		{360, "flows_1m", time.Minute, []string{"flows_1m", "flows_1h", "flows_5m"}},
	} {
		first := alignDown(start, c.interval)
		n := int(end.Sub(first) / c.interval)
		top := topKeys(e.Flows, first, first.Add(time.Duration(n)*c.interval), 2, UnitL3bps, func(f querytest.Flow) uint32 { return f.SrcAS },
			func(a, b uint32) int { return int(a) - int(b) })
		var names []string
		for _, as := range top {
			names = append(names, asText(as))
		}
		want := oracle(e.Flows, first, c.interval, n, UnitL3bps, nil, srcAS)
		line, err := s.Line(context.Background(), LineRequest{Common: Common{Start: start, End: end, Dimensions: []string{"SrcAS"}, Limit: 2},
			Points: c.points, Bidirectional: true})
		if err != nil {
			t.Fatal(err)
		}
		if line.Table != c.table || !slices.Equal(line.Tables, c.tables) || len(line.Time) != n || !line.Time[0].Equal(first) {
			t.Fatalf("line: table %s (%v), %d points from %s\n%s", line.Table, line.Tables, len(line.Time), line.Time[0], line.SQL)
		}
		checkLine(t, line, 1, want, names, c.interval)
		table, err := s.Table(context.Background(), TableRequest{Common: Common{Start: start, End: end, Dimensions: []string{"SrcAS"}, Limit: 2},
			Points: c.points})
		if err != nil {
			t.Fatal(err)
		}
		if table.Table != c.table || !slices.Equal(table.Tables, []string{c.table}) {
			t.Errorf("table: %s (%v)", table.Table, table.Tables)
		}
		var got []string
		for _, r := range table.Rows {
			got = append(got, strings.Join(r.Dimensions, ","))
		}
		if !slices.Equal(got, append(names, "Other")) {
			t.Errorf("table rows %v, want %v", got, names)
		}
	}
}

func mustState(t *testing.T, s *Service) *tablesState {
	t.Helper()
	st, err := s.tables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
