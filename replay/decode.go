package app

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/collector"
	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/pcapfile"
	"flowzero/output/jsonl"
	"flowzero/schema"
)

// DecodeSummary counts what DecodeFiles saw.
type DecodeSummary struct {
	Datagrams int
	Flows     int
	// Errors by error text (the decoders' reasons).
	Errors map[string]int
	// Skipped counts datagrams that are neither NetFlow/IPFIX nor sFlow.
	Skipped int
}

// DecodeOptions are the flags of `flowzero decode`.
type DecodeOptions struct {
	// Columns restricts the printed columns (names); empty prints every column present.
	Columns []string
	// TimesAsMillis prints DateTime columns as Unix milliseconds instead of RFC 3339.
	TimesAsMillis bool
}

// DecodeFiles decodes the exporter datagrams found in pcap files, in the order given, through
// the collector's decode path (the same decoders, so templates and sampling options carry
// across files), and writes every flow as one JSON line to out. The protocol of each
// datagram is recognised from its first bytes (sFlow starts with the 32-bit version 5,
// NetFlow with a 16-bit version 5, 9 or 10), so captures on non-standard ports work.
func DecodeFiles(cfg Configuration, files []string, opts DecodeOptions, out io.Writer) (DecodeSummary, error) {
	sum := DecodeSummary{Errors: map[string]int{}}
	s, err := schema.New(cfg.Schema)
	if err != nil {
		return sum, err
	}
	nf, err := netflow.New(prometheus.NewRegistry(), cfg.NetFlow, s)
	if err != nil {
		return sum, err
	}
	sf, err := sflow.New(prometheus.NewRegistry(), cfg.SFlow, s)
	if err != nil {
		return sum, err
	}
	decoders := map[string]collector.Decoder{
		"netflow": collector.NetFlowDecoder{D: nf},
		"sflow":   collector.SFlowDecoder{D: sf},
	}
	f, err := jsonl.New(s, opts.Columns)
	if err != nil {
		return sum, err
	}
	f.TimesAsMillis = opts.TimesAsMillis
	fm := s.NewFlowMessage()
	var line []byte
	var werr error
	emit := func(fm *schema.FlowMessage) {
		msg := fm.Finalize()
		// Finalize returns the length-delimited form: skip the length prefix.
		_, n := uvarint(msg)
		line, err = f.Append(line[:0], msg[n:])
		if err != nil {
			sum.Errors["re-decode: "+err.Error()]++
			return
		}
		sum.Flows++
		if _, err := out.Write(line); err != nil && werr == nil {
			werr = err
		}
	}
	for _, path := range files {
		dgs, err := pcapfile.ReadUDP(path)
		if err != nil {
			return sum, err
		}
		for _, dg := range dgs {
			sum.Datagrams++
			proto := sniffProtocol(dg.Payload)
			dec := decoders[proto]
			if dec == nil {
				sum.Skipped++
				continue
			}
			ts := dg.Time
			if ts.IsZero() {
				ts = time.Now()
			}
			if err := dec.Decode(dg.Payload, dg.Src, ts, fm, emit); err != nil {
				sum.Errors[err.Error()]++
			}
			if werr != nil {
				return sum, werr
			}
		}
	}
	return sum, nil
}

// sniffProtocol tells NetFlow/IPFIX from sFlow by the version field.
func sniffProtocol(p []byte) string {
	if len(p) < 4 {
		return ""
	}
	switch {
	case p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 5:
		return "sflow"
	case p[0] == 0 && (p[1] == 5 || p[1] == 9 || p[1] == 10):
		return "netflow"
	}
	return ""
}

func uvarint(b []byte) (uint64, int) {
	var v uint64
	for i, c := range b {
		if i == 10 {
			return 0, 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// WriteSummary prints a summary of a decode run (for stderr).
func (s DecodeSummary) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "%d datagrams, %d flows, %d skipped (not NetFlow/IPFIX/sFlow)\n", s.Datagrams, s.Flows, s.Skipped)
	reasons := make([]string, 0, len(s.Errors))
	for r := range s.Errors {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "  error: %s: %d\n", r, s.Errors[r])
	}
}
