//go:build integration && chdb

package app

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
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
	"flowzero/store/engine"
)

// serverStandIn is a stand-in of ClickHouse's HTTP interface in front of the real engine
// (chDB) of the test process: transport only. An INSERT (the statement in the query
// parameter, its data in the body) goes to the engine as it came, SETTINGS included; any
// other statement (the body) runs as it came, its output in default_format. Each outlet uses
// its own path (/outlet0, ...), so that the stand-in knows which one inserts.
type serverStandIn struct {
	conn *chdb.Conn
	// drop, for the negative controls (FLOWZERO_TEST_STANDIN): "no-token" takes
	// insert_deduplication_token out of the INSERTs before the engine runs them;
	// "unique-token" gives each INSERT a token of its own, as a token not derived from the
	// unit's offset range would be.
	drop string
	seq  int

	mu sync.Mutex
	// inserts lists, per token, the outlets whose INSERT the engine ran.
	inserts map[string][]string
	// withSettings counts the INSERTs that reached the engine with both deduplication settings.
	withSettings, total int
	// armed is the path of the outlet to kill during its next INSERT ("" none): the engine
	// stores the unit, then the stand-in sends the token on killed and does not answer
	// before release is closed.
	armed   string
	killed  chan string
	release chan struct{}
}

var tokenSetting = regexp.MustCompile(`, insert_deduplication_token = '[^']*'`)

func (s *serverStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	fail := func(err error) {
		w.Header().Set("X-ClickHouse-Exception-Code", "1")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, err.Error())
	}
	stmt := r.URL.Query().Get("query")
	if stmt == "" {
		format := r.URL.Query().Get("default_format")
		if format == "" {
			format = "TabSeparated"
		}
		out, err := s.conn.Query(string(body), format)
		if err != nil {
			fail(err)
			return
		}
		w.Write(out)
		return
	}
	i := strings.LastIndex(stmt, " FORMAT ")
	if i < 0 {
		fail(fmt.Errorf("an INSERT without FORMAT: %.100s", stmt))
		return
	}
	stmt, format := stmt[:i], stmt[i+len(" FORMAT "):]
	token := ""
	if m := tokenSetting.FindString(stmt); m != "" {
		token = strings.TrimSuffix(strings.TrimPrefix(m, ", insert_deduplication_token = '"), "'")
	}
	settings := token != "" && strings.Contains(stmt, ", deduplicate_blocks_in_dependent_materialized_views = 1")
	switch s.drop {
	case "no-token":
		stmt = tokenSetting.ReplaceAllString(stmt, "")
	case "unique-token":
		s.mu.Lock()
		s.seq++
		stmt = tokenSetting.ReplaceAllString(stmt, fmt.Sprintf(", insert_deduplication_token = 'insert-%d'", s.seq))
		s.mu.Unlock()
	}
	if _, err := s.conn.Insert(stmt, format, body); err != nil {
		fail(err)
		return
	}
	s.mu.Lock()
	s.total++
	if settings {
		s.withSettings++
	}
	s.inserts[token] = append(s.inserts[token], r.URL.Path)
	kill, release := s.armed != "" && s.armed == r.URL.Path, s.release
	if kill {
		s.armed = ""
	}
	s.mu.Unlock()
	if kill {
		// Stored, never acknowledged: the outlet dies before it commits the unit's end.
		s.killed <- token
		<-release
		fail(fmt.Errorf("killed"))
	}
}

// insertedBy returns the outlets that inserted token.
func (s *serverStandIn) insertedBy(token string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inserts[token]...)
}

// TestSplitServerStoredOnce: three outlet processes insert their units into ONE real
// ClickHouse engine (chDB in the test process, behind a stand-in of ClickHouse's HTTP
// interface: outputs.store.clickhouse.url). Three times, an outlet is killed with SIGKILL in
// the middle of an INSERT that the engine has run (the unit is stored, its offsets are not
// committed); the outlets left take its partitions and insert that unit again, with the same
// token; the killed outlet is started again once they have. Every flow is stored exactly once:
// one row per flow identity in the flows table, and the aggregated tables (fed by the
// engine's materialized views) hold the flows' sums. Their file outputs, at least once, show
// the flows decoded twice.
//
// The negative controls: FLOWZERO_TEST_STANDIN=unique-token makes the stand-in give each
// INSERT a token of its own, and the test fails with the flows of the units inserted again
// stored twice; FLOWZERO_TEST_STANDIN=no-token takes the token out (the tables' block-hash
// deduplication remains, which catches a unit inserted again with the same bytes only:
// docs/scaling.md).
func TestSplitServerStoredOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "flowzero")
	if out, err := exec.Command("go", "build", "-o", bin, "flowzero/cmd/flowzero").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := t.TempDir()
	conn, err := chdb.Open(filepath.Join(root, "server"), engine.Args()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	standIn := &serverStandIn{conn: conn, drop: os.Getenv("FLOWZERO_TEST_STANDIN"), inserts: map[string][]string{},
		killed: make(chan string)}
	srv := httptest.NewServer(standIn)
	defer srv.Close()

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
	var outlets []*outletProcess
	for i := range 3 {
		p := &outletProcess{bin: bin, dir: filepath.Join(root, fmt.Sprintf("outlet%d", i)), config: filepath.Join(root, fmt.Sprintf("outlet%d.yaml", i))}
		yaml := fmt.Sprintf(`mode: outlet
log: {level: info}
datagrams: {brokers: [%s], topic: %s}
outlet: {group: %s, commit-interval: 100ms, session-timeout: 6s, state: {topic: %s}}
collector: {http: {listen: ""}}
schema: {enabled: [DatagramPartition, DatagramOffset, DatagramIndex]}
outputs:
  file: {directory: %s, compression: none}
  store:
    enabled: true
    ttl: 0s
    resolutions: [{interval: 1m, ttl: 0s}, {interval: 5m, ttl: 0s}, {interval: 1h, ttl: 0s}]
    clickhouse: {url: %s/outlet%d}
    server: {retries: 1, retry-delay: 100ms}
`, strings.Join(st.brokers, ", "), st.datagrams, st.group, st.state, p.dir, srv.URL, i)
		if err := os.WriteFile(p.config, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		outlets = append(outlets, p)
	}
	// The tables, as an operator creates them: `flowzero store migrate` with the outlets'
	// configuration (mode outlet: the tables remember the tokens), through the stand-in.
	if out, err := exec.Command(bin, "store", "migrate", "-config", outlets[0].config).CombinedOutput(); err != nil {
		t.Fatalf("store migrate: %v\n%s", err, out)
	}
	for _, p := range outlets {
		p.start(t)
	}
	in := startApp(t, st.config(t, ModeInlet))

	// Passes of the capture, its datagrams one millisecond apart, until the kills are over.
	var passes atomic.Int64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		at := testutil.Now()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, dg := range dgs {
				at = at.Add(time.Millisecond)
				in.Inlet().Forward(dg.Payload, dg.Src, at, "netflow")
			}
			passes.Add(1)
			time.Sleep(20 * time.Millisecond) // a rate, not a synchronisation
		}
	}()

	const kills = 3
	for k := range kills {
		p := outlets[k%len(outlets)]
		path := fmt.Sprintf("/outlet%d", k%len(outlets))
		standIn.mu.Lock()
		standIn.armed, standIn.release = path, make(chan struct{})
		standIn.mu.Unlock()
		var token string
		select {
		case token = <-standIn.killed:
		case <-time.After(testutil.WaitTimeout):
			t.Fatalf("kill %d: no INSERT from %s", k+1, path)
		}
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
		close(standIn.release)
		// Another outlet takes the partition and inserts the unit again, same token.
		testutil.WaitUntil(t, fmt.Sprintf("kill %d: another outlet to insert %s again", k+1, token), func() bool {
			for _, by := range standIn.insertedBy(token) {
				if by != path {
					return true
				}
			}
			return false
		})
		p.start(t)
	}
	for n := passes.Load(); passes.Load() < n+20; {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	<-stopped
	testutil.WaitUntil(t, "the inlet to deliver every datagram", func() bool {
		s, delivered, dropped := in.Inlet().Counts()
		return delivered+dropped == s
	})
	if _, _, dropped := in.Inlet().Counts(); dropped != 0 {
		t.Fatalf("the inlet dropped %d datagrams", dropped)
	}
	adm := kadm.NewClient(kafkatest.Client(t))
	kafkatest.WaitCommitted(t, adm, st.datagrams, st.group)
	for _, p := range outlets {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
	}

	var dirs []string
	for _, p := range outlets {
		dirs = append(dirs, p.dir)
	}
	ids := map[flowID]int{}
	for _, dir := range dirs {
		readFlowIDsTolerant(t, dir, ids)
	}
	archivedTwice := 0
	for _, n := range ids {
		if n > 1 {
			archivedTwice++
		}
	}
	q := func(sql string) string {
		t.Helper()
		out, err := conn.Query(sql, "TSV")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	standIn.mu.Lock()
	total, withSettings, tokens, again := standIn.total, standIn.withSettings, len(standIn.inserts), 0
	for _, by := range standIn.inserts {
		if len(by) > 1 {
			again++
		}
	}
	standIn.mu.Unlock()
	want := int(passes.Load()) * once.Flows
	id := "DatagramPartition, DatagramOffset, DatagramIndex"
	twice := q("SELECT count() FROM (SELECT " + id + " FROM flowzero.flows GROUP BY " + id + " HAVING count() > 1)")
	rows := q("SELECT count() FROM flowzero.flows")
	t.Logf("%s: %d flows sent, %d kills; %d INSERTs (%d with both deduplication settings) of %d units, %d units inserted more than once; "+
		"the engine holds %s rows, %s flows more than once; the file outputs (at least once) %d flows more than once",
		cmp.Or(standIn.drop, "tokens as sent"), want, kills, total, withSettings, tokens, again, rows, twice, archivedTwice)
	if withSettings != total && standIn.drop == "" {
		t.Errorf("%d INSERTs of %d carried both deduplication settings", withSettings, total)
	}
	if again < kills {
		t.Errorf("%d units inserted more than once, want at least one per kill (%d)", again, kills)
	}
	if got := q("SELECT count(), uniqExact(" + id + ") FROM flowzero.flows"); got != fmt.Sprintf("%d\t%d", want, want) {
		t.Errorf("flows table: rows and distinct identities %q, want %d of each", got, want)
	}
	if twice != "0" {
		t.Errorf("%s flows stored more than once", twice)
	}
	sums := q("SELECT sum(Bytes), sum(Packets) FROM flowzero.flows")
	for _, table := range []string{"flows_1m", "flows_5m", "flows_1h"} {
		if got := q("SELECT sum(Bytes), sum(Packets) FROM flowzero." + table); got != sums {
			t.Errorf("%s: sums %q, want the flows' %q", table, got, sums)
		}
	}
}
