// Package pcapng writes captured packets to pcapng files, one interface description block per
// agent and interface, rotated by size and time like tcpdump's -C/-G/-W, or to stdout or a FIFO
// for live tools.
package pcapng

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/ncruces/go-strftime"

	"flowzero/internal/clock"
)

// Writer writes packets to pcapng files, rotating them like tcpdump's -C/-G/-W. Every (agent,
// interface) pair gets one interface description block named "agent:iface"; a new file
// repeats all of them in the same order, so interface ids never change. Not safe for
// concurrent use, except InterruptWrites.
//
// gopacket's NgWriter writes the section header and interface blocks; packets are appended as
// Enhanced Packet Blocks into one 1 MiB buffer (appendEPB), which costs half of
// NgWriter.WritePacket's four small writes for small packets and makes one write system call
// per MiB (docs/design/capture.md, BenchmarkPcapngWrite).
type Writer struct {
	cfg    Configuration
	base   string    // Path with {agent} replaced
	stdout io.Writer // used for Path "-"
	clock  clock.Clock

	intfs []pcapgo.NgInterface // by pcapng interface id
	ids   map[intfKey]int

	file    io.WriteCloser
	counter countingWriter
	w       *pcapgo.NgWriter
	Series
	dirty bool   // unflushed writes
	epbs  []byte // packet blocks not yet written to file

	// pipe is file when its writes take deadlines (a FIFO), for InterruptWrites; interruptAt
	// is the deadline InterruptWrites set (Unix ns, 0 for none), which files opened later get
	// too. Both are read without the caller's lock.
	pipe        atomic.Pointer[os.File]
	interruptAt atomic.Int64

	openErr error     // why the last open failed, returned until retryAt
	retryAt time.Time // no new open attempt before then
	good    int64     // file size up to the last block written whole

	// pending counts the packets and bytes in epbs by interface id; pendingIDs lists the ids
	// whose count is not zero, so that settling them costs nothing per idle interface.
	pending    []Count
	pendingIDs []int

	settled  func(id int, c Count, written bool)
	failed   func(err error)
	repaired func(name string, cut int64)
}

// Options are a Writer's dependencies besides its configuration.
type Options struct {
	// Agent is the agent whose file this is, with per-agent output ("" for the shared file).
	Agent string
	// Stdout is written when the path is "-".
	Stdout io.Writer
	// Clock times rotations and names files (nil: the system's).
	Clock clock.Clock
	// Series, from the Writer of an agent's previous output, makes this one go on with that
	// series of files.
	Series Series
	// Settled learns what became of an interface's buffered packets: written out, or lost
	// with a failed write. Failed learns every write or open error. Both are called by the
	// methods that write and may be nil.
	Settled func(id int, c Count, written bool)
	Failed  func(err error)
	// Repaired learns that an existing file, appended to, ended in an incomplete block (a
	// crash in the middle of a write) and that its last cut bytes were removed.
	Repaired func(name string, cut int64)
}

// Series is where a Writer stands in its series of files. The server keeps it when it closes
// the output of an agent gone idle and gives it to the agent's next Writer, which goes on like
// this one would have: it appends to the last file, then rotates to the next name, never
// truncating a file of the series that -W does not reuse.
type Series struct {
	opened time.Time // when the last file was opened
	count  int       // tcpdump's file counter (-C)
	files  []string  // names created, oldest first (-W); only the last without MaxFiles
}

// Count counts packets and their captured bytes.
type Count struct{ Packets, Bytes uint64 }

// epbFlushSize is the size at which buffered packet blocks are written out.
const epbFlushSize = 1 << 20

// ReopenInterval spaces the attempts to open an output that failed to open (a FIFO without a
// reader, a missing directory): one open system call per interval, not one per packet.
const ReopenInterval = 100 * time.Millisecond

// ErrNoReader is returned while the output is a FIFO that no reader has opened.
var ErrNoReader = errors.New("pcapng: the FIFO has no reader")

type intfKey struct {
	agent, name string
	linkType    uint16
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// NewWriter returns a Writer; nothing is opened before the first packet (or Open).
func NewWriter(cfg Configuration, opts Options) *Writer {
	base := cfg.Path
	if opts.Agent != "" && base != "-" {
		agent := opts.Agent
		if cfg.RotateInterval > 0 {
			// fileName runs strftime on the path: the name must come out of it as it is.
			// Agents cannot send a '%' (wire.CheckAgentName); this holds whatever the caller.
			agent = strings.ReplaceAll(agent, "%", "%%")
		}
		if strings.Contains(base, "{agent}") {
			base = strings.ReplaceAll(base, "{agent}", agent)
		} else {
			ext := filepath.Ext(base)
			base = strings.TrimSuffix(base, ext) + "-" + agent + ext
		}
	}
	return &Writer{cfg: cfg, base: base, stdout: opts.Stdout, clock: clock.Or(opts.Clock), ids: map[intfKey]int{},
		Series: opts.Series, settled: opts.Settled, failed: opts.Failed, repaired: opts.Repaired}
}

// Path returns the path of the Writer's files, before rotation names them.
func (o *Writer) Path() string { return o.base }

// Interface describes a capture interface of an agent.
type Interface struct {
	Agent, Name string
	// LinkType is a pcap LINKTYPE_ value.
	LinkType   uint16
	SnapLength uint32
}

// InterfaceID returns the pcapng interface id of an agent's interface if it has one.
func (o *Writer) InterfaceID(in Interface) (int, bool) {
	id, ok := o.ids[intfKey{in.Agent, in.Name, in.LinkType}]
	return id, ok
}

// LinkType returns the link type of pcapng interface id.
func (o *Writer) LinkType(id int) uint16 { return uint16(o.intfs[id].LinkType) }

// ErrInterfaceName is returned by AddInterface for a name that an interface description block
// cannot hold.
var ErrInterfaceName = errors.New("pcapng: interface name too long for an if_name option")

// AddInterface returns the pcapng interface id of an agent's interface, adding its description
// block to the current file the first time. A write error is returned with the id, which
// the next file describes. An if_name ("agent:iface") longer than an option's 16-bit length
// is refused with ErrInterfaceName and id -1: NgWriter would wrap the length and write a
// block that readers take apart wrongly, breaking the rest of the file.
func (o *Writer) AddInterface(in Interface) (int, error) {
	if id, ok := o.InterfaceID(in); ok {
		return id, nil
	}
	if n := len(in.Agent) + 1 + len(in.Name); n > math.MaxUint16 {
		return -1, fmt.Errorf("%w: %d bytes", ErrInterfaceName, n)
	}
	key := intfKey{in.Agent, in.Name, in.LinkType}
	intf := pcapgo.NgInterface{
		Name:                in.Agent + ":" + in.Name,
		OS:                  runtime.GOOS,
		LinkType:            layers.LinkType(in.LinkType),
		SnapLength:          in.SnapLength,
		TimestampResolution: 9,
	}
	id := len(o.intfs)
	o.intfs = append(o.intfs, intf)
	o.pending = append(o.pending, Count{})
	o.ids[key] = id
	if o.w != nil {
		// Blocks must stay in order: packets buffered so far go out before the new IDB.
		if err := o.writeEPBs(); err != nil {
			return id, err
		}
		if _, err := o.w.AddInterface(intf); err != nil {
			o.abandon(err)
			return id, err
		}
		if err := o.w.Flush(); err != nil {
			o.abandon(err)
			return id, err
		}
		o.good = o.counter.n
	}
	return id, nil
}

// WritePacket buffers one packet on pcapng interface id, opening or rotating the file first
// when needed. An error means the packet was not taken; once taken, what becomes of it is
// reported through settled.
func (o *Writer) WritePacket(id int, ts int64, length uint32, data []byte) error {
	if o.w == nil || o.mustRotate() {
		if err := o.rotate(); err != nil {
			return err
		}
	}
	o.epbs = appendEPB(o.epbs, uint32(id), ts, max(length, uint32(len(data))), data)
	o.dirty = true
	c := &o.pending[id]
	if c.Packets == 0 {
		o.pendingIDs = append(o.pendingIDs, id)
	}
	c.Packets++
	c.Bytes += uint64(len(data))
	if len(o.epbs) >= epbFlushSize {
		_ = o.writeEPBs()
	}
	return nil
}

// appendEPB appends an Enhanced Packet Block (pcapng, draft-ietf-opsawg-pcapng section 4.3)
// with a nanosecond timestamp (the interfaces declare if_tsresol 9) and no options.
func appendEPB(dst []byte, id uint32, ts int64, length uint32, data []byte) []byte {
	pad := (4 - len(data)&3) & 3
	blockLen := 32 + len(data) + pad
	l := len(dst)
	if cap(dst)-l < blockLen {
		dst = slices.Grow(dst, blockLen)
	}
	dst = dst[:l+blockLen]
	b := dst[l:]
	_ = b[31]
	binary.LittleEndian.PutUint32(b[0:], 6) // block type: EPB
	binary.LittleEndian.PutUint32(b[4:], uint32(blockLen))
	binary.LittleEndian.PutUint32(b[8:], id)
	binary.LittleEndian.PutUint32(b[12:], uint32(uint64(ts)>>32))
	binary.LittleEndian.PutUint32(b[16:], uint32(ts))
	binary.LittleEndian.PutUint32(b[20:], uint32(len(data)))
	binary.LittleEndian.PutUint32(b[24:], length)
	n := copy(b[28:], data)
	clear(b[28+n : 28+n+pad])
	binary.LittleEndian.PutUint32(b[28+n+pad:], uint32(blockLen))
	return dst
}

// writeEPBs writes the buffered packet blocks to the file and reports their packets as
// written or, if the write fails, lost (all of them: a partial write ends in a cut block that
// readers stop at). A failed write closes the file; the next packet opens it again.
func (o *Writer) writeEPBs() error {
	if len(o.epbs) == 0 {
		return nil
	}
	_, err := o.counter.Write(o.epbs)
	o.epbs = o.epbs[:0]
	for _, id := range o.pendingIDs {
		if o.settled != nil {
			o.settled(id, o.pending[id], err == nil)
		}
		o.pending[id] = Count{}
	}
	o.pendingIDs = o.pendingIDs[:0]
	if err != nil {
		o.abandon(err)
		return err
	}
	o.good = o.counter.n
	return nil
}

// abandon reports a write error and closes the file, cutting off a partly written block so
// that a section appended when the file is opened again can be read.
func (o *Writer) abandon(err error) {
	if o.failed != nil {
		o.failed(err)
	}
	if f, ok := o.file.(*os.File); ok && o.counter.n > o.good {
		_ = f.Truncate(o.good) // fails harmlessly on a FIFO
	}
	o.closeFile()
}

func (o *Writer) mustRotate() bool {
	if o.cfg.RotateSize > 0 && o.counter.n+int64(len(o.epbs)) >= o.cfg.RotateSize {
		return true
	}
	return o.cfg.RotateInterval > 0 && o.clock.Now().Sub(o.opened) >= o.cfg.RotateInterval
}

// Open opens the file if none is open and an interface can describe it; it returns
// ErrNoReader while the file is a FIFO that no reader has opened. It never waits.
func (o *Writer) Open() error {
	if o.w != nil || len(o.intfs) == 0 {
		return nil
	}
	return o.rotate()
}

// rotate closes the current file and opens the next one, or opens the file again after a
// failure (not before retryAt).
func (o *Writer) rotate() error {
	if len(o.intfs) == 0 {
		return errors.New("capture: packet before any interface")
	}
	now := o.clock.Now()
	if o.w == nil && o.openErr != nil && now.Before(o.retryAt) {
		return o.openErr
	}
	if err := o.openNext(now); err != nil {
		o.openErr, o.retryAt = err, now.Add(ReopenInterval)
		return err
	}
	o.openErr = nil
	return nil
}

// openNext closes the current file and opens the next one.
func (o *Writer) openNext(now time.Time) error {
	rotating := o.w != nil
	switch {
	case o.cfg.RotateInterval > 0 && !o.opened.IsZero() && now.Sub(o.opened) >= o.cfg.RotateInterval:
		// -G starts a new series of -C files; so does a series resumed after idle-close once
		// its interval has passed, as the rotation it missed would have.
		o.count = 0
	case rotating:
		o.count++
		if o.cfg.MaxFiles > 0 && o.cfg.RotateInterval == 0 && o.count >= o.cfg.MaxFiles {
			o.count = 0 // -C -W: a ring of files
		}
	}
	if rotating {
		o.closeFile()
	}
	if o.opened.IsZero() && o.cfg.RotateSize > 0 && o.base != "-" {
		// A new Writer (a restarted server) goes on with the series a previous one left.
		o.count = o.resumeCount(now)
	}
	var f io.WriteCloser
	name := o.fileName(now)
	switch {
	case o.base == "-":
		f = nopCloser{o.stdout}
		if file, ok := o.stdout.(*os.File); ok && file.SetWriteDeadline(time.Time{}) == nil {
			o.setPipe(file) // stdout on a pipe: see Pollable
		}
	default:
		// A file opened again (after a write error, or by a series resumed after idle-close)
		// gets a new section appended: truncating it would lose packets counted as written.
		reopen := len(o.files) > 0 && o.files[len(o.files)-1] == name
		appendTo := !rotating && reopen
		if !rotating && !reopen {
			// The first open of a name by this Writer (a restarted server's): the packets a
			// previous run wrote there are kept, behind a new section.
			var err error
			if appendTo, err = o.prepareAppend(name); err != nil {
				if o.failed != nil {
					o.failed(err)
				}
				return err
			}
		}
		file, pollable, err := openOutputFile(name, appendTo)
		if err != nil {
			if o.failed != nil && !errors.Is(err, ErrNoReader) {
				o.failed(err)
			}
			return err
		}
		f = file
		if pollable {
			o.setPipe(file)
		}
		o.remember(name)
	}
	o.file = f
	o.counter = countingWriter{w: f}
	if file, ok := f.(*os.File); ok {
		if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
			o.counter.n = fi.Size() // what an appended file already holds
		}
	}
	o.good = o.counter.n
	o.opened = now
	w, err := pcapgo.NewNgWriterInterface(&o.counter, o.intfs[0], pcapgo.NgWriterOptions{
		SectionInfo: pcapgo.NgSectionInfo{Hardware: runtime.GOARCH, OS: runtime.GOOS, Application: "flowzero capture server"},
	})
	if err != nil {
		o.abandon(err)
		return err
	}
	for _, intf := range o.intfs[1:] {
		if _, err := w.AddInterface(intf); err != nil {
			o.abandon(err)
			return err
		}
	}
	if err := w.Flush(); err != nil {
		o.abandon(err)
		return err
	}
	o.good = o.counter.n
	o.w = w
	o.dirty = true
	return nil
}

// fileName builds the name of the next file the way tcpdump does: strftime for -G, then the
// file counter for -C, zero-padded to the width of -W.
func (o *Writer) fileName(now time.Time) string {
	name := o.base
	if o.cfg.RotateInterval > 0 {
		name = strftime.Format(name, now)
	}
	if o.cfg.RotateSize > 0 && (o.count > 0 || o.cfg.MaxFiles > 0) {
		width := 0
		for x := o.cfg.MaxFiles - 1; x > 0; x /= 10 {
			width++
		}
		name = fmt.Sprintf("%s%0*d", name, width, o.count)
	}
	return name
}

// resumeCount returns the -C counter of the file of the series at now that was written last,
// by a previous Writer on the same path: the current file of a series of numbered files,
// consecutive from 0 (or a -W ring), is the one modified last.
func (o *Writer) resumeCount(now time.Time) int {
	best, bestTime := 0, time.Time{}
	for c := 0; o.cfg.MaxFiles == 0 || c < o.cfg.MaxFiles; c++ {
		o.count = c
		fi, err := os.Stat(o.fileName(now))
		if err != nil {
			break
		}
		if !fi.ModTime().Before(bestTime) {
			best, bestTime = c, fi.ModTime()
		}
	}
	return best
}

// ErrNotPcapng is returned when the output path names an existing file that is not pcapng:
// the writer neither appends to it nor truncates it.
var ErrNotPcapng = errors.New("pcapng: the output file exists and is not pcapng; move it away or change output.path")

// prepareAppend says whether name is an existing pcapng file to append a new section to. An
// incomplete last block (a crash in the middle of a write) is cut off first, so that readers
// reach the new section, and reported through Options.Repaired. A FIFO, an absent or empty
// file is written as it is; any other file is refused with ErrNotPcapng, naming it.
func (o *Writer) prepareAppend(name string) (bool, error) {
	fi, err := os.Stat(name)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return false, nil
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	good, err := completeBlocks(f, fi.Size())
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	if good < fi.Size() {
		if err := f.Truncate(good); err != nil {
			return false, fmt.Errorf("%s: cutting an incomplete last block: %w", name, err)
		}
		if o.repaired != nil {
			o.repaired(name, fi.Size()-good)
		}
	}
	return good > 0, nil
}

// blockSHB is the type of a section header block, the same in either byte order.
const blockSHB = 0x0A0D0D0A

// completeBlocks walks the blocks of a pcapng file of size bytes by their lengths
// (draft-ietf-opsawg-pcapng section 3.1: type, total length, body, total length again) and
// returns the end of the last complete one. Each section's byte order is read from its
// header. It returns ErrNotPcapng unless the file starts with a section header block.
func completeBlocks(r io.ReaderAt, size int64) (int64, error) {
	var hdr [12]byte
	var order binary.ByteOrder = binary.LittleEndian
	var off int64
	for off+12 <= size {
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			return 0, err
		}
		if binary.LittleEndian.Uint32(hdr[0:]) == blockSHB {
			switch binary.LittleEndian.Uint32(hdr[8:]) {
			case 0x1A2B3C4D:
				order = binary.LittleEndian
			case 0x4D3C2B1A:
				order = binary.BigEndian
			default:
				if off == 0 {
					return 0, ErrNotPcapng
				}
				return off, nil // a garbled header: keep what comes before
			}
		} else if off == 0 {
			return 0, ErrNotPcapng
		}
		n := int64(order.Uint32(hdr[4:]))
		if n < 12 || n%4 != 0 || off+n > size {
			return off, nil
		}
		var trailer [4]byte
		if _, err := r.ReadAt(trailer[:], off+n-4); err != nil {
			return 0, err
		}
		if int64(order.Uint32(trailer[:])) != n {
			return off, nil
		}
		off += n
	}
	if off == 0 && size > 0 {
		// Not even one whole block: a file that starts like pcapng is a cut header.
		var magic [4]byte
		if k, _ := r.ReadAt(magic[:], 0); k < 4 || binary.LittleEndian.Uint32(magic[:]) != blockSHB {
			return 0, ErrNotPcapng
		}
	}
	return off, nil
}

// remember records a created file and removes the oldest beyond MaxFiles. Without MaxFiles
// only the last name is kept: it is the only one read (to append to it when it is opened
// again), and the series of an agent gone idle stays small.
func (o *Writer) remember(name string) {
	for i, n := range o.files {
		if n == name {
			o.files = append(o.files[:i], o.files[i+1:]...)
			break
		}
	}
	o.files = append(o.files, name)
	if o.cfg.MaxFiles == 0 {
		o.files = o.files[len(o.files)-1:]
	}
	for o.cfg.MaxFiles > 0 && len(o.files) > o.cfg.MaxFiles {
		_ = os.Remove(o.files[0])
		o.files = o.files[1:]
	}
}

// Flush writes buffered packets out.
func (o *Writer) Flush() error {
	if o.w == nil || !o.dirty {
		return nil
	}
	o.dirty = false
	return o.writeEPBs()
}

// Close flushes and closes the current file.
func (o *Writer) Close() error {
	err := o.Flush()
	o.closeFile()
	return err
}

func (o *Writer) closeFile() {
	if o.w != nil {
		_ = o.writeEPBs()
		o.w = nil
	}
	o.pipe.Store(nil)
	if o.file != nil {
		_ = o.file.Close()
		o.file = nil
	}
}

// openOutputFile opens a file for writing without ever waiting. A FIFO is opened like a file
// (O_TRUNC is ignored on it) for live tools (tshark -i FIFO, zeek -r FIFO), but with
// O_NONBLOCK: without a reader the open fails at once (ENXIO) instead of blocking its caller
// until one comes. Where Go's poller then waits on the descriptor (a FIFO on Linux: pollable),
// the flag stays: a full pipe parks the writer, and a write deadline can cut a stalled reader
// short. Elsewhere writes must block as they would without the flag, so it is cleared.
// appendTo keeps what the file holds instead of truncating it.
func openOutputFile(name string, appendTo bool) (f *os.File, pollable bool, err error) {
	flags := os.O_WRONLY | os.O_CREATE | syscall.O_NONBLOCK
	if appendTo {
		flags |= os.O_APPEND
	} else {
		flags |= os.O_TRUNC
	}
	f, err = os.OpenFile(name, flags, 0o644)
	if errors.Is(err, syscall.ENXIO) {
		return nil, false, ErrNoReader
	}
	if err != nil {
		return nil, false, err
	}
	if err := f.SetWriteDeadline(time.Time{}); err == nil {
		return f, true, nil
	}
	if err := SetBlocking(f); err != nil {
		_ = f.Close()
		return nil, false, err
	}
	return f, false, nil
}

// setPipe makes file, whose writes take deadlines, the one InterruptWrites cuts short.
func (o *Writer) setPipe(file *os.File) {
	// Ordered against InterruptWrites: it stores interruptAt then loads pipe.
	o.pipe.Store(file)
	if at := o.interruptAt.Load(); at != 0 {
		_ = file.SetWriteDeadline(time.Unix(0, at))
	}
}

// InterruptWrites makes writes to the current file, and to files opened later, fail once
// deadline passes, when they take deadlines; safe to call without the caller's lock (Stop
// does, while a write to a stalled FIFO may hold it).
func (o *Writer) InterruptWrites(deadline time.Time) {
	o.interruptAt.Store(deadline.UnixNano())
	if f := o.pipe.Load(); f != nil {
		_ = f.SetWriteDeadline(deadline)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
