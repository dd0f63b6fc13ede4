package capture

import (
	"testing"
	"time"
)

func TestTmpSpeed(t *testing.T) {
	files := allCaptures(t)
	for _, fs := range []int{4096, 256 << 10} {
		scfg := testServerConfig(t)
		s := startServer(t, scfg)
		acfg := testAgentConfig("probe", s.Addr().String(), files)
		acfg.Replay.Loop = 60
		acfg.FrameSize = fs
		acfg.BufferSize = 64 << 10
		if fs > 4096 {
			acfg.BufferSize = 64 << 20
		}
		t0 := time.Now()
		a := startAgent(t, acfg)
		<-a.Done()
		t1 := time.Since(t0)
		a.Stop()
		t.Logf("fs %d: sources %v, total %v, %+v", fs, t1, time.Since(t0), a.Stats())
		s.Stop()
	}
}
