package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"flowzero/datagram"
)

// producer is the least a Kafka producer of the inlet's records can do: it packs each datagram
// as the inlet does (datagram.AppendEntry, batch records of up to recordBytes) straight into
// the bytes of a produce request (one copy out of the ring), closes the request after linger
// or at maxBytes (below the broker's message.max.bytes), computes its record batch's CRC32C
// and writes it to the broker from the receiving goroutine; a second goroutine reads the
// acknowledgements. It has none of what a
// real producer needs (idempotence, retries, leader changes, several brokers): it measures
// how far under the inlet's CPU per datagram a producer of our own could go.
type producer struct {
	conn        net.Conn
	topic       string
	partitions  int32
	linger      time.Duration
	maxBytes    int
	recordBytes int
	// crcByRecord computes the batch's CRC32C a record at a time as each closes, while its
	// bytes are still in the CPU's caches, instead of over the whole request at flush.
	crcByRecord bool
	crcRecords  uint32 // CRC32C of the batch's closed records, with crcByRecord

	buf       []byte    // the produce request being built
	batchAt   int       // offset of the record batch (its baseOffset)
	recordAt  int       // offset of the open record's length varint, or -1
	valueAt   int       // offset of the open record's value
	records   int32     // records closed in the batch
	datagrams uint64    // datagrams in the request
	first     time.Time // when the request's first datagram came
	partition int32
	corr      int32

	inflight  chan uint64 // datagrams of each request written, in order
	delivered *atomic.Uint64
	errors    atomic.Uint64
}

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	netflow    = datagram.ProtocolOf("netflow")
)

// Fixed-width varints: a record's length and value length are written when it closes, in
// three bytes whatever their value (Kafka reads varints of up to five bytes, minimal or not).
const varint3 = 3

func newProducer(broker, topic string, partitions int, linger time.Duration, maxBytes int, delivered *atomic.Uint64) *producer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		log.Fatalf("creating %s: %v", topic, err)
	}
	cl.Close()
	conn, err := net.Dial("tcp", broker)
	if err != nil {
		log.Fatal(err)
	}
	p := &producer{conn: conn, topic: topic, partitions: int32(partitions), linger: linger,
		maxBytes: maxBytes, recordBytes: 64 << 10, recordAt: -1,
		buf: make([]byte, 0, maxBytes+128<<10), inflight: make(chan uint64, 1024), delivered: delivered}
	go p.acks()
	return p
}

// add packs one datagram, closing the request first when it is due.
func (p *producer) add(received time.Time, src netip.AddrPort, payload []byte) {
	d := datagram.Datagram{Received: received, Exporter: src, Protocol: netflow, Payload: payload}
	if p.datagrams > 0 && (len(p.buf)+datagram.EntryLen(d)+32 > p.maxBytes || received.Sub(p.first) >= p.linger) {
		p.flush()
	}
	if p.datagrams == 0 {
		p.first = received
		p.begin()
	}
	if p.recordAt >= 0 && len(p.buf)-p.recordAt+datagram.EntryLen(d) > p.recordBytes {
		p.closeRecord()
	}
	if p.recordAt < 0 {
		p.openRecord()
	}
	// The record starts inside the request: with room made first, AppendEntry appends in place.
	p.buf = slices.Grow(p.buf, datagram.EntryLen(d))
	rec := datagram.AppendEntry(p.buf[p.valueAt:], d)
	p.buf = p.buf[:p.valueAt+len(rec)]
	p.datagrams++
}

// tick closes a request whose linger passed while no datagram came.
func (p *producer) tick(now time.Time) {
	if p.datagrams > 0 && now.Sub(p.first) >= p.linger {
		p.flush()
	}
}

// begin starts a produce request (version 7) for the next partition and its record batch.
func (p *producer) begin() {
	b := p.buf[:0]
	b = append(b, 0, 0, 0, 0) // size
	b = be16(b, 0)            // Produce
	b = be16(b, 7)            // version
	p.corr++
	b = be32(b, uint32(p.corr))          // correlation id
	b = be16(b, uint16(len("udpfloor"))) // client id
	b = append(b, "udpfloor"...)
	b = be16(b, 0xffff) // transactional id: null
	b = be16(b, 0xffff) // acks: all
	b = be32(b, 30000)  // timeout
	b = be32(b, 1)      // topics
	b = be16(b, uint16(len(p.topic)))
	b = append(b, p.topic...)
	b = be32(b, 1) // partitions
	b = be32(b, uint32(p.partition))
	p.partition = (p.partition + 1) % p.partitions
	b = append(b, 0, 0, 0, 0) // records' size
	p.batchAt = len(b)
	b = append(b, make([]byte, 61)...) // the batch header, written at flush
	p.buf = b
	p.records = 0
	p.crcRecords = 0
}

// openRecord starts a record: attributes, timestamp delta 0, its offset delta, no key, then
// the value, a batch record, whose lengths closeRecord writes.
func (p *producer) openRecord() {
	p.recordAt = len(p.buf)
	b := append(p.buf, 0, 0, 0) // length
	b = append(b, 0, 0)         // attributes, timestamp delta
	b = binary.AppendVarint(b, int64(p.records))
	b = append(b, 1)       // key: null
	b = append(b, 0, 0, 0) // value length
	p.valueAt = len(b)
	p.buf = datagram.AppendBatch(b)
}

func (p *producer) closeRecord() {
	b := p.buf
	putVarint3(b[p.valueAt-varint3:], int64(len(b)-p.valueAt))
	p.buf = append(b, 0) // no headers
	putVarint3(p.buf[p.recordAt:], int64(len(p.buf)-p.recordAt-varint3))
	if p.crcByRecord {
		p.crcRecords = crc32.Update(p.crcRecords, castagnoli, p.buf[p.recordAt:])
	}
	p.records++
	p.recordAt = -1
}

// flush closes the record batch and the request and writes it.
func (p *producer) flush() {
	if p.recordAt >= 0 {
		p.closeRecord()
	}
	b := p.buf
	h := b[p.batchAt:]
	binary.BigEndian.PutUint64(h[0:], 0)                           // base offset
	binary.BigEndian.PutUint32(h[8:], uint32(len(b)-p.batchAt-12)) // batch length
	binary.BigEndian.PutUint32(h[12:], 0xffffffff)                 // leader epoch
	h[16] = 2                                                      // magic
	binary.BigEndian.PutUint16(h[21:], 0)                          // attributes
	binary.BigEndian.PutUint32(h[23:], uint32(p.records-1))        // last offset delta
	ts := uint64(p.first.UnixMilli())
	binary.BigEndian.PutUint64(h[27:], ts)
	binary.BigEndian.PutUint64(h[35:], ts)
	binary.BigEndian.PutUint64(h[43:], 0xffffffffffffffff) // producer id
	binary.BigEndian.PutUint16(h[51:], 0xffff)             // producer epoch
	binary.BigEndian.PutUint32(h[53:], 0xffffffff)         // base sequence
	binary.BigEndian.PutUint32(h[57:], uint32(p.records))
	if p.crcByRecord {
		crc := crc32.Checksum(h[21:61], castagnoli)
		binary.BigEndian.PutUint32(h[17:], crc32Combine(crc, p.crcRecords, len(h)-61))
	} else {
		binary.BigEndian.PutUint32(h[17:], crc32.Checksum(h[21:], castagnoli))
	}
	binary.BigEndian.PutUint32(b[p.batchAt-4:], uint32(len(b)-p.batchAt))
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := p.conn.Write(b); err != nil {
		log.Fatal(err)
	}
	p.inflight <- p.datagrams
	p.datagrams = 0
	p.buf = b[:0]
}

// acks reads the produce responses in order and counts the datagrams of each acknowledged
// request; a response whose partition has an error code is counted and logged.
func (p *producer) acks() {
	r := bufio.NewReaderSize(p.conn, 64<<10)
	var size [4]byte
	var body []byte
	for n := range p.inflight {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			log.Fatal(err)
		}
		body = append(body[:0], make([]byte, binary.BigEndian.Uint32(size[:]))...)
		if _, err := io.ReadFull(r, body); err != nil {
			log.Fatal(err)
		}
		// correlation id, topics (1), name, partitions (1), index, error code
		if len(body) < 10 {
			log.Fatalf("produce response of %d bytes", len(body))
		}
		at := 4 + 4 + 2 + int(binary.BigEndian.Uint16(body[8:])) + 4 + 4
		if len(body) < at+2 {
			log.Fatalf("produce response of %d bytes, its error code at %d", len(body), at)
		}
		if code := binary.BigEndian.Uint16(body[at:]); code != 0 {
			if p.errors.Add(1) <= 10 {
				log.Printf("produce: error code %d", code)
			}
			continue
		}
		p.delivered.Add(n)
	}
}

func be16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func be32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// putVarint3 writes the zigzag varint of v (< 2^20) in exactly three bytes.
func putVarint3(b []byte, v int64) {
	u := uint64(v<<1) ^ uint64(v>>63)
	b[0] = byte(u) | 0x80
	b[1] = byte(u>>7) | 0x80
	b[2] = byte(u >> 14)
}

// crc32Combine returns the CRC32C of A followed by B from their CRCs and B's length (zlib's
// crc32_combine, for the Castagnoli polynomial).
func crc32Combine(crc1, crc2 uint32, len2 int) uint32 {
	if len2 <= 0 {
		return crc1
	}
	var even, odd [32]uint32
	odd[0] = 0x82f63b78 // the operator for one zero bit
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	gf2Square(&even, &odd) // two zero bits
	gf2Square(&odd, &even) // four
	for {
		gf2Square(&even, &odd) // one zero byte, then 4, 16...
		if len2&1 != 0 {
			crc1 = gf2Times(&even, crc1)
		}
		if len2 >>= 1; len2 == 0 {
			break
		}
		gf2Square(&odd, &even)
		if len2&1 != 0 {
			crc1 = gf2Times(&odd, crc1)
		}
		if len2 >>= 1; len2 == 0 {
			break
		}
	}
	return crc1 ^ crc2
}

func gf2Times(mat *[32]uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat *[32]uint32) {
	for n := range mat {
		square[n] = gf2Times(mat, mat[n])
	}
}
