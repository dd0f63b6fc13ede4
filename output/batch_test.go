package output

import "testing"

func TestBatchRefcount(t *testing.T) {
	bp := NewBatchPool(64, 4)
	b := bp.Get()
	b.Append([]byte{2, 8, 1})
	b.Append([]byte{2, 8, 2})
	if b.Flows != 2 || len(b.Data) != 6 {
		t.Fatalf("flows %d len %d", b.Flows, len(b.Data))
	}
	b.Retain(2) // two sinks; the worker's own reference is released below
	b.Release()
	b.Release()
	if b.Flows != 2 {
		t.Fatal("batch recycled while a sink still holds it")
	}
	b.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("over-release must panic: it is a programming error that would corrupt data")
		}
	}()
	b.refs.Store(0)
	b.pool = nil
	b.Release()
}

func TestBatchPoolNoAllocs(t *testing.T) {
	bp := NewBatchPool(1024, 4)
	msg := make([]byte, 100)
	bp.Get().Release() // warm
	allocs := testing.AllocsPerRun(1000, func() {
		b := bp.Get()
		for range 5 {
			b.Append(msg)
		}
		b.Release()
	})
	if allocs > 0.01 {
		t.Fatalf("%.2f allocs per batch, want 0", allocs)
	}
}
