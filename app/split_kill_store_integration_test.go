//go:build integration && chdb

package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"flowzero/internal/kafkatest"
	"flowzero/internal/pcapfile"
	"flowzero/internal/testdata"
	"flowzero/internal/testutil"
	"flowzero/replay"
	"flowzero/store/chdb"
)

// TestSplitKillOutletStore: an outlet process storing into the embedded engine is killed
// with SIGKILL three times while datagrams flow, each time while a unit's range is recorded in
// the group's commit metadata (the unit is being inserted, or was, and its end is not
// committed), and started again on the same data directory. Every flow is stored exactly once: one row per flow identity in the
// flows table, and the aggregated tables hold the flows' sums. Its file output, at least
// once, shows what the kills replayed. One outlet: the embedded engine is one per process,
// so units replayed by another outlet would go to another engine (docs/scaling.md).
func TestSplitKillOutletStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "flowzero")
	if out, err := exec.Command("go", "build", "-tags", "chdb", "-o", bin, "flowzero/cmd/flowzero").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	st := newSplitTopics(t, 8)
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
	p := &outletProcess{bin: bin, dir: filepath.Join(root, "outlet"), config: filepath.Join(root, "outlet.yaml")}
	engineDir := filepath.Join(root, "chdb")
	yaml := fmt.Sprintf(`mode: outlet
log: {level: info}
datagrams: {brokers: [%s], topic: %s, replication-factor: %d}
outlet: {group: %s, commit-interval: 100ms, session-timeout: 6s, state: {topic: %s, replication-factor: %d}}
collector: {http: {listen: ""}}
schema: {enabled: [DatagramPartition, DatagramOffset, DatagramIndex]}
outputs:
  file: {directory: %s, compression: none}
  store:
    enabled: true
    ttl: 0s
    resolutions: [{interval: 1m, ttl: 0s}, {interval: 5m, ttl: 0s}, {interval: 1h, ttl: 0s}]
    embedded: {path: %s, max-threads: 2}
`, strings.Join(st.brokers, ", "), st.datagrams, st.rf, st.group, st.state, st.rf, p.dir, engineDir)
	if err := os.WriteFile(p.config, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p.start(t)
	in := startApp(t, st.config(t, ModeInlet))

	// Datagrams flow until the kills are over (each waits for new flows), 400 passes at least,
	// or until the test ends (failed).
	const minPasses = 400
	var passes atomic.Int64
	killed, stopped, abort := make(chan struct{}), make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(abort); <-stopped })
	go func() {
		defer close(stopped)
		at := testutil.Now()
		for pass := 0; ; pass++ {
			select {
			case <-abort:
				return
			default:
			}
			if pass >= minPasses {
				select {
				case <-killed:
					return
				default:
				}
			}
			for _, dg := range dgs {
				at = at.Add(time.Millisecond)
				in.Inlet().Forward(dg.Payload, dg.Src, at, "netflow")
			}
			passes.Add(1)
			time.Sleep(20 * time.Millisecond) // a rate, not a synchronisation
		}
	}()
	archived := func() int {
		ids := map[flowID]int{}
		readFlowIDsTolerant(t, p.dir, ids)
		return len(ids)
	}
	adm := kadm.NewClient(kafkatest.Client(t))
	// Each kill lands between the commit recording a unit's range and the commit of its end,
	// while the unit is inserted or just after: a range in the metadata of a committed offset.
	recording := func() bool {
		committed, err := adm.FetchOffsets(context.Background(), st.group)
		if err != nil {
			return false
		}
		found := false
		committed.Each(func(o kadm.OffsetResponse) { found = found || strings.HasPrefix(o.Metadata, "flowzero-unit ") })
		return found
	}
	for kill := range 3 {
		before := archived()
		testutil.WaitUntil(t, fmt.Sprintf("the outlet to handle flows before kill %d", kill+1), func() bool {
			return archived() > before
		})
		testutil.WaitUntil(t, fmt.Sprintf("the outlet to record a unit's range before kill %d", kill+1), recording)
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		p.start(t)
	}
	close(killed)
	<-stopped
	testutil.WaitUntil(t, "the inlet to deliver every datagram", func() bool {
		s, delivered, dropped := in.Inlet().Counts()
		return delivered+dropped == s
	})
	_, _, dropped := in.Inlet().Counts()
	if dropped != 0 {
		t.Fatalf("the inlet dropped %d datagrams", dropped)
	}
	kafkatest.WaitCommitted(t, adm, st.datagrams, st.group)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	log, _ := os.ReadFile(p.dir + ".log")
	replayedUnits := strings.Count(string(log), "unit cut at the range recorded before")
	newTokens := strings.Count(string(log), "inserted with a new token")

	ids := map[flowID]int{}
	readFlowIDsTolerant(t, p.dir, ids)
	archivedTwice := 0
	for _, n := range ids {
		if n > 1 {
			archivedTwice++
		}
	}
	c, err := chdb.Open(engineDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := func(sql string) string {
		t.Helper()
		out, err := c.Query(sql, "TSV")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	want := int(passes.Load()) * once.Flows
	id := "DatagramPartition, DatagramOffset, DatagramIndex"
	if got := q("SELECT count(), uniqExact(" + id + ") FROM flowzero.flows"); got != fmt.Sprintf("%d\t%d", want, want) {
		t.Errorf("flows table: rows and distinct identities %q, want %d of each", got, want)
	}
	twice := q("SELECT count() FROM (SELECT " + id + " FROM flowzero.flows GROUP BY " + id + " HAVING count() > 1)")
	if twice != "0" {
		t.Errorf("%s flows stored more than once", twice)
		t.Logf("flows stored more than once, by datagram: %s", q("SELECT groupArray((DatagramPartition, DatagramOffset, n)) FROM (SELECT DatagramPartition, DatagramOffset, count() AS n FROM flowzero.flows GROUP BY ALL HAVING n > uniqExact(DatagramIndex) ORDER BY ALL)"))
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "inserted again") || strings.Contains(line, "recorded before") {
				t.Log(line)
			}
		}
	}
	sums := q("SELECT sum(Bytes), sum(Packets) FROM flowzero.flows")
	for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
		if got := q("SELECT sum(Bytes), sum(Packets) FROM flowzero." + table); got != sums {
			t.Errorf("%s: sums %q, want the flows' %q", table, got, sums)
		}
	}
	t.Logf("%d flows sent, 3 kills: the engine holds %s rows, %s flows more than once; the file output (at least once) has %d flows more than once; units cut again at a recorded range after a restart: %d, %d of them with a new token",
		want, q("SELECT count() FROM flowzero.flows"), twice, archivedTwice, replayedUnits, newTokens)
}
