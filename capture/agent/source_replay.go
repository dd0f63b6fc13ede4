package agent

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

type zeroCopyReader interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// runReplay replays the configured files one after the other, Loop times. Each file (each
// interface of a pcapng file) is an interface of the agent named after the file.
func (a *Agent) runReplay(ctx context.Context) error {
	e, err := a.newEmitter(true)
	if err != nil {
		return err
	}
	defer e.flush()
	br := bufio.NewReaderSize(nil, 256<<10)
	for range a.cfg.Replay.Loop {
		for _, path := range a.cfg.Replay.Files {
			if err := a.replayFile(ctx, e, br, path); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *Agent) replayFile(ctx context.Context, e *emitter, br *bufio.Reader, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br.Reset(f)
	magic, err := br.Peek(4)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	var (
		r     zeroCopyReader
		index func(i int) uint32
	)
	if bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		r = ng
		var ids []uint32
		index = func(idx int) uint32 {
			for len(ids) <= idx {
				i := len(ids)
				intf, err := ng.Interface(i)
				name := fmt.Sprintf("%s.%d", base, i)
				if err == nil && intf.Name != "" {
					name = base + "." + intf.Name
				}
				if ng.NInterfaces() == 1 {
					name = base
				}
				ids = append(ids, a.registerInterface(name, uint16(intf.LinkType), intf.SnapLength))
			}
			return ids[idx]
		}
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		r = pr
		id := a.registerInterface(base, uint16(pr.LinkType()), pr.Snaplen())
		index = func(int) uint32 { return id }
	}
	recorded := a.cfg.Replay.Speed == "recorded"
	var first time.Time
	var start time.Time
	for n := 0; ; n++ {
		data, ci, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: packet %d: %w", path, n+1, err)
		}
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if recorded {
			if first.IsZero() {
				first, start = ci.Timestamp, time.Now()
			}
			if wait := time.Until(start.Add(ci.Timestamp.Sub(first))); wait > 0 {
				if wait > a.cfg.FlushInterval {
					e.flush()
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
			}
		}
		e.packet(index(ci.InterfaceIndex), ci.Timestamp.UnixNano(), uint32(ci.Length), data)
	}
}
