package native

import (
	"flowzero/internal/testutil"
	"flowzero/pbwire"
	"flowzero/schema"
	"flowzero/store/internal/storetest"
	"testing"
	"time"
)

// BenchmarkStoreNativeEncode measures Encoder alone on the demo batches: the Go side
// of the sink's insert, against splitting the same batches into messages (the pass over the
// bytes that any conversion needs). All must be 0 allocs/op once warm.
func BenchmarkStoreNativeEncode(b *testing.B) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	batches, encoded := storetest.DemoBatches(s)
	b.Run("impl=split", func(b *testing.B) {
		b.SetBytes(int64(encoded))
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			for _, batch := range batches {
				for len(batch) > 0 {
					msg, rest, err := pbwire.SplitDelimited(batch)
					if err != nil {
						b.Fatal(err)
					}
					n += len(msg)
					batch = rest
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/storetest.BenchFlows, "ns/flow")
	})
	// impl=native-unsorted leaves the rows in arrival order, in blocks of defaultBlockRows, as
	// the encoder did before batchSorter: the difference is the sort's cost in Go.
	// impl=chgo writes the same sorted block with ch-go's proto columns (chgoWriter): the
	// difference is the cost of writing the block ch-go's way.
	for _, impl := range []string{"native", "native-unsorted", "chgo"} {
		b.Run("impl="+impl, func(b *testing.B) {
			enc, err := NewEncoder(s)
			if err != nil {
				b.Fatal(err)
			}
			if impl == "native-unsorted" {
				enc.sorter, enc.blockRows = nil, defaultBlockRows
			}
			block := enc.Block
			if impl == "chgo" {
				w := new(chgoWriter)
				block = func() []byte { return w.block(enc) }
			}
			for _, batch := range batches { // warm: buffers and dictionaries at their size
				enc.Reset()
				enc.AppendDelimited(batch)
				block()
			}
			b.SetBytes(int64(encoded))
			cpu := testutil.StartCPU(b)
			for b.Loop() {
				for _, batch := range batches {
					enc.Reset()
					if _, err := enc.AppendDelimited(batch); err != nil {
						b.Fatal(err)
					}
					block()
				}
			}
			cpu.Stop(b)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/storetest.BenchFlows, "ns/flow")
		})
	}
}

// BenchmarkStoreAggregate measures the sink's pre-aggregation in Go (Aggregator: the
// finest resolution's GROUP BY over every dimension, and the Native block of the groups) on
// the demo batches, against the encoder alone in the same run: ns/flow of impl=aggregate
// less impl=native is the grouping's cost. Both must be 0 allocs/op once warm.
func BenchmarkStoreAggregate(b *testing.B) {
	s, err := schema.New(schema.DefaultConfiguration())
	if err != nil {
		b.Fatal(err)
	}
	batches, encoded := storetest.DemoBatches(s)
	dims := aggDims(s)
	for _, impl := range []string{"native", "aggregate"} {
		b.Run("impl="+impl, func(b *testing.B) {
			enc, err := NewEncoder(s)
			if err != nil {
				b.Fatal(err)
			}
			var agg *Aggregator
			if impl == "aggregate" {
				if agg, err = NewAggregator(enc, dims, time.Minute); err != nil {
					b.Fatal(err)
				}
			}
			groups := 0
			run := func() {
				for _, batch := range batches {
					enc.Reset()
					if _, err := enc.AppendDelimited(batch); err != nil {
						b.Fatal(err)
					}
					enc.Block()
					if agg != nil {
						agg.Block()
						groups += agg.Groups()
					}
				}
			}
			run() // warm: buffers, dictionaries and the group table at their size
			groups = 0
			b.SetBytes(int64(encoded))
			cpu := testutil.StartCPU(b)
			for b.Loop() {
				run()
			}
			cpu.Stop(b)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/storetest.BenchFlows, "ns/flow")
			if agg != nil {
				b.ReportMetric(float64(groups)/float64(b.N)/storetest.BenchFlows, "groups/flow")
			}
		})
	}
}
