package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"flowzero/capture/agent"
	"flowzero/capture/internal/capturetest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testutil"
)

// isSubsequence reports whether every frame of got appears in want in the same order.
func isSubsequence(got, want []pcapfile.Frame) bool {
	j := 0
	for _, g := range got {
		for j < len(want) && !(want[j].Time.Equal(g.Time) && string(want[j].Data) == string(g.Data)) {
			j++
		}
		if j == len(want) {
			return false
		}
		j++
	}
	return true
}

// TestServerRestart stops the server while two agents stream and starts another on the same
// address: every packet an agent captured is written once or counted as dropped.
func TestServerRestart(t *testing.T) {
	files := capturetest.Captures(t)
	// Enough that a replay cannot finish within its buffer once the first server stops: the
	// agents read at most buffer-size ahead of what the server acknowledged.
	const loops = 100
	names := []string{"probe-a", "probe-b"}
	scfg := testServerConfig(t)
	s1 := startServer(t, scfg)
	addr := s1.Addr().String()
	agents := map[string]*agent.Agent{}
	for _, name := range names {
		acfg := testAgentConfig(name, addr, files)
		acfg.Replay.Loop = loops
		acfg.FrameSize = 4096
		acfg.BufferSize = 64 << 10 // small: the outage must overflow it
		agents[name] = startAgent(t, acfg)
	}
	testutil.WaitUntil(t, "packets on the first server", func() bool {
		return s1.Stats("probe-a").Packets > 600 && s1.Stats("probe-b").Packets > 600
	})
	if err := s1.Stop(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "the outage to overflow the agents' buffers", func() bool {
		return agents["probe-a"].Stats().DroppedAgent > 0 && agents["probe-b"].Stats().DroppedAgent > 0
	})
	scfg2 := scfg
	scfg2.Listen = addr
	scfg2.Output.Path = filepath.Join(t.TempDir(), "second.pcapng")
	s2 := startServer(t, scfg2)
	stats := map[string]agent.Stats{}
	for _, name := range names {
		stats[name] = waitDone(t, agents[name])
	}
	if err := s2.Stop(); err != nil {
		t.Fatal(err)
	}
	got1, got2 := capturetest.ReadPcapng(t, scfg.Output.Path), capturetest.ReadPcapng(t, scfg2.Output.Path)
	for _, name := range names {
		st, first, second := stats[name], s1.Stats(name), s2.Stats(name)
		t.Logf("%s: agent %+v; first server %d packets, second %d", name, st, first.Packets, second.Packets)
		if st.Captured != st.Sent+st.DroppedAgent {
			t.Fatalf("%s: captured %d != sent %d + dropped %d", name, st.Captured, st.Sent, st.DroppedAgent)
		}
		if first.Packets+second.Packets != st.Sent {
			t.Fatalf("%s: written %d + %d != sent %d", name, first.Packets, second.Packets, st.Sent)
		}
		if st.DroppedAgent == 0 || st.Connections != 2 {
			t.Fatalf("%s: want drops during the outage and 2 connections: %+v", name, st)
		}
		if d := promtest.ToFloat64(s2.metrics.drops.WithLabelValues(name, "agent")); d != float64(second.DropAgent) {
			t.Fatalf("%s: agent drops metric %v, stats %d", name, d, second.DropAgent)
		}
		// Drop reports are cumulative per agent run: the second server, counting from its
		// start, has them all.
		if second.DropAgent != st.DroppedAgent || first.DropAgent > st.DroppedAgent {
			t.Fatalf("%s: drops reported to the servers %d then %d, agent counted %d", name, first.DropAgent, second.DropAgent, st.DroppedAgent)
		}
		// What was written is the replayed sequence minus the dropped frames, without
		// duplicates.
		want := capturetest.Repeat(capturetest.Expected(t, name, files), loops)
		total := 0
		for intf, w := range want {
			g := append(got1[intf], got2[intf]...)
			total += len(g)
			if !isSubsequence(g, w) {
				t.Fatalf("%s: written packets are not the replayed sequence in order", intf)
			}
		}
		if total != int(st.Sent) {
			t.Fatalf("%s: files hold %d packets, agent sent %d", name, total, st.Sent)
		}
	}
}

// TestServerRestartSamePath restarts the server on the same configuration (a systemd restart,
// an upgrade): the second run appends a section to output.path, and the packets both runs
// acknowledged are all in the file.
func TestServerRestartSamePath(t *testing.T) {
	pkts := capturetest.EthernetFrames(t, 2)
	cfg := testServerConfig(t)
	for i := range 2 {
		s := startServer(t, cfg)
		ra, _ := dialRaw(t, s.Addr().String(), "raw", uint64(7+i))
		ra.send(1, interfaceRecord(t, 0, "eth0"), packetRecord(pkts[i]))
		ra.waitAck(1)
		_ = ra.conn.Close()
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	capturetest.Compare(t, capturetest.ReadPcapng(t, cfg.Output.Path), capturetest.Frames{"raw:eth0": pkts})
}

// agentHelperEnv makes the test binary run one agent (see TestMain) and print its stats.
const agentHelperEnv = "FLOWZERO_CAPTURE_AGENT_HELPER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(agentHelperEnv); cfg != "" {
		os.Exit(runAgentHelper(cfg))
	}
	os.Exit(m.Run())
}

func runAgentHelper(js string) int {
	var cfg agent.Configuration
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	a, err := agent.New(nil, cfg, agent.Dependencies{Logger: quiet, Clock: testutil.Clock()})
	if err == nil {
		err = a.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("started")
	<-a.Done()
	err = a.Stop()
	out, _ := json.Marshal(a.Stats())
	fmt.Println(string(out))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func startAgentProcess(t *testing.T, cfg agent.Configuration) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), agentHelperEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "started" {
		t.Fatalf("agent process did not start: %q", sc.Text())
	}
	return cmd, sc
}

// TestAgentKilled kills an agent process (SIGKILL) in the middle of its stream, then starts
// it again: the server drops the cut frame, keeps a readable file and writes the whole
// second run.
func TestAgentKilled(t *testing.T) {
	files := capturetest.Captures(t)
	scfg := testServerConfig(t)
	s := startServer(t, scfg)
	defer s.Stop()
	acfg := testAgentConfig("victim", s.Addr().String(), files)
	acfg.Replay.Loop = 1 << 20 // replays until killed
	acfg.FrameSize = 4096
	cmd, _ := startAgentProcess(t, acfg)
	testutil.WaitUntil(t, "packets from the first agent", func() bool { return s.Stats("victim").Packets > 3000 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	var before uint64
	testutil.WaitUntil(t, "the killed agent's stream to end", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		st := s.agents["victim"]
		return st != nil && st.conn == nil
	})
	s.flushOutputs() // Stats counts packets once written out of the output's buffer
	before = s.Stats("victim").Packets

	acfg.Replay.Loop = 1
	cmd, out := startAgentProcess(t, acfg)
	if !out.Scan() {
		t.Fatal("no stats from the second agent")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("second agent: %v", err)
	}
	var stats agent.Stats
	if err := json.Unmarshal([]byte(out.Text()), &stats); err != nil {
		t.Fatal(err)
	}
	if stats.Captured == 0 || stats.Sent != stats.Captured || stats.DroppedAgent != 0 {
		t.Fatalf("second agent %+v", stats)
	}
	s.flushOutputs()
	after := s.Stats("victim")
	if after.Packets != before+stats.Sent || after.Connections != 2 {
		t.Fatalf("server wrote %d packets, want %d + %d; %d connections", after.Packets, before, stats.Sent, after.Connections)
	}
	m := s.metrics
	if r := promtest.ToFloat64(m.reconnects.WithLabelValues("victim")); r != 1 {
		t.Fatalf("reconnects metric %v", r)
	}
	if p := promtest.ToFloat64(m.packets.WithLabelValues("victim")); p != float64(after.Packets) {
		t.Fatalf("packets metric %v, stats %d", p, after.Packets)
	}
	if b := promtest.ToFloat64(m.bytes.WithLabelValues("victim")); b != float64(after.Bytes) || b == 0 {
		t.Fatalf("bytes metric %v, stats %d", b, after.Bytes)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	// The file reads back whole; its tail is exactly the second run.
	got := capturetest.ReadPcapng(t, scfg.Output.Path)
	want := capturetest.Expected(t, "victim", files)
	n := 0
	for name, w := range want {
		g := got[name]
		n += len(g)
		if len(g) < len(w) {
			t.Fatalf("%s: %d packets, want at least the second run's %d", name, len(g), len(w))
		}
		capturetest.Compare(t, capturetest.Frames{name: g[len(g)-len(w):]}, capturetest.Frames{name: w})
	}
	if uint64(n) != after.Packets {
		t.Fatalf("file holds %d packets, server counted %d", n, after.Packets)
	}
	if !strings.HasSuffix(scfg.Output.Path, ".pcapng") {
		t.Fatal(scfg.Output.Path)
	}
}
