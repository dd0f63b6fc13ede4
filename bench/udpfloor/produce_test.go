package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
)

// TestProducer checks that the minimal producer's requests are valid produce requests whose
// records read back, through franz-go's consumer (which checks the CRC32C), as the datagrams
// packed, in order, in batch records of at most 64 KiB.
func TestProducer(t *testing.T) {
	for _, byRecord := range []bool{false, true} {
		t.Run(fmt.Sprintf("crc-by-record=%v", byRecord), func(t *testing.T) { testProducer(t, byRecord) })
	}
}

func testProducer(t *testing.T, crcByRecord bool) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var delivered atomic.Uint64
	p := newProducer(c.ListenAddrs()[0], "t", 1, time.Hour, 200<<10, &delivered)
	p.crcByRecord = crcByRecord
	base := time.Unix(1_800_000_000, 0)
	const n = 500
	for i := range n {
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), uint16(1000+i))
		p.add(base.Add(time.Duration(i)*time.Microsecond), src, bytes.Repeat([]byte{byte(i)}, 1000+i))
	}
	p.flush()
	deadline := time.Now().Add(10 * time.Second)
	for delivered.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of %d", delivered.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	i := 0
	for i < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) > 64<<10 {
				t.Errorf("record of %d bytes", len(r.Value))
			}
			rd := datagram.NewReader(r.Value)
			for rd.Next() {
				d := rd.Datagram()
				want := fmt.Sprintf("192.0.2.%d:%d %d %d", byte(i), 1000+i, base.Add(time.Duration(i)*time.Microsecond).UnixNano(), 1000+i)
				if got := fmt.Sprintf("%s %d %d", d.Exporter, d.Received.UnixNano(), len(d.Payload)); got != want || d.Payload[0] != byte(i) {
					t.Fatalf("datagram %d: %s, want %s", i, got, want)
				}
				i++
			}
			if err := rd.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCRC32Combine(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, cut := range []int{0, 1, 61, 4096, 65_537, len(data)} {
		a, b := data[:cut], data[cut:]
		if got, want := crc32Combine(crc32.Checksum(a, tab), crc32.Checksum(b, tab), len(b)), crc32.Checksum(data, tab); got != want {
			t.Errorf("cut at %d: %08x, want %08x", cut, got, want)
		}
	}
}
