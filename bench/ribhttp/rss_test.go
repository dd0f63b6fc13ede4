package ribhttp_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
)

// BenchmarkLookupRSS measures what issue 24 found: the memory of a collector answering 32
// parallel lookups of 100,000 addresses each on POST /api/v0/rib/lookup. It runs the
// flowzero binary named by $FLOWZERO_BIN (default ../../bin/flowzero) with the RIB loaded
// from a full table (synth-rib-fulltable-1peer: 1,062,046 prefixes), waits until it answers,
// then sends rounds of 32 parallel requests (random IPv4 addresses, distinct per request)
// while it samples the process's resident memory every 5 ms. It reports the resident memory
// before the requests (base-MB), the highest seen during them (peak-MB), the difference
// (growth-MB), and how the requests were answered (ok, refused: 429/503). Run it once per
// binary, alternating binaries (make bench-api-rss).
func BenchmarkLookupRSS(b *testing.B) {
	bin := os.Getenv("FLOWZERO_BIN")
	if bin == "" {
		bin = "../../bin/flowzero"
	}
	bin, _ = filepath.Abs(bin)
	if _, err := os.Stat(bin); err != nil {
		b.Skipf("no flowzero binary at %s (make build, or set FLOWZERO_BIN): %v", bin, err)
	}
	mrt := testdata.Path(b, "rib", "synth-rib-fulltable-1peer.mrt.gz")
	const parallel, perRequest = 32, 100_000
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("FLOWZERO_RSS_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	ln.Close()
	dir := b.TempDir()
	cfg := fmt.Sprintf(`collector:
  listeners: [{protocol: netflow, address: "127.0.0.1:0", workers: 1, receive-buffer: 1048576}]
  http: {listen: %q}
routing:
  mrt: [%q]
outputs:
  file: {enabled: false}
`, httpAddr, mrt)
	cfgPath := filepath.Join(dir, "collector.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "collect", "--config", cfgPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: parallel}}
	if !testutil.Poll(5*time.Minute, func() bool {
		resp, err := client.Get("http://" + httpAddr + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		b.Fatalf("the collector did not answer:\n%s", stderr.String())
	}

	rnd := rand.New(rand.NewPCG(24, 6))
	bodies := make([][]byte, parallel)
	for i := range bodies {
		var buf bytes.Buffer
		buf.WriteString(`{"addresses":[`)
		for k := range perRequest {
			if k > 0 {
				buf.WriteByte(',')
			}
			a := netip.AddrFrom4([4]byte{byte(1 + rnd.IntN(223)), byte(rnd.Uint32()), byte(rnd.Uint32()), byte(rnd.Uint32())})
			buf.WriteByte('"')
			buf.WriteString(a.String())
			buf.WriteByte('"')
		}
		buf.WriteString(`]}`)
		bodies[i] = buf.Bytes()
	}

	pid := cmd.Process.Pid
	settle := func() { // let the collector settle after the RIB load, before the baseline
		for range 3 {
			rssOf(b, pid)
			time.Sleep(200 * time.Millisecond)
		}
	}
	settle()
	base := rssOf(b, pid)
	var peak int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if v := rssOf(b, pid); v > peak {
				peak = v
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var ok, refused, other int
	var mu sync.Mutex
	start := time.Now()
	for b.Loop() {
		for range rounds {
			var wg sync.WaitGroup
			for i := range parallel {
				wg.Go(func() {
					resp, err := client.Post("http://"+httpAddr+"/api/v0/rib/lookup", "application/json", bytes.NewReader(bodies[i]))
					if err != nil {
						mu.Lock()
						other++
						mu.Unlock()
						return
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					defer mu.Unlock()
					switch {
					case resp.StatusCode == http.StatusOK && n > 0:
						ok++
					case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
						refused++
					default:
						other++
					}
				})
			}
			wg.Wait()
		}
	}
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	b.ReportMetric(float64(base)/(1<<20), "base-MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
	b.ReportMetric(float64(peak-base)/(1<<20), "growth-MB")
	b.ReportMetric(float64(ok), "ok")
	b.ReportMetric(float64(refused), "refused")
	b.ReportMetric(float64(ok*perRequest)/elapsed.Seconds(), "lookups/s")
	if other > 0 {
		b.Errorf("%d requests failed otherwise (neither answered nor refused)", other)
	}
}

// rssOf returns the resident memory of process pid, in bytes (VmRSS).
func rssOf(b *testing.B, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
