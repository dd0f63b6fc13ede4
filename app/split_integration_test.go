//go:build integration

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"google.golang.org/protobuf/encoding/protowire"

	"flowzero/datagram"
	"flowzero/internal/kafkatest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/output/file"
	"flowzero/replay"
	"flowzero/schema"
)

// splitTopics are the Kafka names of one split collector under test.
type splitTopics struct {
	brokers                 []string
	datagrams, state, group string
	partitions              int32
	// rf is the replication factor of the topics: 3 on `make test`'s cluster of 3 brokers
	// (with min.insync.replicas 2), as a production cluster would have.
	rf int16
}

// newSplitTopics creates the datagrams topic (partitions partitions) and names the state
// topic and the group; the state topic is deleted at the end.
func newSplitTopics(t *testing.T, partitions int32) splitTopics {
	cl := kafkatest.Client(t)
	st := splitTopics{brokers: kafkatest.Brokers(t), datagrams: kafkatest.ReplicatedTopic(t, cl, "split-datagrams", partitions),
		rf: kafkatest.ReplicationFactor(t, cl), partitions: partitions}
	st.state = st.datagrams + "-state"
	st.group = st.datagrams + "-group"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		adm := kadm.NewClient(kafkatest.Client(t))
		_, _ = adm.DeleteTopics(ctx, st.state)
		_, _ = adm.DeleteGroup(ctx, st.group)
	})
	return st
}

// splitConfig is the configuration of a role of the split collector: outlets write their
// flows, with their identity columns, to a file sink of their own.
func (st splitTopics) config(t *testing.T, mode string) Configuration {
	cfg := testConfig(t)
	cfg.Mode = mode
	cfg.Datagrams.Brokers = st.brokers
	cfg.Datagrams.Topic = st.datagrams
	cfg.Datagrams.ReplicationFactor = max(st.rf, 1)
	cfg.Outlet.Group = st.group
	cfg.Outlet.State.Topic = st.state
	cfg.Outlet.State.ReplicationFactor = max(st.rf, 1)
	cfg.Outlet.CommitInterval = 100 * time.Millisecond
	cfg.Inlet.Linger = time.Millisecond
	cfg.Schema.Enabled = []string{"DatagramPartition", "DatagramOffset", "DatagramIndex"}
	cfg.Outputs.File.Compression = "none"
	return cfg
}

// waitOutlets waits until every outlet has read the state topic and the group has settled
// with one member per outlet sharing every datagram partition. Traffic sent before that may
// reach an outlet whose partitions then move: the datagrams it holds for a template are read
// again by the next owner, which the exact counts of these tests would take for duplicates.
func (st splitTopics) waitOutlets(t *testing.T, outlets []*App) {
	t.Helper()
	testutil.WaitUntil(t, "the outlets to read the state topic", func() bool {
		for _, o := range outlets {
			if !o.Outlet().Ready() {
				return false
			}
		}
		return true
	})
	adm := kadm.NewClient(kafkatest.Client(t))
	var last string
	if !testutil.Poll(testutil.WaitTimeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gs, err := adm.DescribeGroups(ctx, st.group)
		if err != nil {
			last = err.Error()
			return false
		}
		g, ok := gs[st.group]
		if !ok {
			last = "no group"
			return false
		}
		covered := map[int32]bool{}
		for _, m := range g.Members {
			a, _ := m.Assigned.AsConsumer()
			if a == nil {
				continue
			}
			for _, tp := range a.Topics {
				if tp.Topic == st.datagrams {
					for _, p := range tp.Partitions {
						covered[p] = true
					}
				}
			}
		}
		last = fmt.Sprintf("state %s, %d members, %d partitions assigned", g.State, len(g.Members), len(covered))
		return g.State == "Stable" && len(g.Members) == len(outlets) && len(covered) == int(st.partitions)
	}) {
		t.Fatalf("the group %s did not settle with %d members: %s", st.group, len(outlets), last)
	}
}

// waitDecoded waits until the outlets have decoded sent datagrams, saying on timeout what
// each decoded and held.
func waitDecoded(t *testing.T, what string, outlets []*App, sent int64) {
	t.Helper()
	total := func() (d int64) {
		for _, o := range outlets {
			dd, _ := o.Outlet().Counts()
			d += dd
		}
		return d
	}
	if !testutil.Poll(testutil.WaitTimeout, func() bool { return total() == sent }) {
		var per []string
		for i, o := range outlets {
			d, f := o.Outlet().Counts()
			per = append(per, fmt.Sprintf("outlet %d: %d datagrams, %d flows, %d held", i, d, f, o.Outlet().Held()))
		}
		t.Fatalf("the outlets decoded %d datagrams of %s, want %d (%s)", total(), what, sent, strings.Join(per, "; "))
	}
}

// flowID is a flow's identity in a split collector: its datagram record's partition and
// offset, and its index among the datagram's flows.
type flowID struct {
	partition, index uint32
	offset           uint64
}

// storedFlowIDs reads the flow identities archived under dirs: how often each was stored,
// how many flows that makes, and how many identities were stored more than once.
func storedFlowIDs(t *testing.T, dirs []string) (ids map[flowID]int, stored, twice int) {
	t.Helper()
	ids = map[flowID]int{}
	for _, dir := range dirs {
		readFlowIDsOpts(t, dir, ids, false)
	}
	for _, n := range ids {
		stored += n
		if n > 1 {
			twice++
		}
	}
	return ids, stored, twice
}

func readFlowIDsOpts(t *testing.T, dir string, into map[flowID]int, partial bool) {
	s, err := schema.New(schema.Configuration{Enabled: []string{"DatagramPartition", "DatagramOffset", "DatagramIndex"}})
	if err != nil {
		t.Fatal(err)
	}
	fields := map[protowire.Number]schema.ColumnKey{}
	for _, k := range []schema.ColumnKey{schema.ColumnDatagramPartition, schema.ColumnDatagramOffset, schema.ColumnDatagramIndex} {
		fields[protowire.Number(s.Column(k).Field)] = k
	}
	files, err := file.ListArchives(dir, "flows")
	if partial && os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		r, err := file.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := r.Next()
			if errors.Is(err, io.EOF) || (partial && err != nil) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			var id flowID
			for len(msg) > 0 {
				num, typ, n := protowire.ConsumeTag(msg)
				if n < 0 {
					t.Fatalf("%s: malformed flow", path)
				}
				msg = msg[n:]
				if k, ok := fields[num]; ok && typ == protowire.VarintType {
					v, m := protowire.ConsumeVarint(msg)
					switch k {
					case schema.ColumnDatagramPartition:
						id.partition = uint32(v)
					case schema.ColumnDatagramOffset:
						id.offset = v
					case schema.ColumnDatagramIndex:
						id.index = uint32(v)
					}
					msg = msg[m:]
					continue
				}
				m := protowire.ConsumeFieldValue(num, typ, msg)
				if m < 0 {
					t.Fatalf("%s: malformed flow", path)
				}
				msg = msg[m:]
			}
			into[id]++
		}
		r.Close()
	}
}

// TestSplitCaptures: one inlet spreading datagrams at random over 6 partitions and three
// outlets of one group decode every capture of the test data exactly as `flowzero decode`
// does offline: the same number of flows, each stored once. Templates and their data sets go
// through different partitions, to different outlets: the state topic and the pending buffer
// make up for it.
func TestSplitCaptures(t *testing.T) {
	captures := testdata.AllCaptures(t)
	st := newSplitTopics(t, 6)
	var outlets []*App
	var dirs []string
	for range 3 {
		cfg := st.config(t, ModeOutlet)
		dirs = append(dirs, cfg.Outputs.File.Directory)
		outlets = append(outlets, startApp(t, cfg))
	}
	st.waitOutlets(t, outlets)
	in := startApp(t, st.config(t, ModeInlet))

	cfg := st.config(t, ModeOutlet)
	want, err := replay.Decode(replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}, captures, replay.DecodeOptions{}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want.Flows == 0 {
		t.Fatal("the captures give no flow")
	}
	total := func() (d, f int64) {
		for _, o := range outlets {
			dd, ff := o.Outlet().Counts()
			d, f = d+dd, f+ff
		}
		return
	}
	// The datagrams in capture order, one microsecond apart: the receive times order the
	// template definitions as the offline decoder sees them. A capture's datagrams are spread
	// over the partitions; the next capture starts once they are decoded (or held for a template
	// that a later capture brings, as offline): captures of one exporter that define a template ID differently would otherwise race
	// (docs/scaling.md), which the offline decoder, reading one file after the other, cannot.
	at := testutil.Now()
	sent := 0
	for _, path := range captures {
		dgs, err := pcapfile.ReadUDP(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, dg := range dgs {
			proto := replay.Protocol(dg.Payload)
			if datagram.ProtocolOf(proto) == 0 {
				continue
			}
			at = at.Add(time.Microsecond)
			in.Inlet().Forward(dg.Payload, dg.Src, at, proto)
			sent++
		}
		waitDecoded(t, filepath.Base(path), outlets, int64(sent))
	}
	testutil.WaitUntil(t, "the inlet to deliver every datagram", func() bool {
		_, delivered, dropped := in.Inlet().Counts()
		return delivered+dropped == int64(sent)
	})
	if _, _, dropped := in.Inlet().Counts(); dropped != 0 {
		t.Fatalf("the inlet dropped %d datagrams", dropped)
	}
	if !testutil.Poll(testutil.WaitTimeout, func() bool {
		d, f := total()
		return d == int64(sent) && f >= int64(want.Flows)
	}) {
		d, f := total()
		for i, o := range outlets {
			dd, ff := o.Outlet().Counts()
			t.Logf("outlet %d: %d datagrams, %d flows", i, dd, ff)
		}
		t.Fatalf("the outlets decoded %d datagrams (%d flows), want %d (%d flows)", d, f, sent, want.Flows)
	}
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, o := range outlets {
		if err := o.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	_, stored, twice := storedFlowIDs(t, dirs)
	d, f := total()
	t.Logf("%d capture files, %d datagrams: %d flows offline, %d decoded by the outlets (%d datagrams), %d stored, %d flow IDs stored twice",
		len(captures), sent, want.Flows, f, d, stored, twice)
	if stored != want.Flows || twice != 0 {
		t.Errorf("stored %d flows (%d twice), want %d as offline", stored, twice, want.Flows)
	}
}

// TestSplitInletRestart: the inlet stops (delivering what it buffered) and another starts in
// the middle of the traffic, outlets running: every flow of the datagrams the inlets took is
// stored once, and sent = delivered + dropped, the drops counted.
func TestSplitInletRestart(t *testing.T) {
	st := newSplitTopics(t, 6)
	capture := testdata.Path(t, "netflow", "data+templates.pcap")
	dgs, err := pcapfile.ReadUDP(capture)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.config(t, ModeOutlet)
	once, err := replay.Decode(replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}, []string{capture}, replay.DecodeOptions{}, io.Discard)
	if err != nil || once.Flows == 0 {
		t.Fatalf("offline: %d flows, %v", once.Flows, err)
	}
	var outlets []*App
	var dirs []string
	for range 3 {
		cfg := st.config(t, ModeOutlet)
		dirs = append(dirs, cfg.Outputs.File.Directory)
		outlets = append(outlets, startApp(t, cfg))
	}
	st.waitOutlets(t, outlets)
	at := testutil.Now()
	var sent, delivered, dropped int64
	for round := range 2 {
		in := startApp(t, st.config(t, ModeInlet))
		for range 100 {
			for _, dg := range dgs {
				at = at.Add(time.Millisecond)
				in.Inlet().Forward(dg.Payload, dg.Src, at, "netflow")
			}
		}
		if err := in.Stop(); err != nil {
			t.Fatalf("inlet %d: %v", round, err)
		}
		s, dl, dr := in.Inlet().Counts()
		if s != dl+dr {
			t.Fatalf("inlet %d: sent %d, delivered %d, dropped %d", round, s, dl, dr)
		}
		sent, delivered, dropped = sent+s, delivered+dl, dropped+dr
	}
	want := int(delivered) * once.Flows
	testutil.WaitUntil(t, fmt.Sprintf("the outlets to decode %d flows", want), func() bool {
		f := int64(0)
		for _, o := range outlets {
			_, ff := o.Outlet().Counts()
			f += ff
		}
		return f >= int64(want)
	})
	for _, o := range outlets {
		if err := o.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	ids, stored, twice := storedFlowIDs(t, dirs)
	t.Logf("two inlets one after the other: %d datagrams sent, %d delivered, %d dropped; %d flows stored, %d twice", sent, delivered, dropped, stored, twice)
	if stored != want || twice != 0 || len(ids) != want {
		t.Errorf("stored %d flows (%d distinct, %d twice), want %d", stored, len(ids), twice, want)
	}
}
