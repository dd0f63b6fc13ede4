//go:build integration

package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"flowzero/internal/kafkatest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
)

// outletProcess is `flowzero collect` in mode outlet, in a process of its own.
type outletProcess struct {
	bin, config, dir string
	cmd              *exec.Cmd
	logged           bool
}

func (p *outletProcess) start(t *testing.T) {
	logf, err := os.OpenFile(p.dir+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if !p.logged {
		// A failed test shows the end of the process's log (all its runs).
		p.logged = true
		t.Cleanup(func() {
			if log, err := os.ReadFile(p.dir + ".log"); err == nil && t.Failed() {
				lines := strings.Split(strings.TrimSpace(string(log)), "\n")
				t.Logf("the last lines of %s.log:\n%s", p.dir, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		})
	}
	p.cmd = exec.Command(p.bin, "collect", "-config", p.config)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait(); logf.Close() })
}

// TestSplitKillOutlet: three outlets in processes of their own; one is killed with SIGKILL
// while datagrams flow, and started again. Every flow the inlet's datagrams hold is stored
// (at least once: the killed outlet's flows not yet committed are decoded again by the outlet
// that takes its partitions), and the flows stored twice are all from datagrams after the
// killed outlet's last commit (bounded by commit-interval).
func TestSplitKillOutlet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "flowzero")
	if out, err := exec.Command("go", "build", "-o", bin, "flowzero/cmd/flowzero").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	st := newSplitTopics(t, 6)
	capture := testdata.Path(t, "netflow", "data+templates.pcap")
	dgs, err := pcapfile.ReadUDP(capture)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.config(t, ModeOutlet)
	once, err := replay.Decode(replay.Decoders{Schema: cfg.Schema, NetFlow: cfg.NetFlow, SFlow: cfg.SFlow}, []string{capture}, replay.DecodeOptions{}, io.Discard)
	if err != nil || once.Flows == 0 {
		t.Fatalf("offline: %d flows, %v", once.Flows, err)
	}

	root := t.TempDir()
	var outlets []*outletProcess
	for i := range 3 {
		p := &outletProcess{bin: bin, dir: filepath.Join(root, fmt.Sprintf("outlet%d", i)), config: filepath.Join(root, fmt.Sprintf("outlet%d.yaml", i))}
		yaml := fmt.Sprintf(`mode: outlet
log: {level: warn}
datagrams: {brokers: [%s], topic: %s, replication-factor: %d}
outlet: {group: %s, commit-interval: 100ms, session-timeout: 6s, state: {topic: %s, replication-factor: %d}}
collector: {http: {listen: ""}}
schema: {enabled: [DatagramPartition, DatagramOffset, DatagramIndex]}
outputs: {file: {directory: %s, compression: none}}
`, strings.Join(st.brokers, ", "), st.datagrams, st.rf, st.group, st.state, st.rf, p.dir)
		if err := os.WriteFile(p.config, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		p.start(t)
		outlets = append(outlets, p)
	}
	in := startApp(t, st.config(t, ModeInlet))

	// The capture passes times, its datagrams one millisecond apart, paced to last a few
	// seconds: the kill happens while datagrams flow.
	const passes = 400
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		at := testutil.Now()
		for range passes {
			for _, dg := range dgs {
				at = at.Add(time.Millisecond)
				in.Inlet().Forward(dg.Payload, dg.Src, at, "netflow")
			}
			time.Sleep(10 * time.Millisecond) // a rate, not a synchronisation
		}
	}()
	count := func() (map[flowID]int, int) {
		ids := map[flowID]int{}
		for _, p := range outlets {
			readFlowIDsTolerant(t, p.dir, ids)
		}
		n := 0
		for _, c := range ids {
			n += c
		}
		return ids, n
	}
	testutil.WaitUntil(t, "the first outlet to store flows", func() bool {
		ids := map[flowID]int{}
		readFlowIDsTolerant(t, outlets[0].dir, ids)
		return len(ids) > 0
	})
	outlets[0].cmd.Process.Signal(syscall.SIGKILL)
	outlets[0].cmd.Wait()
	_, before := count()
	testutil.WaitUntil(t, "the other outlets to take over", func() bool {
		_, n := count()
		return n > before+1000
	})
	outlets[0].start(t)
	<-stopped
	testutil.WaitUntil(t, "the inlet to deliver every datagram", func() bool {
		s, delivered, dropped := in.Inlet().Counts()
		return delivered+dropped == s
	})
	_, _, dropped := in.Inlet().Counts()
	want := passes * once.Flows
	var ids map[flowID]int
	if !testutil.Poll(testutil.WaitTimeout, func() bool {
		ids, _ = count()
		return len(ids) >= want
	}) {
		s, dl, dr := in.Inlet().Counts()
		for _, p := range outlets {
			p.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump in the log
			p.cmd.Wait()
			log, _ := os.ReadFile(p.dir + ".log")
			t.Logf("%s:\n%s", p.dir, log)
		}
		// Per partition: the datagrams with fewer flows than the capture's, and the
		// offsets missing between the first and the last one stored.
		perDatagram := map[[2]uint64]int{}
		maxOff := map[uint32]uint64{}
		for id := range ids {
			perDatagram[[2]uint64{uint64(id.partition), id.offset}]++
			maxOff[id.partition] = max(maxOff[id.partition], id.offset)
		}
		missing := map[uint32][]uint64{}
		for p, m := range maxOff {
			for off := range m + 1 {
				if perDatagram[[2]uint64{uint64(p), off}] < once.Flows && len(missing[p]) < 20 {
					missing[p] = append(missing[p], off)
				}
			}
		}
		adm := kadm.NewClient(kafkatest.Client(t))
		if dg, err := adm.DescribeGroups(context.Background(), st.group); err == nil {
			for _, g := range dg {
				t.Logf("group %s state %s", g.Group, g.State)
				for _, m := range g.Members {
					a, _ := m.Assigned.AsConsumer()
					if a != nil {
						for _, tp := range a.Topics {
							t.Logf("member %s (%s): %v", m.MemberID, m.ClientHost, tp.Partitions)
						}
					}
				}
			}
		}
		committed, _ := adm.FetchOffsets(context.Background(), st.group)
		ends, _ := adm.ListEndOffsets(context.Background(), st.datagrams)
		var cs []string
		ends.Each(func(o kadm.ListedOffset) {
			c, _ := committed.Lookup(st.datagrams, o.Partition)
			cs = append(cs, fmt.Sprintf("p%d end %d committed %d stored-max %d", o.Partition, o.Offset, c.At, maxOff[uint32(o.Partition)]))
		})
		t.Fatalf("%d distinct flows stored, want %d; inlet sent %d, delivered %d, dropped %d; missing %v; %v", len(ids), want, s, dl, dr, missing, cs)
	}
	for _, p := range outlets {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
	}
	ids, stored := count()
	twice := 0
	for _, n := range ids {
		if n > 1 {
			twice++
		}
	}
	t.Logf("%d passes of %d flows: %d flows sent, %d datagrams dropped by the inlet, %d distinct flows stored (%d rows), %d stored more than once",
		passes, once.Flows, want, dropped, len(ids), stored, twice)
	if dropped != 0 || len(ids) != want {
		t.Errorf("%d distinct flows stored, want %d (inlet drops %d)", len(ids), want, dropped)
	}
	// The killed outlet replays at most what it had not committed: its commit interval of
	// traffic and the records it had polled.
	if twice > want/4 {
		t.Errorf("%d flows stored more than once", twice)
	}
}

// readFlowIDsTolerant is readFlowIDs on archives that may be in the middle of being written,
// or end with the truncated message of a killed process.
func readFlowIDsTolerant(t *testing.T, dir string, into map[flowID]int) {
	readFlowIDsOpts(t, dir, into, true)
}
