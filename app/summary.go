package app

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"flowzero/internal/clock"
	"flowzero/output"
	"flowzero/schema"
)

// SummarySink counts flows by exporter, protocol and source AS and prints a line of top
// entries every interval: the live view of `make run` until a console exists. It decodes
// every message, so it is meant for demo volumes.
type SummarySink struct {
	s        *schema.Schema
	w        io.Writer
	interval time.Duration
	clock    clock.Clock // the time printed on each line

	mu        sync.Mutex
	flows     int
	bytes     uint64
	exporters map[string]int    // by name, or address when the exporter has none
	inIfs     map[string]uint64 // bytes by exporter and input interface name
	protos    map[uint64]int
	srcAS     map[uint64]uint64 // bytes
	stop      chan struct{}
	done      chan struct{}
}

// NewSummarySink returns a summary printer writing to w.
func NewSummarySink(s *schema.Schema, w io.Writer, interval time.Duration) *SummarySink {
	return &SummarySink{s: s, w: w, interval: interval, clock: clock.System{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// Name implements output.Sink.
func (s *SummarySink) Name() string { return "summary" }

// Start starts printing.
func (s *SummarySink) Start() error {
	s.reset()
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.print()
			}
		}
	}()
	return nil
}

// Stop stops printing.
func (s *SummarySink) Stop() error {
	close(s.stop)
	<-s.done
	return nil
}

func (s *SummarySink) reset() {
	s.flows, s.bytes = 0, 0
	s.exporters = map[string]int{}
	s.inIfs = map[string]uint64{}
	s.protos = map[uint64]int{}
	s.srcAS = map[uint64]uint64{}
}

// Send counts the batch's flows.
func (s *SummarySink) Send(b *output.Batch) bool {
	defer b.Release()
	s.mu.Lock()
	defer s.mu.Unlock()
	data := b.Data
	for len(data) > 0 {
		l, n := binary.Uvarint(data)
		if n <= 0 || uint64(len(data)-n) < l {
			return false
		}
		msg := data[n : n+int(l)]
		data = data[n+int(l):]
		var bytes, rate, as uint64 = 0, 1, 0
		var exporter, name, inIf string
		s.s.DecodeMessage(msg, func(c *schema.Column, v any) {
			switch c.Key {
			case schema.ColumnExporterAddress:
				exporter = v.(netip.Addr).String()
			case schema.ColumnExporterName:
				name = v.(string)
			case schema.ColumnInIfName:
				inIf = v.(string)
			case schema.ColumnProto:
				s.protos[v.(uint64)]++
			case schema.ColumnBytes:
				bytes = v.(uint64)
			case schema.ColumnSamplingRate:
				rate = max(v.(uint64), 1)
			case schema.ColumnSrcAS:
				as = v.(uint64)
			}
		})
		if name != "" {
			exporter = name
		}
		s.exporters[exporter]++
		if inIf != "" {
			s.inIfs[exporter+" "+inIf] += bytes * rate
		}
		s.flows++
		s.bytes += bytes * rate
		s.srcAS[as] += bytes * rate
	}
	return true
}

var protoNames = map[uint64]string{1: "ICMP", 6: "TCP", 17: "UDP", 58: "ICMPv6"}

func (s *SummarySink) print() {
	s.mu.Lock()
	defer s.mu.Unlock()
	secs := s.interval.Seconds()
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %.0f flows/s, %.1f Mbps (sampling-corrected)", s.clock.Now().Format("15:04:05"),
		float64(s.flows)/secs, float64(s.bytes)*8/secs/1e6)
	type kv struct {
		k string
		v uint64
	}
	top := func(m []kv, n int) string {
		sort.Slice(m, func(i, j int) bool { return m[i].v > m[j].v || m[i].v == m[j].v && m[i].k < m[j].k })
		var parts []string
		for i := 0; i < len(m) && i < n; i++ {
			parts = append(parts, fmt.Sprintf("%s %d", m[i].k, m[i].v))
		}
		return strings.Join(parts, ", ")
	}
	var exps, protos, ases, ifs []kv
	for k, v := range s.exporters {
		exps = append(exps, kv{k, uint64(v)})
	}
	for k, v := range s.inIfs {
		ifs = append(ifs, kv{k, v * 8 / uint64(secs) / 1e6})
	}
	for k, v := range s.protos {
		name, ok := protoNames[k]
		if !ok {
			name = fmt.Sprint(k)
		}
		protos = append(protos, kv{name, uint64(v)})
	}
	for k, v := range s.srcAS {
		ases = append(ases, kv{fmt.Sprintf("AS%d", k), v * 8 / uint64(secs) / 1e6})
	}
	fmt.Fprintf(&b, "\n  exporters (flows): %s\n  protocols (flows): %s\n  top source AS (Mbps): %s\n",
		top(exps, 5), top(protos, 5), top(ases, 5))
	if len(ifs) > 0 {
		fmt.Fprintf(&b, "  top input interfaces (Mbps): %s\n", top(ifs, 4))
	}
	io.WriteString(s.w, b.String())
	s.reset()
}
