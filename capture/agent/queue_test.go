package agent

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestFrameQueue runs the queue between a replay source and the sender in a synctest bubble:
// a full queue holds the source back before the first connection and while connected, drops
// once the connection is gone, and waitEmpty gives up after its timeout on the bubble's clock.
func TestFrameQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const frameSize = 4096
		q := newFrameQueue(2*frameSize, frameSize)
		frame := func() []byte { return make([]byte, frameSize) }
		pushed := make(chan struct{})
		blockedPush := func(packets uint64) {
			go func() {
				q.push(frame(), packets, true)
				pushed <- struct{}{}
			}()
		}
		q.push(frame(), 10, true)
		q.push(frame(), 10, true)

		// Full before the first connection: the source waits.
		blockedPush(10)
		synctest.Wait()
		select {
		case <-pushed:
			t.Fatal("a push into a full queue did not wait for the first connection")
		default:
		}
		q.startConnection(0)
		frames, _, stopped := q.nextBatch(nil, nil)
		if stopped || len(frames) != 2 {
			t.Fatalf("sender got %d frames (stopped %v), want the 2 queued", len(frames), stopped)
		}
		q.ack(1) // room for the waiting frame
		<-pushed
		if q.n != 2 || q.acked != 10 || q.dropped != 0 {
			t.Fatalf("%d frames held, %d packets acknowledged, %d dropped; want 2, 10, 0", q.n, q.acked, q.dropped)
		}

		// Full while connected: it waits; the connection ends: it drops.
		blockedPush(7)
		synctest.Wait()
		q.connectionBroken()
		q.endConnection()
		<-pushed
		if q.dropped != 7 || q.n != 2 {
			t.Fatalf("%d packets dropped, %d frames held; want the 7 of the frame pushed after the connection ended, 2", q.dropped, q.n)
		}

		// Nobody acknowledges: waitEmpty returns after its timeout, on the bubble's clock.
		start := time.Now()
		q.waitEmpty(10 * time.Second)
		if waited := time.Since(start); waited != 10*time.Second {
			t.Fatalf("waitEmpty returned after %v, want 10s", waited)
		}
		q.dropAll()
		if q.dropped != 7+20 || q.n != 0 || q.bytes != 0 {
			t.Fatalf("after dropAll: %d dropped, %d frames, %d bytes", q.dropped, q.n, q.bytes)
		}
	})
}
