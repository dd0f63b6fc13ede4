// Package replay plays exporter captures back: pcap files of NetFlow, IPFIX or sFlow
// datagrams. Send sends their UDP payloads to a collector as the exporters did (`flowzero
// replay`, load tests); Decode runs them through the collector's decoders offline and writes
// one JSON line per flow (`flowzero decode`). The end-to-end tests use both: what a
// collector receives over UDP must equal what Decode gives.
package replay

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"flowzero/internal/pcapfile"
)

// SendOptions are the flags of `flowzero replay`.
type SendOptions struct {
	// To is the collector's address.
	To netip.AddrPort
	// Rate is the number of datagrams per second; 0 sends as fast as possible.
	Rate float64
	// Loops is how many times the files are sent (at least 1).
	Loops int
	// Progress receives a progress line every second (nil: none).
	Progress io.Writer
}

// SendStats counts what Send sent.
type SendStats struct {
	Datagrams int
	Bytes     int
	Exporters int
	Elapsed   time.Duration
}

// Send sends the UDP payloads found in pcap files to a collector, in file order. Each
// original exporter (source address and port) gets its own local socket, so the collector
// keeps one template session per original exporter, and its datagrams keep their order.
// The pacing follows the machine's clock: it is a rate, not a date.
func Send(ctx context.Context, files []string, opts SendOptions) (SendStats, error) {
	var st SendStats
	type dgram struct {
		conn    int
		payload []byte
	}
	var dgs []dgram
	conns := map[netip.AddrPort]int{}
	var sockets []*net.UDPConn
	defer func() {
		for _, c := range sockets {
			c.Close()
		}
	}()
	for _, path := range files {
		in, err := pcapfile.ReadUDP(path)
		if err != nil {
			return st, err
		}
		for _, d := range in {
			i, ok := conns[d.Src]
			if !ok {
				c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(opts.To))
				if err != nil {
					return st, err
				}
				// A large send buffer keeps bursts at full speed from failing with ENOBUFS.
				c.SetWriteBuffer(4 << 20)
				sockets = append(sockets, c)
				i = len(sockets) - 1
				conns[d.Src] = i
			}
			dgs = append(dgs, dgram{i, d.Payload})
		}
	}
	st.Exporters = len(sockets)
	if len(dgs) == 0 {
		return st, fmt.Errorf("no UDP datagram in %v", files)
	}
	loops := max(opts.Loops, 1)
	start := time.Now()
	nextProgress := start.Add(time.Second)
	var interval time.Duration
	if opts.Rate > 0 {
		interval = time.Duration(float64(time.Second) / opts.Rate)
	}
	for loop := 0; loop < loops; loop++ {
		for _, d := range dgs {
			if interval > 0 {
				// Pace against the start time, not the previous send, so the average rate
				// holds even when the scheduler delays a send.
				due := start.Add(time.Duration(st.Datagrams) * interval)
				if wait := time.Until(due); wait > 0 {
					if wait > time.Millisecond {
						select {
						case <-ctx.Done():
							return st, ctx.Err()
						case <-time.After(wait):
						}
					}
				}
			}
			if _, err := sockets[d.conn].Write(d.payload); err != nil {
				return st, fmt.Errorf("send: %w", err)
			}
			st.Datagrams++
			st.Bytes += len(d.payload)
			if st.Datagrams&1023 == 0 {
				if err := ctx.Err(); err != nil {
					return st, err
				}
				if opts.Progress != nil && time.Now().After(nextProgress) {
					el := time.Since(start)
					fmt.Fprintf(opts.Progress, "\rloop %d/%d, %d datagrams, %.0f datagrams/s, %.1f MB/s   ",
						loop+1, loops, st.Datagrams, float64(st.Datagrams)/el.Seconds(), float64(st.Bytes)/el.Seconds()/1e6)
					nextProgress = nextProgress.Add(time.Second)
				}
			}
		}
	}
	st.Elapsed = time.Since(start)
	if opts.Progress != nil && st.Elapsed > time.Second {
		fmt.Fprintln(opts.Progress)
	}
	return st, nil
}
