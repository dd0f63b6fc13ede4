package netflow

import (
	"strings"
	"testing"
	"time"

	"flowzero/demo"
)

// TestObserverRateBeforeTemplates: a datagram bringing templates, an options template and the
// sampling rate in its options data (the demo exporters' first one, NetFlow v9 and IPFIX) is
// reported with the sampling rate before the templates. A decoder applying the records in that
// order (an outlet following the state topic) knows the rate when a template releases the
// data sets it held; reported in set order, the flows released came out at sampling rate 1
// (TestSplitDemoExporters, app).
func TestObserverRateBeforeTemplates(t *testing.T) {
	s := allColumns(t)
	for _, ipfix := range []bool{false, true} {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		obs := &recordingObserver{}
		d.SetObserver(obs)
		g := demo.NewGenerator(1)
		enc := &demo.NetFlowEncoder{IPFIX: ipfix, SourceID: 7, SamplingRate: 1000, TemplateRefresh: 100, Boot: testTime.Add(-time.Hour)}
		p, n := enc.Encode(nil, []demo.Flow{g.Next(testTime)}, testTime, 1400)
		if n != 1 {
			t.Fatalf("encoded %d flows", n)
		}
		tagged(t, d, s, [][]byte{p}, testTime)
		var kinds []StateKind
		for _, r := range obs.state {
			kinds = append(kinds, r.Kind)
		}
		if len(kinds) < 4 || kinds[0] != StateSamplingRate || obs.state[0].Value != 1000 {
			t.Errorf("ipfix=%v: state reported in the order %v (first %+v), want the sampling rate 1000 first", ipfix, kinds, obs.state[0])
		}
		for _, k := range kinds[1:] {
			if k == StateSamplingRate {
				t.Errorf("ipfix=%v: state reported in the order %v", ipfix, kinds)
			}
		}
	}
}

// TestPendingReleasedWithRate: data that arrives before its template is held; the datagram
// that brings the template and, after it, the options data with the sampling rate (the demo
// exporters' first one) releases it at the end, with that rate, like its own flows.
func TestPendingReleasedWithRate(t *testing.T) {
	s := allColumns(t)
	for _, ipfix := range []bool{false, true} {
		d, _ := newTestDecoder(t, DefaultConfiguration(), s)
		g := demo.NewGenerator(1)
		enc := &demo.NetFlowEncoder{IPFIX: ipfix, SourceID: 7, SamplingRate: 1000, TemplateRefresh: 100, Boot: testTime.Add(-time.Hour)}
		first, _ := enc.Encode(nil, []demo.Flow{g.Next(testTime)}, testTime, 1400)
		second, _ := enc.Encode(nil, []demo.Flow{g.Next(testTime), g.Next(testTime)}, testTime, 1400)
		flows, _ := tagged(t, d, s, [][]byte{second, first}, testTime)
		if len(flows) != 3 {
			t.Fatalf("ipfix=%v: %d flows, want 3", ipfix, len(flows))
		}
		for _, f := range flows {
			if !strings.Contains(f, " SamplingRate=1000 ") {
				t.Errorf("ipfix=%v: flow %s, want SamplingRate=1000", ipfix, f)
			}
		}
	}
}
