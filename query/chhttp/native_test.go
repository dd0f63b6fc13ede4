package chhttp

import (
	"bytes"
	"testing"

	"github.com/ClickHouse/ch-go/proto"
)

// revision0 is what the engine writes for SELECT revision(), version(), toFixedString('FR', 2):
// columns without block info or custom serialization flags.
var revision0 = []byte("\x03\x01" +
	"\x0arevision()\x06UInt32\xf1\xd4\x00\x00" +
	"\x09version()\x06String\x0826.7.2.1" +
	"\x01c\x0eFixedString(2)FR")

func TestNativeFor(t *testing.T) {
	const version = 54460 // clickhouse-go's protocol revision
	out, err := nativeFor(revision0, version)
	if err != nil {
		t.Fatal(err)
	}
	var b proto.Block
	var (
		rev  proto.ColUInt32
		ver  proto.ColStr
		code = proto.ColFixedStr{Size: 2}
	)
	res := proto.Results{{Name: "revision()", Data: &rev}, {Name: "version()", Data: &ver}, {Name: "c", Data: &code}}
	if err := b.DecodeBlock(proto.NewReader(bytes.NewReader(out)), version, res); err != nil {
		t.Fatal(err)
	}
	if b.Rows != 1 || rev.Row(0) != 54513 || ver.Row(0) != "26.7.2.1" || string(code.Row(0)) != "FR" {
		t.Errorf("decoded %d rows: %d %q %q", b.Rows, rev.Row(0), ver.Row(0), code.Row(0))
	}
	if same, _ := nativeFor(revision0, 0); !bytes.Equal(same, revision0) {
		t.Error("revision 0 changed the output")
	}
	for n := range len(revision0) - 1 {
		if _, err := nativeFor(revision0[:n+1], version); err == nil && n+1 < len(revision0) {
			t.Errorf("truncated at %d: no error", n+1)
		}
	}
}

// FuzzNativeFor checks that no engine output, however broken, panics the rewriting.
func FuzzNativeFor(f *testing.F) {
	f.Add(revision0)
	f.Add([]byte("\x01\x01\x01x\x05UInt8\x07"))
	f.Fuzz(func(t *testing.T, data []byte) {
		nativeFor(data, 54460)
	})
}
