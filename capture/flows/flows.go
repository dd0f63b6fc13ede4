// Package flows turns the packets a capture server receives into flows for the collector's
// pipeline, as a software exporter (softflowd, pmacct's pmacctd) would: one flow per
// (interface, addresses, protocol, ports), exported on idle and active timeouts of packet time.
package flows

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"flowzero/capture/server"
	"flowzero/decoder/packet"
	"flowzero/internal/config"
	"flowzero/output"
	"flowzero/schema"
)

// Configuration configures flows from captured packets.
type Configuration struct {
	// Enable turns captured packets into flows.
	Enable bool `yaml:"enable"`
	// ActiveTimeout exports a long flow at least this often (as a software exporter would).
	ActiveTimeout time.Duration `yaml:"active-timeout"`
	// IdleTimeout exports a flow after this long without a packet.
	IdleTimeout time.Duration `yaml:"idle-timeout"`
	// MaxFlows bounds each agent's flow table; a packet of a new flow that does not fit is
	// exported at once as a one-packet flow.
	MaxFlows int `yaml:"max-flows"`
	// Packet configures the header parser (decapsulation).
	Packet packet.Configuration `yaml:"packet"`
}

// DefaultConfiguration returns the defaults: off, 60 s active, 15 s idle timeouts.
func DefaultConfiguration() Configuration {
	return Configuration{ActiveTimeout: time.Minute, IdleTimeout: 15 * time.Second, MaxFlows: 1 << 16,
		Packet: packet.DefaultConfiguration()}
}

// Validate checks the configuration and names the bad key.
func (c *Configuration) Validate() error {
	if !c.Enable {
		return nil
	}
	if c.ActiveTimeout < time.Second {
		return config.Errorf("active-timeout", "%v: want at least 1s", c.ActiveTimeout)
	}
	if c.IdleTimeout < time.Second || c.IdleTimeout > c.ActiveTimeout {
		return config.Errorf("idle-timeout", "%v: want 1s to active-timeout", c.IdleTimeout)
	}
	if c.MaxFlows < 1 {
		return config.Errorf("max-flows", "%d: want at least 1", c.MaxFlows)
	}
	if err := c.Packet.Validate(); err != nil {
		return config.Prefix("packet", err)
	}
	return nil
}

// flowHeaderLen is how much of a flow's first packet is kept for its columns (sFlow's default
// sampled header is 128 bytes; tunnels need more).
const flowHeaderLen = 256

type flowKey struct {
	iface            uint32
	src, dst         netip.Addr
	proto            uint8
	srcPort, dstPort uint16
}

type flowEntry struct {
	key            flowKey
	first, last    int64 // packet time, ns
	packets, bytes uint64
	tcpFlags       uint16
	linkType       uint16
	hdrLen         uint16
	hdr            [flowHeaderLen]byte
}

// flowTable aggregates one agent's packets; it is the agent's server.AgentConsumer. Not safe
// for concurrent use: the server calls it under the agent's output lock.
type flowTable struct {
	agg      *Aggregator // nil for a table made by a test
	cfg      Configuration
	parser   *packet.Parser
	fm       *schema.FlowMessage
	emit     func(*schema.FlowMessage)
	agent    string
	exporter netip.Addr
	m        agentMetrics

	index    map[flowKey]int32
	entries  []flowEntry
	free     []int32
	clock    int64 // latest packet time
	lastScan int64
	lastWall time.Time

	stats Stats
}

// Stats counts a flow table's work.
type Stats struct {
	Flows, Packets, NotIP, ParseErrors, TableFull uint64
}

func newFlowTable(cfg Configuration, parser *packet.Parser, s *schema.Schema, emit func(*schema.FlowMessage), agent string) *flowTable {
	return &flowTable{cfg: cfg, parser: parser, fm: s.NewFlowMessage(), emit: emit, agent: agent,
		index: map[flowKey]int32{}, m: newMetrics(nil).forAgent(agent)}
}

// Connected records the agent's address: the flows' exporter address.
func (t *flowTable) Connected(remote netip.Addr) { t.exporter = remote }

// Packet accounts one packet (server.AgentConsumer).
func (t *flowTable) Packet(iface uint32, linkType uint16, ts int64, length uint32, data []byte) {
	t.add(iface, linkType, ts, int(length), data)
}

// Tick exports the flows of an agent gone quiet, or all of them at stop.
func (t *flowTable) Tick(now time.Time, stop bool) {
	if stop {
		t.expire(true)
		return
	}
	t.expireQuiet(now)
}

// add accounts one packet of the given original length.
func (t *flowTable) add(iface uint32, linkType uint16, ts int64, length int, data []byte) {
	t.lastWall = time.Time{} // set by the next Tick
	key, l3, flags, ok := extractFlowKey(data, linkType, length)
	if !ok {
		t.stats.NotIP++
		t.m.notIP.Inc()
		return
	}
	key.iface = iface
	t.stats.Packets++
	if ts > t.clock {
		t.clock = ts
	}
	i, found := t.index[key]
	if !found {
		if len(t.index) >= t.cfg.MaxFlows {
			t.stats.TableFull++
			t.m.tableFull.Inc()
			var e flowEntry
			t.fill(&e, key, linkType, ts, data)
			e.packets, e.bytes, e.tcpFlags = 1, uint64(l3), flags
			t.export(&e)
			return
		}
		if n := len(t.free); n > 0 {
			i = t.free[n-1]
			t.free = t.free[:n-1]
		} else {
			t.entries = append(t.entries, flowEntry{})
			i = int32(len(t.entries) - 1)
		}
		t.fill(&t.entries[i], key, linkType, ts, data)
		t.index[key] = i
	}
	e := &t.entries[i]
	e.last = max(e.last, ts)
	e.packets++
	e.bytes += uint64(l3)
	e.tcpFlags |= flags
	if t.clock-t.lastScan >= int64(time.Second) {
		t.expire(false)
	}
}

func (t *flowTable) fill(e *flowEntry, key flowKey, linkType uint16, ts int64, data []byte) {
	e.key, e.first, e.last, e.packets, e.bytes, e.tcpFlags, e.linkType = key, ts, ts, 0, 0, 0, linkType
	e.hdrLen = uint16(copy(e.hdr[:], data))
}

// expire exports idle flows and the active ones past their active timeout (all with force).
func (t *flowTable) expire(force bool) {
	t.lastScan = t.clock
	idle, active := int64(t.cfg.IdleTimeout), int64(t.cfg.ActiveTimeout)
	for key, i := range t.index {
		e := &t.entries[i]
		switch {
		case force || t.clock-e.last >= idle:
			t.export(e)
			delete(t.index, key)
			t.free = append(t.free, i)
		case t.clock-e.first >= active:
			t.export(e)
			e.first, e.packets, e.bytes, e.tcpFlags = e.last, 0, 0, 0
		}
	}
}

// expireQuiet exports everything once the agent has sent no packet for IdleTimeout of wall
// time (a live capture that went quiet: packet time no longer advances).
func (t *flowTable) expireQuiet(now time.Time) {
	if t.lastWall.IsZero() {
		t.lastWall = now // packets since the last tick
		return
	}
	if len(t.index) > 0 && now.Sub(t.lastWall) >= t.cfg.IdleTimeout {
		t.expire(true)
	}
}

func (t *flowTable) export(e *flowEntry) {
	if e.packets == 0 {
		return
	}
	fm := t.fm
	fm.Reset()
	fm.TimeReceived = uint64(e.last / int64(time.Second))
	fm.SamplingRate = 1
	fm.ExporterAddress = t.exporter
	fm.InIf = e.key.iface + 1
	fm.SrcAddr, fm.DstAddr = e.key.src, e.key.dst
	fm.AppendUint(schema.ColumnBytes, e.bytes)
	fm.AppendUint(schema.ColumnPackets, e.packets)
	fm.AppendString(schema.ColumnExporterName, t.agent)
	if e.key.proto == 6 {
		fm.AppendUint(schema.ColumnTCPFlags, uint64(e.tcpFlags)) // before the first packet's
	}
	hdr := e.hdr[:e.hdrLen]
	var err error
	switch layers.LinkType(e.linkType) {
	case layers.LinkTypeEthernet:
		_, err = t.parser.ParseEthernet(hdr, fm)
	default:
		_, err = t.parser.ParseIP(hdr, fm)
	}
	if err != nil {
		t.stats.ParseErrors++
		t.m.parseErrors.Inc()
	}
	t.stats.Flows++
	t.m.flows.Inc()
	t.emit(fm)
}

// extractFlowKey reads the 5-tuple, the L3 length and the TCP flags of a packet: Ethernet with
// VLAN tags and MPLS labels, or raw IP, IPv6 extension headers walked. Tunnels are not followed here (the
// flow key is the outer packet's); decoder/packet applies the configured decapsulation at
// export.
//
// length is the packet's original length. A length field of 0 in the IP header is what Linux
// leaves in packets larger than 64 KiB (TSO, GSO, BIG TCP) that a capture sees before
// segmentation: IPv4 total length 0 (tcpdump prints "[was 0, presumed TSO]"), IPv6 payload
// length 0 with a hop-by-hop jumbo payload option (RFC 2675), or, since Linux 7.0, without
// one. The L3 length of such a packet is then its original length minus the link header.
func extractFlowKey(data []byte, linkType uint16, length int) (k flowKey, l3 int, flags uint16, ok bool) {
	// The original length from the IP header on: the captured bytes may be fewer.
	wireLen, orig := max(length, len(data)), data
	switch layers.LinkType(linkType) {
	case layers.LinkTypeEthernet:
		if len(data) < 14 {
			return k, 0, 0, false
		}
		etherType := binary.BigEndian.Uint16(data[12:14])
		data = data[14:]
		for etherType == 0x8100 || etherType == 0x88a8 || etherType == 0x9100 { // IEEE 802.1Q/ad
			if len(data) < 4 {
				return k, 0, 0, false
			}
			etherType = binary.BigEndian.Uint16(data[2:4])
			data = data[4:]
		}
		if etherType == 0x8847 || etherType == 0x8848 {
			// RFC 3032 label stack: walk to the bottom of stack; its payload is IP when the
			// label is an explicit null or the first nibble says so (as decoder/packet does).
			for {
				if len(data) < 4 {
					return k, 0, 0, false
				}
				entry := binary.BigEndian.Uint32(data[0:4])
				data = data[4:]
				if entry&0x100 != 0 {
					break
				}
			}
			etherType = 0x0800 // the version nibble below tells IPv4 from IPv6
		}
		if etherType != 0x0800 && etherType != 0x86dd {
			return k, 0, 0, false
		}
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
	default:
		return k, 0, 0, false
	}
	if len(data) < 1 {
		return k, 0, 0, false
	}
	wireLen -= len(orig) - len(data) // the link header
	var transport []byte
	switch data[0] >> 4 {
	case 4: // RFC 791 §3.1
		if len(data) < 20 {
			return k, 0, 0, false
		}
		ihl := int(data[0]&0x0f) * 4
		k.src = netip.AddrFrom4([4]byte(data[12:16]))
		k.dst = netip.AddrFrom4([4]byte(data[16:20]))
		k.proto = data[9]
		l3 = int(binary.BigEndian.Uint16(data[2:4]))
		if l3 == 0 { // RFC 791 forbids it: a packet not yet segmented
			l3 = wireLen
		}
		if binary.BigEndian.Uint16(data[6:8])&0x1fff == 0 && ihl >= 20 && len(data) >= ihl {
			transport = data[ihl:]
		}
	case 6: // RFC 8200 §3
		if len(data) < 40 {
			return k, 0, 0, false
		}
		k.src = netip.AddrFrom16([16]byte(data[8:24]))
		k.dst = netip.AddrFrom16([16]byte(data[24:40]))
		k.proto = data[6]
		l3 = int(binary.BigEndian.Uint16(data[4:6])) + 40
		if l3 == 40 && (k.proto == 0 || wireLen > 0xffff+40) {
			// A jumbogram (hop-by-hop first) or a packet not yet segmented: a real empty
			// payload cannot be told from Ethernet padding otherwise.
			l3 = wireLen
		}
		transport = data[40:]
		// Extension headers (RFC 8200 §4), a bounded walk: each is at least 8 bytes.
	walk:
		for len(transport) >= 8 {
			switch k.proto {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				n := (int(transport[1]) + 1) * 8
				if len(transport) < n {
					transport = nil
					break walk
				}
				k.proto, transport = transport[0], transport[n:]
			case 44: // fragment: only the first one carries the ports
				first := binary.BigEndian.Uint16(transport[2:4])>>3 == 0
				k.proto, transport = transport[0], transport[8:]
				if !first {
					transport = nil
					break walk
				}
			default:
				break walk
			}
		}
	default:
		return k, 0, 0, false
	}
	switch k.proto {
	case 6, 17, 33, 132, 136: // TCP, UDP, DCCP, SCTP, UDP-Lite: ports first
		if len(transport) >= 4 {
			k.srcPort = binary.BigEndian.Uint16(transport[0:2])
			k.dstPort = binary.BigEndian.Uint16(transport[2:4])
		}
		if k.proto == 6 && len(transport) >= 14 {
			flags = binary.BigEndian.Uint16(transport[12:14]) & 0x0fff
		}
	}
	return k, l3, flags, true
}

// Aggregator is the server's PacketConsumer: one flow table per agent. A flow counts packets,
// L3 bytes and the OR of the TCP flags; its other columns come from its first packet's
// headers, parsed by decoder/packet as sFlow's sampled headers are. SamplingRate is 1,
// ExporterAddress the agent's address, ExporterName its name, InIf its interface index plus
// one (SNMP indexes start at 1) and TimeReceived the time of the flow's last packet.
type Aggregator struct {
	cfg     Configuration
	parser  *packet.Parser
	schema  *schema.Schema
	emit    func(*schema.FlowMessage)
	flush   func()
	metrics *metrics

	mu     sync.Mutex
	tables map[string]*flowTable
}

var _ server.PacketConsumer = (*Aggregator)(nil)

// New returns an aggregator emitting each flow to emit (which must finalize or copy it before
// returning; SinkEmitter.Emit feeds the collector's sinks). flush, when not nil, is called
// after the server's output flushes and at its Stop (SinkEmitter.Flush).
func New(r prometheus.Registerer, cfg Configuration, s *schema.Schema, emit func(*schema.FlowMessage), flush func()) (*Aggregator, error) {
	cfg.Enable = true
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	parser, err := packet.New(cfg.Packet)
	if err != nil {
		return nil, err
	}
	return &Aggregator{cfg: cfg, parser: parser, schema: s, emit: emit, flush: flush,
		metrics: newMetrics(r), tables: map[string]*flowTable{}}, nil
}

// ForAgent returns a new flow table for the agent (server.PacketConsumer). It replaces the
// table of an agent of that name whose Close has not finished.
func (a *Aggregator) ForAgent(name string) server.AgentConsumer {
	t := newFlowTable(a.cfg, a.parser, a.schema, a.emit, name)
	t.agg, t.m = a, a.metrics.forAgent(name)
	a.mu.Lock()
	a.tables[name] = t
	a.mu.Unlock()
	return t
}

// Close exports the flows of an agent the server forgot (output.idle-close), so that none is
// lost, then drops the table and, unless the agent is back with a new table, its metric
// series (server.AgentConsumer).
func (t *flowTable) Close() {
	t.expire(true)
	if t.agg == nil {
		return
	}
	a := t.agg
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tables[t.agent] == t {
		delete(a.tables, t.agent)
		a.metrics.forget(t.agent)
	}
}

// Flush calls the flush function given to New.
func (a *Aggregator) Flush() {
	if a.flush != nil {
		a.flush()
	}
}

// Stats returns an agent's counters; call it when the server is stopped (the tables are
// only synchronised by the server's locks).
func (a *Aggregator) Stats(agent string) Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.tables[agent]; t != nil {
		return t.stats
	}
	return Stats{}
}

type metrics struct {
	flows   *prometheus.CounterVec
	skipped *prometheus.CounterVec
}

type agentMetrics struct {
	flows, notIP, tableFull, parseErrors prometheus.Counter
}

func newMetrics(r prometheus.Registerer) *metrics {
	f := promauto.With(r)
	return &metrics{
		flows: f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_flows_total",
			Help: "Flows exported from captured packets, per agent."}, []string{"agent"}),
		skipped: f.NewCounterVec(prometheus.CounterOpts{Name: "flowzero_capture_flow_problems_total",
			Help: "Packets not counted in a flow (not-ip) or flows exported early (table-full) or without their header columns (parse-error), per agent."},
			[]string{"agent", "reason"}),
	}
}

// forget deletes an agent's series.
func (m *metrics) forget(name string) {
	m.flows.DeleteLabelValues(name)
	m.skipped.DeletePartialMatch(prometheus.Labels{"agent": name})
}

func (m *metrics) forAgent(name string) agentMetrics {
	return agentMetrics{
		flows:       m.flows.WithLabelValues(name),
		notIP:       m.skipped.WithLabelValues(name, "not-ip"),
		tableFull:   m.skipped.WithLabelValues(name, "table-full"),
		parseErrors: m.skipped.WithLabelValues(name, "parse-error"),
	}
}

// Enricher is what SinkEmitter calls before finalizing a flow (collector.Enricher).
type Enricher interface {
	Enrich(fm *schema.FlowMessage)
}

// SinkEmitter feeds the flows of captured packets into the collector's outputs: it enriches
// and finalizes each flow and hands batches to the sinks (Kafka, file, store) exactly like
// the collector's workers do. Safe for concurrent use; pass its Emit and Flush to New.
type SinkEmitter struct {
	mu       sync.Mutex
	enricher Enricher
	sinks    []output.Sink
	pool     *output.BatchPool
	batch    *output.Batch
	flows    uint64
}

// NewSinkEmitter returns an emitter batching flows into batchSize-byte batches; enricher may
// be nil.
func NewSinkEmitter(enricher Enricher, sinks []output.Sink, batchSize int) *SinkEmitter {
	return &SinkEmitter{enricher: enricher, sinks: sinks, pool: output.NewBatchPool(batchSize, 16)}
}

// Emit enriches, finalizes and batches one flow.
func (e *SinkEmitter) Emit(fm *schema.FlowMessage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.enricher != nil {
		e.enricher.Enrich(fm)
	}
	msg := fm.Finalize()
	if e.batch != nil && len(e.batch.Data)+len(msg) > cap(e.batch.Data) {
		e.flushLocked()
	}
	if e.batch == nil {
		e.batch = e.pool.Get()
	}
	e.batch.Append(msg)
	e.flows++
}

// Flush hands the current batch to the sinks.
func (e *SinkEmitter) Flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushLocked()
}

func (e *SinkEmitter) flushLocked() {
	b := e.batch
	e.batch = nil
	if b == nil {
		return
	}
	if b.Flows == 0 || len(e.sinks) == 0 {
		b.Release()
		return
	}
	b.Retain(len(e.sinks) - 1)
	for _, s := range e.sinks {
		s.Send(b)
	}
}
