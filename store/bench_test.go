//go:build chdb

package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"flowzero/output"
	"flowzero/schema"
	"flowzero/store/chdb"
	"flowzero/store/ddl"
	"flowzero/store/engine"
	"flowzero/store/internal/storetest"
	"flowzero/store/native"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// threadCPU returns the CPU seconds of this process's live threads, summed by thread name:
// the engine names its threads by pool (ThreadPool and QueryPipelineEx run inserts,
// MergeMutate merges), which tells where an insert's CPU went; the trailing digits of a
// name are dropped. Threads gone meanwhile are missed.
func threadCPU() map[string]float64 {
	out := map[string]float64{}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		comm, err1 := os.ReadFile("/proc/self/task/" + t.Name() + "/comm")
		stat, err2 := os.ReadFile("/proc/self/task/" + t.Name() + "/stat")
		if err1 != nil || err2 != nil {
			continue
		}
		// Fields after the parenthesised name: utime and stime are the 12th and 13th.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		name := strings.TrimRight(strings.TrimSpace(string(comm)), "0123456789")
		out[name] += (u + s) / 100 // USER_HZ
	}
	return out
}

// logThreadCPU logs each thread name's share of the CPU spent since threads0 and returns
// the share of the engine's merge threads (MergeMutate).
func logThreadCPU(b *testing.B, threads0 map[string]float64, cpu float64) (merges float64) {
	var sb strings.Builder
	for name, c := range threadCPU() {
		d := c - threads0[name]
		if name == "MergeMutate" {
			merges = d
		}
		if d > 0.01*cpu {
			fmt.Fprintf(&sb, "  %s: %.2f CPU-s (%.0f%%)\n", name, d, 100*d/cpu)
		}
	}
	b.Logf("CPU by thread name (%.2f CPU-s in all):\n%s", cpu, sb.String())
	return merges
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkStoreInsert measures the sustained insert rate of encoded demo flows into the
// embedded engine and the bytes each flow takes on disk once merged, for:
//   - null: the flows columns in a Null table, the cost of reading the input alone (the
//     speed-of-light baseline for an INSERT of these flows);
//   - flows: the flows MergeTree alone;
//   - flows+aggregates: the flows table with the 1m/5m/1h tables fed by their views (the
//     default installation);
//   - sink: the same through Sink.Send/Flush, as the collector feeds it (its 64 KiB
//     batches): flows_1m pre-aggregated by the sink (embedded.pre-aggregate, the default);
//   - sink-view: the same with flows_1m fed by its view (pre-aggregate off);
//   - sink-10s, sink-5s, sink-5s-unsummed and sink-2s: the sink with the batches of a
//     collector at the demo's 20k flows/s flushing every 10 s, 5 s (the default
//     flush-interval: 100k flows) or 2 s (40k flows), their groups summed for 30 s (the
//     default pre-aggregate-interval) or, unsummed, inserted with each batch;
//   - sink-sustained: the sink fed 8M flows per iteration, until the engine's background
//     merges have settled (benchSustained): the steady-state cost, merges included, which
//     the other variants hardly see (run it with -benchtime 1x);
//
// each of the first three with format=protobuf (the batch as it is, ClickHouse's Protobuf
// input) and format=native (the batch converted by NativeEncoder, as the sink does; the
// conversion runs in this process and is counted).
//
// The sink variants write one untimed round first, as a running collector's sink is: its
// batch buffers allocated and recycled, the encoder's blocks and the aggregator's table
// grown (cold, the first round's fresh 64 MiB buffers cost ~0.15 µs per flow in page faults
// and GC). Its parts then make the engine start merging within the timed rounds.
//
// Metrics: flows/s (wall clock), flows/cpu-s (per core: the process's CPU time, engine
// threads included), flows/insert-cpu-s (the same without the engine's merge threads, the
// cost of the inserts alone), disk-B/flow for the flows table after OPTIMIZE FINAL. The
// CPU by thread name is logged; FLOWZERO_BENCH_EVENTS=file writes the engine's own
// counters (system.events) per flow of the sink variants' timed rounds to file.
func BenchmarkStoreInsert(b *testing.B) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	batches, encoded := storetest.DemoBatches(s)
	b.Logf("%d flows, %.1f bytes/flow encoded, %d batches", storetest.BenchFlows, float64(encoded)/storetest.BenchFlows, len(batches))
	dir := b.TempDir()
	for _, variant := range []string{"null", "flows", "flows+aggregates", "sink", "sink-view", "sink-10s", "sink-5s", "sink-5s-unsummed", "sink-2s", "sink-sustained"} {
		for _, format := range []string{"protobuf", "native"} {
			name := "table=" + variant + "/format=" + format
			if strings.HasPrefix(variant, "sink") {
				if format == "protobuf" {
					continue
				}
				name = "table=" + variant
			}
			b.Run(name, func(b *testing.B) {
				cfg := DefaultConfiguration()
				cfg.Embedded.Path = filepath.Join(dir, strings.ReplaceAll(variant, "+", "-")+"-"+format)
				if variant == "null" || variant == "flows" {
					cfg.Resolutions = nil
				}
				// Only the sink pre-aggregates: the variants inserting straight into the
				// flows table need the view to feed flows_1m.
				cfg.Embedded.PreAggregate = variant != "sink-view" && strings.HasPrefix(variant, "sink")
				if every := map[string]time.Duration{"sink-10s": 10 * time.Second, "sink-5s": 5 * time.Second, "sink-5s-unsummed": 5 * time.Second, "sink-2s": 2 * time.Second}[variant]; every > 0 {
					// The batches of a collector at the demo's 20k flows/s, cut every
					// flush-interval. Summed for 30 s, six of 5 s (fifteen of 2 s) make one
					// insert of groups; unsummed, each one does.
					cfg.Embedded.BatchBytes = int(every / storetest.DemoEvery * time.Duration(encoded) / storetest.BenchFlows)
					if variant == "sink-5s-unsummed" {
						cfg.Embedded.PreAggregateInterval = 0
					}
				}
				if variant == "sink-sustained" {
					benchSustained(b, cfg, s)
					return
				}
				if strings.HasPrefix(variant, "sink") {
					benchSink(b, cfg, s, batches)
					return
				}
				conn, d := benchOpen(b, cfg, s)
				defer conn.Close()
				table := d.FlowsTable()
				if variant == "null" {
					if err := conn.Exec("CREATE TABLE IF NOT EXISTS flowzero.null AS flowzero.flows ENGINE = Null"); err != nil {
						b.Fatal(err)
					}
					table = "flowzero.null"
				}
				insert := func(batch []byte) error {
					_, err := conn.Insert(strings.Replace(d.InsertStatement(), d.FlowsTable(), table, 1), "Protobuf", batch)
					return err
				}
				if format == "native" {
					enc, err := native.NewEncoder(s)
					if err != nil {
						b.Fatal(err)
					}
					stmt := strings.Replace(d.NativeInsertStatement(enc.Columns()), d.FlowsTable(), table, 1)
					insert = func(batch []byte) error {
						enc.Reset()
						if _, err := enc.AppendDelimited(batch); err != nil {
							return err
						}
						_, err := conn.Insert(stmt, "Native", enc.Block())
						return err
					}
				}
				b.SetBytes(int64(encoded))
				b.ResetTimer()
				threads0, cpu0, t0 := threadCPU(), cpuSeconds(), time.Now()
				for b.Loop() {
					for _, batch := range batches {
						if err := insert(batch); err != nil {
							b.Fatal(err)
						}
					}
				}
				report(b, cpu0, t0, threads0)
				if variant != "null" {
					reportDisk(b, conn)
				}
			})
		}
	}
}

func benchOpen(b *testing.B, cfg Configuration, s *schema.Schema) (*chdb.Conn, *ddl.DDL) {
	dir, err := cfg.ProtoDir()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ddl.WriteProto(dir, s); err != nil {
		b.Fatal(err)
	}
	conn, err := chdb.Open(cfg.Embedded.Path, engine.Args()...)
	if err != nil {
		b.Fatal(err)
	}
	d := NewDDL(cfg, s, dir)
	m := &ddl.Migrator{DDL: d, Exec: engine.Embedded{Conn: conn}, Logger: storetest.QuietLogger()}
	if _, err := m.Migrate(context.Background(), false); err != nil {
		b.Fatal(err)
	}
	return conn, d
}

// startBenchSink starts a sink whose queue holds queued batches: the benchmarks measure the
// engine, not the drop policy (checkNotDropped).
func startBenchSink(b *testing.B, cfg Configuration, s *schema.Schema, queued int) *Sink {
	cfg.Embedded.QueueLength = queued
	sink := newTestSink(b, nil, cfg, s)
	if err := sink.Start(); err != nil {
		b.Fatal(err)
	}
	return sink
}

// checkNotDropped fails the benchmark if the sink dropped flows for want of queue room.
func checkNotDropped(b *testing.B, sink *Sink) {
	if n := counterValue(sink.m.droppedFull); n > 0 {
		b.Fatalf("%v flows dropped: queue full", n)
	}
}

// collectorBatchBytes is the collector's default batch-size: its workers hand the sinks
// batches of encoded flows up to that size.
const collectorBatchBytes = 64 << 10

// collectorBatches cuts batches into the output batches a collector would hand the sink (Send):
// views into them, each up to collectorBatchBytes of whole messages.
func collectorBatches(batches [][]byte) (out []*output.Batch) {
	for _, batch := range batches {
		start, end, flows := 0, 0, 0
		for end < len(batch) {
			n, w := binary.Uvarint(batch[end:])
			if w <= 0 || n > uint64(len(batch)-end-w) {
				panic("malformed demo batch")
			}
			if next := end + w + int(n); next-start > collectorBatchBytes && flows > 0 {
				out = append(out, &output.Batch{Data: batch[start:end], Flows: flows})
				start, flows = end, 0
			}
			end += w + int(n)
			flows++
		}
		if flows > 0 {
			out = append(out, &output.Batch{Data: batch[start:end], Flows: flows})
		}
	}
	return out
}

// sendAll hands every batch to the sink, as the collector does: Send releases the reference
// it is given, so each batch gets one first.
func sendAll(sink *Sink, obs []*output.Batch) {
	for _, ob := range obs {
		ob.Retain(1)
		sink.Send(ob)
	}
}

func benchSink(b *testing.B, cfg Configuration, s *schema.Schema, batches [][]byte) {
	size := 0
	for _, batch := range batches {
		size += len(batch)
	}
	// Room for every batch of an iteration, whatever the batch size.
	sink := startBenchSink(b, cfg, s, max(2*len(batches), size/cfg.Embedded.BatchBytes+2))
	defer sink.Stop()
	obs := collectorBatches(batches)
	round := func() {
		sendAll(sink, obs)
		if err := sink.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	round() // warm-up, untimed
	ev0 := engineEvents(b, sink.Conn())
	b.ResetTimer()
	threads0, cpu0, t0 := threadCPU(), cpuSeconds(), time.Now()
	for b.Loop() {
		round()
	}
	report(b, cpu0, t0, threads0)
	if os.Getenv("FLOWZERO_BENCH_EVENTS") != "" {
		ev1 := engineEvents(b, sink.Conn())
		var sb strings.Builder
		for k, v := range ev1 {
			if d := v - ev0[k]; d != 0 {
				fmt.Fprintf(&sb, "%s\t%.4g\n", k, d/float64(b.N)/storetest.BenchFlows)
			}
		}
		if err := os.WriteFile(os.Getenv("FLOWZERO_BENCH_EVENTS"), []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	checkNotDropped(b, sink)
	reportDisk(b, sink.Conn())
}

// sustainedRounds is how many times the sustained variant sends the demo batches per
// iteration, each time later by storetest.DemoSpan: 8M flows, enough for the engine's background
// merges to run at their steady-state pace.
const sustainedRounds = 8

// benchSustained feeds the sink sustainedRounds × storetest.BenchFlows flows per iteration, with
// advancing times (as a collector would over ~7 minutes at 20k flows/s, only faster), then
// waits until the engine has settled: no merge running and the tables' parts unchanged for
// a while. flows/s and flows/cpu-s cover inserts and merges (the engine's merge threads are
// threads of this process, counted by getrusage); disk-B/flow is the flows table's size as
// the merges left it (no OPTIMIZE), parts the active parts of every table left by them.
func benchSustained(b *testing.B, cfg Configuration, s *schema.Schema) {
	batches, _, times := storetest.DemoBatchesTimed(s)
	sink := startBenchSink(b, cfg, s, 2*sustainedRounds*len(batches))
	defer sink.Stop()
	obs := collectorBatches(batches) // views: shiftTimes moves their times too
	conn := sink.Conn()
	ev0 := engineEvents(b, conn)
	var insertCPU, settleCPU, insertWall, cpu, wall float64
	rounds := 0
	b.ResetTimer()
	for b.Loop() {
		c, t := cpuSeconds(), time.Now()
		for range sustainedRounds {
			if rounds > 0 {
				storetest.ShiftTimes(batches, times, storetest.DemoSpan+time.Second)
			}
			rounds++
			sendAll(sink, obs)
		}
		if err := sink.Flush(); err != nil {
			b.Fatal(err)
		}
		c1, t1 := cpuSeconds(), time.Now()
		insertCPU += c1 - c
		insertWall += t1.Sub(t).Seconds()
		c2, t2 := settle(b, conn)
		settleCPU += c2 - c1
		cpu += c2 - c
		wall += t2.Sub(t).Seconds()
	}
	b.StopTimer()
	checkNotDropped(b, sink)
	flows := float64(b.N) * sustainedRounds * storetest.BenchFlows
	b.ReportMetric(flows/wall, "flows/s")
	b.ReportMetric(flows/cpu, "flows/cpu-s")
	b.ReportMetric(0, "ns/op")
	// What the engine did meanwhile: merges, and how many rows they rewrote per flow.
	ev1 := engineEvents(b, conn)
	var sb strings.Builder
	for _, k := range []string{"Merge", "MergedRows", "GatheredColumns", "MergedUncompressedBytes",
		"MergeTotalMilliseconds", "MergeHorizontalStageTotalMilliseconds", "MergeVerticalStageTotalMilliseconds",
		"RowsReadByMainReader", "ReadBufferFromFileDescriptorReadBytes", "ReadCompressedBytes",
		"MergeTreeDataWriterUncompressedBytes", "MergeTreeDataWriterCompressedBytes", "InsertedRows",
		"UserTimeMicroseconds", "SystemTimeMicroseconds"} {
		fmt.Fprintf(&sb, "  %s: %.3g per flow\n", k, (ev1[k]-ev0[k])/flows)
	}
	b.ReportMetric((ev1["MergedRows"]-ev0["MergedRows"])/flows, "merged-rows/flow")
	b.Logf("CPU-s: inserts %.1f (%.1f s wall), after the last insert until settled %.1f (engine threads only)\nengine events:\n%s",
		insertCPU, insertWall, settleCPU, sb.String())
	out, err := conn.Query("SELECT table, count(), sum(rows), sum(bytes_on_disk), groupUniqArray(part_type) FROM system.parts WHERE database = 'flowzero' AND active GROUP BY table ORDER BY table", "TSV")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("active parts (table, parts, rows, bytes, types):\n%s", out)
	parts := 0.0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		n, _ := strconv.ParseFloat(f[1], 64)
		parts += n
		if f[0] == "flows" {
			rows, _ := strconv.ParseFloat(f[2], 64)
			bytes, _ := strconv.ParseFloat(f[3], 64)
			b.ReportMetric(bytes/rows, "disk-B/flow")
			b.ReportMetric(n, "flows-parts")
		}
	}
	b.ReportMetric(parts, "parts")
	if out, err := conn.Query("SELECT min(TimeReceived), max(TimeReceived), count() FROM flowzero.flows", "TSV"); err == nil {
		b.Logf("flows: %s", out)
	}
}

// settleQuiet is how long the parts must stay unchanged, with no merge running, for the
// engine to count as settled.
const settleQuiet = 3 * time.Second

// settle waits until no merge runs and the active parts of the database have not changed for
// settleQuiet, and returns the process's CPU time and the time when they last changed.
func settle(b *testing.B, conn *chdb.Conn) (float64, time.Time) {
	var last string
	lastCPU, since := cpuSeconds(), time.Now()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, err := conn.Query("SELECT (SELECT count() FROM system.merges), (SELECT count(), sum(cityHash64(name)) FROM system.parts WHERE database = 'flowzero' AND active)", "TSV")
		if err != nil {
			b.Fatal(err)
		}
		cur := string(out)
		if cur != last || !strings.HasPrefix(cur, "0\t") {
			last, lastCPU, since = cur, cpuSeconds(), time.Now()
			continue
		}
		if time.Since(since) >= settleQuiet {
			return lastCPU, since
		}
	}
	b.Fatal("merges did not settle in 5 minutes")
	return 0, time.Time{}
}

// engineEvents returns the engine's cumulative profile events (system.events).
func engineEvents(b *testing.B, conn *chdb.Conn) map[string]float64 {
	out, err := conn.Query("SELECT event, value FROM system.events", "TSV")
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok {
			m[k], _ = strconv.ParseFloat(v, 64)
		}
	}
	return m
}

func report(b *testing.B, cpu0 float64, t0 time.Time, threads0 map[string]float64) {
	wall, cpu := time.Since(t0).Seconds(), cpuSeconds()-cpu0
	merges := logThreadCPU(b, threads0, cpu)
	flows := float64(b.N) * storetest.BenchFlows
	b.ReportMetric(flows/wall, "flows/s")
	b.ReportMetric(flows/cpu, "flows/cpu-s")
	b.ReportMetric(flows/(cpu-merges), "flows/insert-cpu-s")
	b.ReportMetric(0, "ns/op")
}

func reportDisk(b *testing.B, conn *chdb.Conn) {
	b.StopTimer()
	if err := conn.Exec("OPTIMIZE TABLE flowzero.flows FINAL"); err != nil {
		b.Fatal(err)
	}
	out, err := conn.Query("SELECT sum(bytes_on_disk), sum(rows) FROM system.parts WHERE database = 'flowzero' AND table = 'flows' AND active", "TSV")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(out))
	bytes, _ := strconv.ParseFloat(f[0], 64)
	rows, _ := strconv.ParseFloat(f[1], 64)
	if rows == 0 {
		b.Fatal("no rows on disk")
	}
	b.ReportMetric(bytes/rows, "disk-B/flow")
	out, _ = conn.Query("SELECT name, formatReadableSize(sum(data_compressed_bytes)) AS c, round(sum(data_compressed_bytes) / "+f[1]+", 2) FROM system.columns WHERE database = 'flowzero' AND table = 'flows' GROUP BY name ORDER BY sum(data_compressed_bytes) DESC LIMIT 8", "TSV")
	b.Logf("largest columns (name, size, B/flow):\n%s", out)
}

func counterValue(c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// BenchmarkStoreSinkWrite measures Sink.Write as the collector's workers call it (lock, copy,
// cut batches; the engine inserting in the background), against appending the same bytes to
// a slice: the copy that Write cannot avoid. Both must be 0 allocs/op.
func BenchmarkStoreSinkWrite(b *testing.B) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	fm := s.NewFlowMessage()
	msg := slicesClone(storetest.Flows[0].Encode(fm))
	b.Run("impl=append", func(b *testing.B) {
		buf := make([]byte, 0, 16<<20)
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if len(buf)+len(msg) > cap(buf) {
				buf = buf[:0]
			}
			buf = append(buf, msg...)
		}
	})
	b.Run("impl=sink", func(b *testing.B) {
		cfg := DefaultConfiguration()
		cfg.Embedded.Path = b.TempDir()
		cfg.Resolutions = nil
		// Small batches and a short queue: Write goes at memory speed, so most batches are
		// dropped (and counted) while the engine inserts one; Stop then waits for two at most.
		cfg.Embedded.BatchBytes = 1 << 20
		cfg.Embedded.QueueLength = 1
		sink := newTestSink(b, nil, cfg, s)
		if err := sink.Start(); err != nil {
			b.Fatal(err)
		}
		defer sink.Stop()
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			sink.Write(msg)
		}
	})
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }
