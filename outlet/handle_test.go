package outlet

import (
	"encoding/binary"
	"net/netip"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
	"flowzero/decoder/netflow"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output"
	"flowzero/schema"
)

// identitySink keeps the identity (offset, index in the record) of every flow it gets.
type identitySink struct {
	s   *schema.Schema
	ids [][2]uint64
}

func (d *identitySink) Name() string { return "identity" }
func (d *identitySink) Start() error { return nil }
func (d *identitySink) Stop() error  { return nil }
func (d *identitySink) Send(b *output.Batch) bool {
	defer b.Release()
	data := b.Data
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		msg := data[k : k+int(n)]
		data = data[k+int(n):]
		var id [2]uint64
		d.s.DecodeMessage(msg, func(col *schema.Column, v any) {
			switch col.Key {
			case schema.ColumnDatagramOffset:
				id[0] = v.(uint64)
			case schema.ColumnDatagramIndex:
				id[1] = v.(uint64)
			}
		})
		d.ids = append(d.ids, id)
	}
	return true
}

// TestOutletBatchRecords: a batch record's datagrams are decoded in order, a data set held for
// a template of a later entry included, and its flows numbered through the record; a version
// 1 record (older inlets) still decodes; the valid entries of a batch record cut short are
// decoded and the rest counted invalid.
func TestOutletBatchRecords(t *testing.T) {
	sink := &identitySink{}
	o, nf := newOffline(t, netflow.DefaultConfiguration(), DefaultConfiguration(), sink, nil)
	sink.s = o.deps.Schema
	nf.SetObserver(nil) // no state topic to publish to
	from := netip.MustParseAddrPort("192.0.2.100:2055")
	now := testutil.Now()
	dg := map[string]datagram.Datagram{}
	for _, name := range []string{"options-template", "options-data", "template", "data"} {
		dgs, err := pcapfile.ReadUDP(testdata.Path(t, "netflow", name+".pcap"))
		if err != nil {
			t.Fatal(err)
		}
		dg[name] = datagram.Datagram{Received: now, Exporter: from, Protocol: datagram.NetFlow, Payload: dgs[0].Payload}
	}
	batch := func(names ...string) []byte {
		rec := datagram.AppendBatch(nil)
		for _, n := range names {
			rec = datagram.AppendEntry(rec, dg[n])
		}
		return rec
	}
	handle := func(offset int64, value []byte) {
		o.handle(&kgo.Record{Partition: 0, Offset: offset, Value: value})
	}
	// The data before its template, in the same record: held, then released by the template.
	handle(0, batch("options-template", "options-data", "data", "template", "data"))
	handle(1, datagram.Append(nil, dg["data"]))
	cut := batch("data", "data")
	handle(2, cut[:len(cut)-1])
	o.sendBatch()
	if d, _ := o.Counts(); d != 5+1+2 {
		t.Errorf("%d datagrams counted, want 8 (5, 1, 1 and the invalid rest)", d)
	}
	if v := promtest.ToFloat64(o.m.invalid); v != 1 {
		t.Errorf("%v invalid records", v)
	}
	want := map[uint64]int{0: 8, 1: 4, 2: 4} // flows per record: two data datagrams of 4 flows in the first
	got := map[uint64]int{}
	seen := map[[2]uint64]bool{}
	for _, id := range sink.ids {
		got[id[0]]++
		if seen[id] {
			t.Errorf("flow identity %v twice", id)
		}
		seen[id] = true
		if id[1] >= uint64(want[id[0]]) {
			t.Errorf("flow index %d in record %d of %d flows", id[1], id[0], want[id[0]])
		}
	}
	for off, n := range want {
		if got[off] != n {
			t.Errorf("record %d: %d flows, want %d (all: %v)", off, got[off], n, got)
		}
	}
}
