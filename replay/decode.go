package replay

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/decoder/netflow"
	"flowzero/decoder/sflow"
	"flowzero/internal/clock"
	"flowzero/internal/pcapfile"
	"flowzero/output/jsonl"
	"flowzero/schema"
)

// Decoders are the sections of the collector's configuration that decoding reads.
type Decoders struct {
	Schema  schema.Configuration
	NetFlow netflow.Configuration
	SFlow   sflow.Configuration
}

// DecodeSummary counts what Decode saw.
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
	// Clock gives the receive time of datagrams the capture has no time for (clock.System{}
	// when nil).
	Clock clock.Clock
}

// Decode decodes the exporter datagrams found in pcap files, in the order given, through the
// collector's decoders (templates and sampling options carry across files), and writes every
// flow as one JSON line to out. The protocol of each datagram is recognised from its first
// bytes (see Protocol), so captures on non-standard ports work.
func Decode(cfg Decoders, files []string, opts DecodeOptions, out io.Writer) (DecodeSummary, error) {
	sum := DecodeSummary{Errors: map[string]int{}}
	clk := clock.Or(opts.Clock)
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
		_, n := binary.Uvarint(msg)
		var aerr error
		if line, aerr = f.Append(line[:0], msg[n:]); aerr != nil {
			sum.Errors["re-decode: "+aerr.Error()]++
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
			ts := dg.Time
			if ts.IsZero() {
				ts = clk.Now()
			}
			switch Protocol(dg.Payload) {
			case "netflow":
				err = nf.Decode(netflow.Packet{Payload: dg.Payload, Exporter: dg.Src, TimeReceived: ts}, fm, emit)
			case "sflow":
				err = sf.Decode(sflow.Packet{Payload: dg.Payload, Exporter: dg.Src, TimeReceived: ts}, fm, emit)
			default:
				sum.Skipped++
				continue
			}
			if err != nil {
				sum.Errors[err.Error()]++
			}
			if werr != nil {
				return sum, werr
			}
		}
	}
	return sum, nil
}

// Protocol tells NetFlow/IPFIX ("netflow") from sFlow ("sflow") by the version field at
// the start of a datagram: sFlow starts with the 32-bit version 5, NetFlow with a 16-bit
// version 5, 9 or 10. Anything else is "".
func Protocol(p []byte) string {
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
