//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"
)

// openLive opens an AF_PACKET TPACKET_V3 ring per interface and returns the function that
// captures on all of them until its context ends.
func (a *Agent) openLive() (func(ctx context.Context) error, error) {
	cfg := a.cfg.Live
	links := make([]layers.LinkType, len(cfg.Interfaces))
	for i, name := range cfg.Interfaces {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return nil, fmt.Errorf("live.interfaces: %w", err)
		}
		links[i] = linkTypeOf(ifi)
	}
	filters, err := interfaceFilters(cfg.Filter, cfg.SnapLength, cfg.Interfaces, links)
	if err != nil {
		return nil, err
	}
	// Without a filter, the snap length is applied by the program's return value, as libpcap does.
	snapOnly, err := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: uint32(cfg.SnapLength)}})
	if err != nil {
		return nil, err
	}
	pageSize := os.Getpagesize()
	frameSize := (cfg.SnapLength + 64 + pageSize - 1) / pageSize * pageSize
	// TPACKET_V3 blocks of about 1 MiB, holding whole frames: afpacket refuses a block size
	// that is not a multiple of the frame size (the default snap length gives 65 pages).
	blockSize := frameSize * max(1, (1<<20)/frameSize)
	numBlocks := max(cfg.RingSize/blockSize, 2)
	type handle struct {
		tp       *afpacket.TPacket
		index    uint32
		filter   []bpf.RawInstruction
		filtered time.Time // packets captured before are from before the filter
	}
	var handles []handle
	closeAll := func() {
		for _, h := range handles {
			h.tp.Close()
		}
	}
	for i, name := range cfg.Interfaces {
		filter := filters[i]
		if filter == nil {
			filter = snapOnly
		}
		tp, err := afpacket.NewTPacket(afpacket.OptInterface(name), afpacket.OptFrameSize(frameSize),
			afpacket.OptBlockSize(blockSize), afpacket.OptNumBlocks(numBlocks),
			afpacket.OptPollTimeout(a.cfg.FlushInterval), afpacket.OptBlockTimeout(a.cfg.FlushInterval/2+time.Millisecond),
			afpacket.TPacketVersion3)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("AF_PACKET on %s: %w", name, err)
		}
		handles = append(handles, handle{tp: tp, filter: filter})
		if err := tp.SetBPF(filter); err != nil {
			closeAll()
			return nil, fmt.Errorf("BPF filter on %s: %w", name, err)
		}
		// The socket captured unfiltered between its bind and SetBPF: those packets are
		// skipped by time, as libpcap drains its socket after setting a filter.
		handles[len(handles)-1].filtered = time.Now()
		if cfg.Promiscuous {
			if err := tp.SetPromiscuous(true); err != nil {
				closeAll()
				return nil, fmt.Errorf("promiscuous mode on %s: %w", name, err)
			}
		}
		handles[len(handles)-1].index = a.registerInterface(name, uint16(links[i]), uint32(cfg.SnapLength))
	}
	return func(ctx context.Context) error {
		defer closeAll()
		var wg sync.WaitGroup
		errs := make(chan error, len(handles))
		for _, h := range handles {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- a.captureLoop(ctx, h.tp, h.index, h.filtered, h.filter)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
		}
		return ctx.Err()
	}, nil
}

// linkTypeOf returns what AF_PACKET delivers on an interface: devices without a hardware
// address (tun, wireguard) deliver raw IP, the others (loopback included) Ethernet frames.
func linkTypeOf(ifi *net.Interface) layers.LinkType {
	if len(ifi.HardwareAddr) == 0 && ifi.Flags&net.FlagLoopback == 0 {
		return layers.LinkTypeRaw
	}
	return layers.LinkTypeEthernet
}

// captureLoop reads one ring until ctx ends; packets are copied into frames right away
// (zero-copy read: the ring slot is reused by the next read).
func (a *Agent) captureLoop(ctx context.Context, tp *afpacket.TPacket, index uint32, filtered time.Time, filter []bpf.RawInstruction) error {
	e, err := a.newEmitter(false)
	if err != nil {
		return err
	}
	// During the first second the filter also runs in user space: packets the ring took
	// before SetBPF may carry a timestamp after it (the block they sit in is retired later),
	// and the time check alone let one through. The kernel filter does the work afterwards.
	var vm *bpf.VM
	ins := make([]bpf.Instruction, 0, len(filter))
	for _, r := range filter {
		ins = append(ins, r.Disassemble())
	}
	if v, err := bpf.NewVM(ins); err == nil {
		vm = v
	}
	recheckUntil := filtered.Add(time.Second)
	defer e.flush()
	snap := a.cfg.Live.SnapLength
	var lastDrops uint
	lastStats := time.Now()
	lastFlush := time.Now()
	for {
		data, ci, err := tp.ZeroCopyReadPacketData()
		now := time.Now()
		if err == nil && ci.Timestamp.Before(filtered) {
			continue // captured before the filter was attached
		}
		if err == nil && vm != nil && now.Before(recheckUntil) {
			if n, verr := vm.Run(data); verr == nil && n == 0 {
				continue // rejected by the filter: taken before it was attached
			}
		}
		if err == nil {
			if len(data) > snap {
				data = data[:snap]
			}
			e.packet(index, ci.Timestamp.UnixNano(), uint32(ci.Length), data)
		} else if !errors.Is(err, afpacket.ErrTimeout) && !errors.Is(err, afpacket.ErrPoll) {
			return err
		}
		if err != nil || now.Sub(lastFlush) >= a.cfg.FlushInterval {
			e.flush()
			lastFlush = now
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if now.Sub(lastStats) >= time.Second || err != nil {
			// TPACKET_V3 statistics are reset by each read: accumulate them.
			if _, s3, serr := tp.SocketStats(); serr == nil && s3.Drops() != lastDrops {
				a.kernelDrops.Add(uint64(s3.Drops() - lastDrops))
				a.metrics.dropKernel.Add(float64(s3.Drops() - lastDrops))
				lastDrops = s3.Drops()
			}
			lastStats = now
		}
	}
}
