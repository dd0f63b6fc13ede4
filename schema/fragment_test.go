package schema

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"flowzero/pbwire"
)

func inInterface(m *FlowMessage) {
	m.AppendString(ColumnInIfName, "et-0/0/1")
	m.AppendString(ColumnInIfDescription, "transit: Cogent")
	m.AppendUint(ColumnInIfSpeed, 100000)
	m.AppendString(ColumnInIfProvider, "cogent")
	m.AppendString(ColumnInIfConnectivity, "") // empty: not part of the fragment
	m.AppendUint(ColumnInIfBoundary, BoundaryExternal)
}

func mustFragment(t testing.TB, s *Schema, fill func(*FlowMessage)) *Fragment {
	t.Helper()
	f, err := s.NewFragment(fill)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFragmentSameBytes checks that a fragment appends exactly the bytes its columns
// appended one by one would, and that the message decodes with the generated .proto.
func TestFragmentSameBytes(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	md := compile(t, s)
	f := mustFragment(t, s, inInterface)
	want := []ColumnKey{ColumnInIfName, ColumnInIfDescription, ColumnInIfSpeed, ColumnInIfProvider, ColumnInIfBoundary}
	if got := f.Columns(); len(got) != len(want) || !bytes.Equal(keysBytes(got), keysBytes(want)) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	one, frag := s.NewFlowMessage(), s.NewFlowMessage()
	for _, m := range []*FlowMessage{one, frag} {
		m.SrcAddr = netip.MustParseAddr("192.0.2.1")
		m.AppendUint(ColumnSrcPort, 443)
	}
	inInterface(one)
	frag.AppendFragment(f)
	frag.AppendString(ColumnInIfConnectivity, "transit") // still free
	one.state[ColumnInIfConnectivity] = opString         // inInterface marked it set with ""
	one.AppendString(ColumnInIfConnectivity, "transit")
	a, b := one.Finalize(), frag.Finalize()
	if !bytes.Equal(a, b) {
		t.Fatalf("fragment:\n%x\none by one:\n%x", b, a)
	}
	checkDynamic(t, md, unframe(t, b), map[ColumnKey]any{
		ColumnSrcAddr:          netip.MustParseAddr("192.0.2.1"),
		ColumnSrcPort:          uint64(443),
		ColumnInIfName:         "et-0/0/1",
		ColumnInIfDescription:  "transit: Cogent",
		ColumnInIfSpeed:        uint64(100000),
		ColumnInIfProvider:     "cogent",
		ColumnInIfConnectivity: "transit",
		ColumnInIfBoundary:     uint64(BoundaryExternal),
	})
}

func keysBytes(ks []ColumnKey) []byte {
	b := make([]byte, len(ks))
	for i, k := range ks {
		b[i] = byte(k)
	}
	return b
}

// TestFragmentKeepsSetColumns checks write-once semantics: a column the decoder already set
// is kept, the others of the fragment are appended, and a second fragment adds nothing.
func TestFragmentKeepsSetColumns(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	md := compile(t, s)
	f := mustFragment(t, s, inInterface)
	m := s.NewFlowMessage()
	m.AppendString(ColumnInIfName, "xe-1/2/3")
	m.AppendFragment(f)
	m.AppendFragment(f)
	checkDynamic(t, md, unframe(t, m.Finalize()), map[ColumnKey]any{
		ColumnInIfName:        "xe-1/2/3",
		ColumnInIfDescription: "transit: Cogent",
		ColumnInIfSpeed:       uint64(100000),
		ColumnInIfProvider:    "cogent",
		ColumnInIfBoundary:    uint64(BoundaryExternal),
	})
}

// TestFragmentMarksColumns checks the fast path's write-once marking: on a fresh message the
// fragment's columns become set (a later Append or the same fragment again adds nothing).
func TestFragmentMarksColumns(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	for name, fill := range map[string]func(*FlowMessage){
		"exporter":  func(m *FlowMessage) { m.AppendString(ColumnExporterName, "edge1") },
		"interface": inInterface,
	} {
		f := mustFragment(t, s, fill)
		if !f.oneWord {
			t.Fatalf("%s: the columns span several state words: the test needs the fast path", name)
		}
		m := s.NewFlowMessage()
		m.AppendFragment(f)
		n := m.w.Len()
		for _, k := range f.Columns() {
			if !m.IsSet(k) {
				t.Errorf("%s: %s not set", name, Lookup(k).Name)
			}
			m.AppendString(k, "again")
		}
		m.AppendFragment(f)
		if m.w.Len() != n {
			t.Errorf("%s: %d bytes added after the fragment", name, m.w.Len()-n)
		}
	}
}

// TestFragmentGroupsInOneWord checks that each group of columns enrich.Metadata encodes as a
// fragment lies in one word of column states, so that AppendFragment takes its fast path
// even with every column of the group enabled.
func TestFragmentGroupsInOneWord(t *testing.T) {
	s := mustNew(t, allColumns())
	for name, group := range map[string][]ColumnKey{
		"exporter": {ColumnExporterName, ColumnExporterGroup, ColumnExporterRole, ColumnExporterSite, ColumnExporterRegion, ColumnExporterTenant},
		"in":       {ColumnInIfName, ColumnInIfDescription, ColumnInIfSpeed, ColumnInIfConnectivity, ColumnInIfProvider, ColumnInIfBoundary},
		"out":      {ColumnOutIfName, ColumnOutIfDescription, ColumnOutIfSpeed, ColumnOutIfConnectivity, ColumnOutIfProvider, ColumnOutIfBoundary},
		"src-net":  {ColumnSrcNetName, ColumnSrcNetRole, ColumnSrcNetSite, ColumnSrcNetRegion, ColumnSrcNetTenant, ColumnSrcCountry, ColumnSrcGeoState, ColumnSrcGeoCity},
		"dst-net":  {ColumnDstNetName, ColumnDstNetRole, ColumnDstNetSite, ColumnDstNetRegion, ColumnDstNetTenant, ColumnDstCountry, ColumnDstGeoState, ColumnDstGeoCity},
	} {
		f := mustFragment(t, s, func(m *FlowMessage) {
			for _, k := range group {
				if Lookup(k).Kind == KindString {
					m.AppendString(k, "x")
				} else {
					m.AppendUint(k, 1)
				}
			}
		})
		if len(f.Columns()) != len(group) {
			t.Fatalf("%s: %d columns in the fragment, want %d", name, len(f.Columns()), len(group))
		}
		if !f.oneWord {
			t.Errorf("%s: the group's columns span several words of column states", name)
		}
	}
}

// TestFragmentDisabledColumns checks that disabled columns stay out of a fragment, and that a
// fragment of another schema (before a reload) appends nothing.
func TestFragmentDisabledColumns(t *testing.T) {
	s := mustNew(t, Configuration{Disabled: []string{"InIfDescription", "InIfSpeed"}})
	f := mustFragment(t, s, inInterface)
	if got := len(f.Columns()); got != 3 {
		t.Fatalf("%d columns, want 3 (InIfName, InIfProvider, InIfBoundary)", got)
	}
	other := mustNew(t, DefaultConfiguration())
	m := other.NewFlowMessage()
	m.AppendFragment(f)
	m.AppendFragment(nil)
	if m.IsSet(ColumnInIfName) || len(unframe(t, m.Finalize())) != 0 {
		t.Fatal("a fragment of another schema was appended")
	}
}

// TestFragmentWideSpan checks a fragment whose columns lie in more state words than the
// fast path compares at once: it goes the slow way, with the same result.
func TestFragmentWideSpan(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	wide := func(m *FlowMessage) {
		m.AppendString(ColumnExporterName, "edge1")
		m.AppendString(ColumnInIfName, "et-0/0/1")
		m.AppendUint(ColumnOutIfBoundary, BoundaryInternal)
		m.AppendString(ColumnDstNetTenant, "acme")
	}
	f := mustFragment(t, s, wide)
	if f.oneWord {
		t.Fatal("one state word: the test needs a fragment over several")
	}
	one, frag := s.NewFlowMessage(), s.NewFlowMessage()
	for _, m := range []*FlowMessage{one, frag} {
		m.AppendString(ColumnInIfName, "xe-0/0/9") // set first: kept
	}
	wide(one)
	frag.AppendFragment(f)
	frag.AppendFragment(f)
	if a, b := one.Finalize(), frag.Finalize(); !bytes.Equal(a, b) {
		t.Fatalf("fragment:\n%x\none by one:\n%x", b, a)
	}
}

func TestFragmentErrors(t *testing.T) {
	s := mustNew(t, Configuration{Enabled: []string{"MPLSLabels"}})
	if _, err := s.NewFragment(func(m *FlowMessage) { m.AppendUint(ColumnInIf, 3) }); !errors.Is(err, ErrFragmentHot) {
		t.Errorf("hot column: %v", err)
	}
	if _, err := s.NewFragment(func(m *FlowMessage) { m.SrcAS = 64500 }); !errors.Is(err, ErrFragmentHot) {
		t.Errorf("hot field: %v", err)
	}
	if _, err := s.NewFragment(func(m *FlowMessage) { m.AppendArrayUint32(ColumnMPLSLabels, []uint32{16}) }); !errors.Is(err, ErrFragmentHot) {
		t.Errorf("repeated column: %v", err)
	}
	long := string(bytes.Repeat([]byte("x"), maxFragmentLen))
	if _, err := s.NewFragment(func(m *FlowMessage) { m.AppendString(ColumnInIfDescription, long) }); !errors.Is(err, ErrFragmentSize) {
		t.Errorf("long fragment: %v", err)
	}
}

// TestFragmentGrowth appends a fragment to a message whose buffer has less room than the
// fragment, or than one of its fields, or just less or more than the one copy of the fast
// path takes (the fragment and pbwire.RawPad): the bytes are the same.
func TestFragmentGrowth(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	f := mustFragment(t, s, inInterface)
	for room := range f.raw.Len() + pbwire.RawPad + 8 {
		want, m := s.NewFlowMessage(), s.NewFlowMessage()
		filler := fillTo(t, m, room)
		want.AppendString(ColumnSrcGeoCity, filler)
		inInterface(want)
		m.AppendFragment(f)
		if a, b := want.Finalize(), m.Finalize(); !bytes.Equal(a, b) {
			t.Fatalf("room %d: bytes differ", room)
		}
	}
}

// fillTo appends a long SrcGeoCity to m so that its buffer has room bytes left before it
// grows, and returns it.
func fillTo(t testing.TB, m *FlowMessage, room int) string {
	t.Helper()
	// A 2-byte key and a 2-byte length.
	filler := strings.Repeat("x", m.w.Available()-4-room)
	m.AppendString(ColumnSrcGeoCity, filler)
	if m.w.Available() != room {
		t.Fatalf("%d bytes of room, want %d", m.w.Available(), room)
	}
	return filler
}

func TestFragmentAllocations(t *testing.T) {
	s := mustNew(t, DefaultConfiguration())
	f := mustFragment(t, s, inInterface)
	m := s.NewFlowMessage()
	if a := testing.AllocsPerRun(1000, func() {
		m.Reset()
		m.AppendFragment(f)
		m.Finalize()
	}); a != 0 {
		t.Fatalf("%v allocations", a)
	}
}

// TestFlowMessageReuse reuses one message for many flows: a column written in one flow is
// free in the next, and disabled columns stay off.
func TestFlowMessageReuse(t *testing.T) {
	s := mustNew(t, Configuration{Disabled: []string{"DstPort"}})
	md := compile(t, s)
	f := mustFragment(t, s, inInterface)
	m := s.NewFlowMessage()
	for i := range 3*255 + 7 {
		m.Reset()
		if m.IsSet(ColumnSrcPort) || m.IsSet(ColumnInIfName) || m.IsSet(ColumnDstPort) {
			t.Fatalf("flow %d: columns of the previous flow still set", i)
		}
		m.AppendUint(ColumnSrcPort, uint64(i+1))
		m.AppendUint(ColumnSrcPort, 9999) // written once
		m.AppendUint(ColumnDstPort, 53)   // disabled
		if i%3 == 0 {
			m.AppendFragment(f)
		}
		if i%97 != 0 && i%255 > 3 && i%255 < 255-3 {
			continue
		}
		want := map[ColumnKey]any{ColumnSrcPort: uint64(i + 1)}
		if i%3 == 0 {
			want[ColumnInIfName], want[ColumnInIfDescription], want[ColumnInIfSpeed] = "et-0/0/1", "transit: Cogent", uint64(100000)
			want[ColumnInIfProvider], want[ColumnInIfBoundary] = "cogent", uint64(BoundaryExternal)
		}
		checkDynamic(t, md, unframe(t, m.Finalize()), want)
	}
}
