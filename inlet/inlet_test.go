package inlet

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
	"flowzero/internal/health"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
)

func kfakeTopic(t testing.TB, partitions int32) datagram.TopicConfiguration {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	topic := datagram.DefaultTopicConfiguration()
	topic.Brokers = cluster.ListenAddrs()
	topic.Partitions = partitions
	return topic
}

// consume reads n records of the topic.
func consume(t *testing.T, topic datagram.TopicConfiguration, n int) []*kgo.Record {
	cl, err := kgo.NewClient(kgo.SeedBrokers(topic.Brokers...), kgo.ConsumeTopics(topic.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	if len(out) != n {
		t.Fatalf("consumed %d records, want %d", len(out), n)
	}
	return out
}

// TestInletRecords: every datagram of every capture, forwarded as the collector's workers do,
// is a record that reads back to the same payload, exporter, protocol and receive time;
// spread over the partitions (key random) or keyed by the exporter's address.
func TestInletRecords(t *testing.T) {
	var dgs []datagram.Datagram
	for _, p := range testdata.AllCaptures(t) {
		in, err := pcapfile.ReadUDP(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, dg := range in {
			proto := datagram.ProtocolOf(replay.Protocol(dg.Payload))
			if proto == 0 {
				continue
			}
			dgs = append(dgs, datagram.Datagram{Received: testutil.Now(), Exporter: dg.Src, Protocol: proto, Payload: dg.Payload})
		}
	}
	for _, key := range []string{"random", "exporter"} {
		t.Run(key, func(t *testing.T) {
			topic := kfakeTopic(t, 4)
			cfg := DefaultConfiguration()
			cfg.Key, cfg.Linger = key, 0
			in, err := New(prometheus.NewRegistry(), nil, topic, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := in.Start(); err != nil {
				t.Fatal(err)
			}
			testutil.WaitUntil(t, "the topic to exist", in.ready.Load)
			for _, d := range dgs {
				in.Forward(d.Payload, d.Exporter, d.Received, d.Protocol.String())
			}
			in.Stop()
			if s, dl, dr := in.Counts(); s != int64(len(dgs)) || dl != s || dr != 0 {
				t.Fatalf("sent %d delivered %d dropped %d, want %d delivered", s, dl, dr, len(dgs))
			}
			recs := consume(t, topic, len(dgs))
			want := map[string]int{}
			for _, d := range dgs {
				want[string(datagram.Append(nil, d))]++
			}
			partitions := map[int32]int{}
			for _, r := range recs {
				d, err := datagram.Parse(r.Value)
				if err != nil {
					t.Fatal(err)
				}
				want[string(r.Value)]--
				partitions[r.Partition]++
				if key == "exporter" {
					a := d.Exporter.Addr()
					if k, _ := netip.AddrFromSlice(r.Key); k != a {
						t.Fatalf("record key % x, exporter %s", r.Key, a)
					}
				} else if r.Key != nil {
					t.Fatalf("random spreading with a key % x", r.Key)
				}
				if !r.Timestamp.Equal(d.Received.Truncate(time.Millisecond)) {
					t.Errorf("record timestamp %s, received %s", r.Timestamp, d.Received)
				}
			}
			for v, n := range want {
				if n != 0 {
					d, _ := datagram.Parse([]byte(v))
					t.Fatalf("datagram from %s: %+d (lost or duplicated)", d.Exporter, n)
				}
			}
			if key == "random" && len(partitions) != 4 {
				t.Errorf("random spreading used partitions %v", partitions)
			}
		})
	}
}

// startUnreachable starts an inlet whose broker never answers, with a 1 MiB buffer and a
// 200 ms flush timeout at its stop: everything it is given ends up dropped and counted.
func startUnreachable(t *testing.T, reg *prometheus.Registry) *Inlet {
	t.Helper()
	topic := datagram.DefaultTopicConfiguration()
	topic.Brokers = []string{"127.0.0.1:1"}
	cfg := DefaultConfiguration()
	cfg.MaxBufferedBytes = 1 << 20
	cfg.FlushTimeout = 200 * time.Millisecond
	in, err := New(reg, nil, topic, cfg)
	if err != nil {
		t.Fatal(err)
	}
	in.Start()
	return in
}

// TestInletBufferFull: with no broker, datagrams beyond max-buffered-bytes are dropped at
// once and the rest when the stop's flush times out: sent = delivered + dropped.
func TestInletBufferFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	in := startUnreachable(t, reg)
	payload := make([]byte, 1400)
	ap := netip.MustParseAddrPort("192.0.2.1:2055")
	for range 2000 {
		in.Forward(payload, ap, testutil.Now(), "netflow")
	}
	in.Stop()
	var s, dl, dr int64
	if !testutil.Poll(testutil.WaitTimeout, func() bool { s, dl, dr = in.Counts(); return dl+dr == s }) || dr == 0 {
		t.Fatalf("sent %d delivered %d dropped %d", s, dl, dr)
	}
	full := testutilCounter(t, reg, "flowzero_inlet_datagrams_dropped_total", "buffer-full")
	failed := testutilCounter(t, reg, "flowzero_inlet_datagrams_dropped_total", "delivery-failed")
	if full == 0 || failed == 0 || int64(full+failed) != dr {
		t.Fatalf("dropped %d: buffer-full %v, delivery-failed %v", dr, full, failed)
	}
}

// TestInletHealthUnreachable: with no broker, /healthz's inlet is degraded: the topic cannot
// be checked, records stay unacknowledged past flush-timeout, and datagrams were dropped
// (buffer-full); its counters are the datagrams'.
func TestInletHealthUnreachable(t *testing.T) {
	in := startUnreachable(t, prometheus.NewRegistry())
	defer in.Stop()
	if in.Name() != "inlet" {
		t.Errorf("name %q", in.Name())
	}
	payload := make([]byte, 1400)
	ap := netip.MustParseAddrPort("192.0.2.1:2055")
	for range 2000 {
		in.Forward(payload, ap, testutil.Now(), "netflow")
	}
	var h health.Report
	testutil.WaitUntil(t, "the inlet degraded by the topic, the delivery and the drops", func() bool {
		h = in.Health()
		return h.Status == health.Degraded &&
			strings.Contains(h.Reason, "cannot create or check the datagrams topic flowzero-datagrams") &&
			strings.Contains(h.Reason, "(inlet.flush-timeout 200ms)") &&
			strings.Contains(h.Reason, "datagrams dropped (buffer-full)")
	})
	_, _, dropped := in.Counts()
	if c := h.Counters; c["datagrams-sent"] != 2000 || c["datagrams-dropped"] == 0 || c["datagrams-dropped"] > uint64(dropped) ||
		c["records-buffered"] == 0 {
		t.Errorf("counters %v", c)
	}
}

// TestInletMaxMessageBytes: a broker or a topic taking record batches up to 256 KiB
// (message.max.bytes, max.message.bytes) refuses the producer's batches of 1 MiB
// (max-message-bytes' default) whole, though each record fits: /healthz names the key and
// both limits, and the refused datagrams are counted as too-large. With max-message-bytes at
// the limit, every datagram is delivered.
func TestInletMaxMessageBytes(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		brokerLimit, topicLimit string
		maxMessageBytes         int
		source                  string // of the limit in /healthz; "" when ok
	}{
		{"broker's limit", "262144", "", 1 << 20, "message.max.bytes of broker 0"},
		{"topic's limit", "", "262144", 1 << 20, "max.message.bytes of the topic"},
		{"at the broker's limit", "262144", "", 256 << 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []kfake.Opt{kfake.NumBrokers(1)}
			if tc.brokerLimit != "" {
				opts = append(opts, kfake.BrokerConfigs(map[string]string{"message.max.bytes": tc.brokerLimit}))
			}
			cluster, err := kfake.NewCluster(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			topic := datagram.DefaultTopicConfiguration()
			topic.Brokers = cluster.ListenAddrs()
			topic.Partitions = 1
			if tc.topicLimit != "" {
				cl, err := kgo.NewClient(kgo.SeedBrokers(topic.Brokers...))
				if err != nil {
					t.Fatal(err)
				}
				_, err = kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, map[string]*string{"max.message.bytes": &tc.topicLimit}, topic.Topic)
				cl.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			cfg := DefaultConfiguration()
			cfg.Compression = "none"
			cfg.Linger = time.Minute // the stop's flush sends everything at once, in the largest batches
			cfg.MaxMessageBytes = tc.maxMessageBytes
			reg := prometheus.NewRegistry()
			in, err := New(reg, nil, topic, cfg)
			if err != nil {
				t.Fatal(err)
			}
			in.Start()
			testutil.WaitUntil(t, "the topic to be checked", in.ready.Load)
			condition := "the topic flowzero-datagrams takes record batches up to 262144 bytes (" + tc.source +
				"), below inlet.max-message-bytes 1048576: larger batches are refused"
			if h := in.Health(); (tc.source != "") != strings.Contains(h.Reason, condition) {
				t.Errorf("health %+v", h)
			}
			b := in.NewBatch()
			payload := make([]byte, 1400)
			ap := netip.MustParseAddrPort("192.0.2.1:2055")
			for k := range 16 * 40 { // 40 records of 16 datagrams (22 KiB each)
				b.Add(payload, ap, testutil.Now(), "netflow")
				if k%16 == 15 {
					b.Send(testutil.Now(), true)
				}
			}
			in.Stop()
			s, dl, dr := in.Counts()
			tooLarge := testutilCounter(t, reg, "flowzero_inlet_datagrams_dropped_total", "too-large")
			h := in.Health()
			switch {
			case s != 640 || dl+dr != s:
				t.Fatalf("sent %d delivered %d dropped %d", s, dl, dr)
			case tc.source != "" && (dr == 0 || tooLarge != float64(dr) || !strings.Contains(h.Reason, "datagrams dropped (too-large)")):
				t.Errorf("dropped %d, too-large %v, health %+v", dr, tooLarge, h)
			case tc.source == "" && (dr != 0 || h.Status != health.OK):
				t.Errorf("dropped %d with max-message-bytes at the limit, health %+v", dr, h)
			}
		})
	}
}

func testutilCounter(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if reason == "" {
				return m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{reason=%q}", name, reason)
	return 0
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Configuration)
		err    string
	}{
		{func(c *Configuration) { c.Key = "hash" }, `key: must be random or exporter, not "hash"`},
		{func(c *Configuration) { c.Compression = "brotli" }, "compression: must be"},
		{func(c *Configuration) { c.MaxBufferedBytes = 10 }, "max-buffered-bytes: must be at least 1 MiB"},
		{func(c *Configuration) { c.FlushTimeout = 0 }, "flush-timeout: must be positive"},
		{func(c *Configuration) { c.BatchWait = -time.Millisecond }, "batch-wait: must be between 0 and 1s, not -1ms"},
		{func(c *Configuration) { c.BatchBytes = 1 << 20 }, "batch-bytes: must be between 2048 and max-message-bytes less 1024 (1047552), not 1048576"},
		{func(c *Configuration) { c.MaxMessageBytes = 64 << 10 }, "batch-bytes: must be between 2048 and max-message-bytes less 1024 (64512), not 65536"},
		{func(c *Configuration) { c.MaxMessageBytes = 1024 }, "max-message-bytes: must be between 3072 and 67108864, not 1024"},
		{func(c *Configuration) { c.BatchBytes = 100 }, "batch-bytes: must be between 2048"},
	} {
		c := DefaultConfiguration()
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("got %v, want %q", err, tc.err)
		}
	}
	for _, n := range []int32{0, datagram.MaxPartitions + 1} {
		topic := datagram.DefaultTopicConfiguration()
		topic.Partitions = n
		if err := topic.Validate(); err == nil || err.Error() != fmt.Sprintf("partitions: must be from 1 to 65535, not %d", n) {
			t.Errorf("%d partitions: got %v", n, err)
		}
	}
}

// TestInletBatches: the datagrams of every capture, packed by workers' batches as the
// collector hands them (a Send after every 16, as after a read), read back from the topic's
// batch records with their payload, exporter, protocol and receive time, each once; records
// stay within batch-bytes; with key exporter a record holds one exporter's datagrams and is
// keyed by its address. sent, delivered and the metrics count datagrams, not records.
func TestInletBatches(t *testing.T) {
	var dgs []datagram.Datagram
	for _, p := range testdata.AllCaptures(t) {
		in, err := pcapfile.ReadUDP(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, dg := range in {
			if proto := datagram.ProtocolOf(replay.Protocol(dg.Payload)); proto != 0 {
				dgs = append(dgs, datagram.Datagram{Received: testutil.Now().Add(time.Duration(len(dgs)) * time.Microsecond),
					Exporter: dg.Src, Protocol: proto, Payload: dg.Payload})
			}
		}
	}
	for _, key := range []string{"random", "exporter"} {
		t.Run(key, func(t *testing.T) {
			topic := kfakeTopic(t, 4)
			cfg := DefaultConfiguration()
			cfg.Key, cfg.Linger, cfg.BatchBytes = key, 0, 8192
			reg := prometheus.NewRegistry()
			in, err := New(reg, nil, topic, cfg)
			if err != nil {
				t.Fatal(err)
			}
			in.Start()
			testutil.WaitUntil(t, "the topic to exist", in.ready.Load)
			b := in.NewBatch()
			for k, d := range dgs {
				b.Add(d.Payload, d.Exporter, d.Received, d.Protocol.String())
				if k%16 == 15 {
					b.Send(d.Received, false)
				}
			}
			b.Send(testutil.Now(), true)
			in.Stop()
			if s, dl, dr := in.Counts(); s != int64(len(dgs)) || dl != s || dr != 0 {
				t.Fatalf("sent %d delivered %d dropped %d, want %d delivered", s, dl, dr, len(dgs))
			}
			records := int(testutilCounter(t, reg, "flowzero_inlet_records_sent_total", ""))
			if records >= len(dgs) {
				t.Fatalf("%d records for %d datagrams", records, len(dgs))
			}
			want := map[string]int{}
			for _, d := range dgs {
				want[string(datagram.Append(nil, d))]++
			}
			for _, r := range consume(t, topic, records) {
				if r.Value[0] != datagram.VersionBatch || len(r.Value) > cfg.BatchBytes && datagram.BatchLen(r.Value) > 1 {
					t.Fatalf("record of version %d, %d bytes, %d datagrams", r.Value[0], len(r.Value), datagram.BatchLen(r.Value))
				}
				rd := datagram.NewReader(r.Value)
				first := true
				for rd.Next() {
					d := rd.Datagram()
					want[string(datagram.Append(nil, d))]--
					if first && !r.Timestamp.Equal(d.Received.Truncate(time.Millisecond)) {
						t.Errorf("record timestamp %s, first datagram received %s", r.Timestamp, d.Received)
					}
					first = false
					if k, _ := netip.AddrFromSlice(r.Key); key == "exporter" && k != d.Exporter.Addr() {
						t.Fatalf("record key % x holds a datagram of %s", r.Key, d.Exporter)
					}
				}
				if err := rd.Err(); err != nil {
					t.Fatal(err)
				}
			}
			for v, n := range want {
				if n != 0 {
					d, _ := datagram.Parse([]byte(v))
					t.Fatalf("datagram from %s: %+d (lost or duplicated)", d.Exporter, n)
				}
			}
		})
	}
}

// TestInletBatchWait: with batch-wait, a worker's record stays open across reads until it
// has waited batch-wait, and Due says when.
func TestInletBatchWait(t *testing.T) {
	topic := kfakeTopic(t, 1)
	cfg := DefaultConfiguration()
	cfg.BatchWait = time.Millisecond
	reg := prometheus.NewRegistry()
	in, err := New(reg, nil, topic, cfg)
	if err != nil {
		t.Fatal(err)
	}
	in.Start()
	defer in.Stop()
	b := in.NewBatch()
	if !b.Due().IsZero() {
		t.Fatalf("empty batch due at %s", b.Due())
	}
	now := testutil.Now()
	ap := netip.MustParseAddrPort("192.0.2.1:2055")
	b.Add([]byte{0, 9}, ap, now, "netflow")
	b.Send(now.Add(500*time.Microsecond), false)
	b.Add([]byte{0, 9}, ap, now.Add(600*time.Microsecond), "netflow")
	if due := b.Due(); !due.Equal(now.Add(time.Millisecond)) {
		t.Fatalf("due at %s, want %s", due, now.Add(time.Millisecond))
	}
	b.Send(now.Add(900*time.Microsecond), false)
	if n := testutilCounter(t, reg, "flowzero_inlet_records_sent_total", ""); n != 0 {
		t.Fatalf("%v records sent before batch-wait", n)
	}
	b.Send(now.Add(time.Millisecond), false)
	if n := testutilCounter(t, reg, "flowzero_inlet_records_sent_total", ""); n != 1 || !b.Due().IsZero() {
		t.Fatalf("%v records sent at batch-wait, due %s", n, b.Due())
	}
	testutil.WaitUntil(t, "2 datagrams delivered", func() bool { _, dl, _ := in.Counts(); return dl == 2 })
}

// TestInletBatchDropsCountDatagrams: batch records that cannot be delivered count their
// datagrams as dropped, not the records: sent = delivered + dropped in datagrams.
func TestInletBatchDropsCountDatagrams(t *testing.T) {
	reg := prometheus.NewRegistry()
	in := startUnreachable(t, reg)
	payload := make([]byte, 1400)
	ap := netip.MustParseAddrPort("192.0.2.1:2055")
	b := in.NewBatch()
	for k := range 2000 {
		b.Add(payload, ap, testutil.Now(), "netflow")
		if k%16 == 15 {
			b.Send(testutil.Now(), true)
		}
	}
	b.Send(testutil.Now(), true)
	in.Stop()
	var s, dl, dr int64
	if !testutil.Poll(testutil.WaitTimeout, func() bool { s, dl, dr = in.Counts(); return dl+dr == s }) || s != 2000 || dr != 2000 {
		t.Fatalf("sent %d delivered %d dropped %d, want 2000 sent and dropped", s, dl, dr)
	}
	full := testutilCounter(t, reg, "flowzero_inlet_datagrams_dropped_total", "buffer-full")
	failed := testutilCounter(t, reg, "flowzero_inlet_datagrams_dropped_total", "delivery-failed")
	records := testutilCounter(t, reg, "flowzero_inlet_records_sent_total", "")
	if full == 0 || int64(full+failed) != dr || records != 125 {
		t.Fatalf("dropped %d: buffer-full %v, delivery-failed %v, in %v records (want 125)", dr, full, failed, records)
	}
}
