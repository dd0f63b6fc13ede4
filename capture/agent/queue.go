package agent

import (
	"net"
	"sync"
	"time"

	"flowzero/capture/wire"
)

// frameQueue holds finished frames from the sources until the server acknowledges them. It
// is a ring of frames bounded in bytes; the frames from head to head+sent have been written
// on the current connection, the rest wait.
type frameQueue struct {
	mu    sync.Mutex
	cond  sync.Cond
	ring  []queuedFrame
	head  int
	n     int // frames held
	sent  int // frames written on this connection, from head
	bytes int
	limit int

	nextSeq   uint64
	connected bool
	// everConnected: replay waits for the first connection instead of dropping at start.
	everConnected bool
	aborted       bool // Stop gave up waiting: blocked pushes drop
	senderDone    bool // nothing will be sent any more: waitEmpty returns
	broken        bool // the current connection failed
	tick          bool // a heartbeat is due
	acked         uint64
	dropped       uint64

	pubAcked, pubDropped uint64 // already added to the metrics

	free      chan []byte
	frameSize int
}

type queuedFrame struct {
	seq     uint64
	buf     []byte
	packets uint64
}

func newFrameQueue(limit, frameSize int) *frameQueue {
	// Frames sent by the flush timer can be small: bound their number too.
	slots := limit/(frameSize/8) + 4
	q := &frameQueue{
		ring: make([]queuedFrame, slots), limit: limit, nextSeq: 1, frameSize: frameSize,
		free: make(chan []byte, limit/frameSize+4),
	}
	q.cond.L = &q.mu
	return q
}

// getBuf returns a recycled frame buffer or a new one.
func (q *frameQueue) getBuf() []byte {
	select {
	case b := <-q.free:
		return b[:0]
	default:
		return make([]byte, 0, q.frameSize+q.frameSize/4)
	}
}

func (q *frameQueue) putBuf(b []byte) {
	if cap(b) > 4*q.frameSize {
		return // grown by a huge packet: let it go
	}
	select {
	case q.free <- b:
	default:
	}
}

// push queues a finished frame, or drops it and counts its packets when it does not fit.
func (q *frameQueue) push(frame []byte, packets uint64, block bool) {
	q.mu.Lock()
	for q.bytes+len(frame) > q.limit || q.n == len(q.ring) {
		if !block || q.aborted || (!q.connected && q.everConnected) || q.bytes == 0 {
			q.dropped += packets
			q.mu.Unlock()
			q.putBuf(frame)
			return
		}
		q.cond.Wait()
	}
	seq := q.nextSeq
	q.nextSeq++
	wire.SetSeq(frame, seq)
	q.ring[(q.head+q.n)%len(q.ring)] = queuedFrame{seq: seq, buf: frame, packets: packets}
	q.n++
	q.bytes += len(frame)
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *frameQueue) countDrops(packets uint64) {
	q.mu.Lock()
	q.dropped += packets
	q.mu.Unlock()
}

func (q *frameQueue) droppedCount() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// ack releases the frames up to seq.
func (q *frameQueue) ack(seq uint64) {
	q.mu.Lock()
	q.ackLocked(seq)
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *frameQueue) ackLocked(seq uint64) {
	for q.n > 0 && q.ring[q.head].seq <= seq {
		f := &q.ring[q.head]
		q.acked += f.packets
		q.bytes -= len(f.buf)
		q.putBuf(f.buf)
		*f = queuedFrame{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		if q.sent > 0 {
			q.sent--
		}
	}
}

// startConnection drops what the server already wrote and resends the rest.
func (q *frameQueue) startConnection(lastSeq uint64) {
	q.mu.Lock()
	q.ackLocked(lastSeq)
	q.sent = 0
	q.connected, q.broken, q.everConnected = true, false, true
	q.mu.Unlock()
}

// abort makes blocked pushes drop their frame (Stop when the server never answered).
func (q *frameQueue) abort() {
	q.mu.Lock()
	q.aborted = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// senderGone says that nothing will be sent any more (the agent gave up on the server):
// blocked pushes drop and waitEmpty returns.
func (q *frameQueue) senderGone() {
	q.mu.Lock()
	q.aborted, q.senderDone = true, true
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *frameQueue) connectionBroken() {
	q.mu.Lock()
	q.broken = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *frameQueue) endConnection() {
	q.mu.Lock()
	q.connected = false
	q.cond.Broadcast() // blocked replay sources now drop instead of waiting
	q.mu.Unlock()
}

func (q *frameQueue) heartbeat() {
	q.mu.Lock()
	q.tick = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *frameQueue) wake() {
	q.mu.Lock()
	q.cond.Broadcast()
	q.mu.Unlock()
}

// nextBatch waits for frames to send, a heartbeat, a broken connection or stop. Frames stay
// queued (they are only released by acknowledgements).
func (q *frameQueue) nextBatch(stop <-chan struct{}, iov net.Buffers) (frames net.Buffers, heartbeat, stopped bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		select {
		case <-stop:
			return iov, false, true
		default:
		}
		if q.broken {
			return iov, false, true
		}
		if q.sent < q.n || q.tick {
			break
		}
		q.cond.Wait()
	}
	heartbeat, q.tick = q.tick, false
	for ; q.sent < q.n && len(iov) < 64; q.sent++ {
		iov = append(iov, q.ring[(q.head+q.sent)%len(q.ring)].buf)
	}
	return iov, heartbeat, false
}

// waitEmpty waits until every frame is acknowledged, the timeout, or senderGone.
func (q *frameQueue) waitEmpty(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, q.wake)
	defer t.Stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n > 0 && !q.senderDone && time.Now().Before(deadline) {
		q.cond.Wait()
	}
}

// dropAll counts what is left after Stop as dropped.
func (q *frameQueue) dropAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.n > 0 {
		f := &q.ring[q.head]
		q.dropped += f.packets
		q.bytes -= len(f.buf)
		*f = queuedFrame{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
	}
	q.sent = 0
}
