package wire

import (
	"bytes"
	"testing"
)

// helloSeeds are well-formed Hellos like the agents send (names as in the README's examples,
// with and without a token) and cut or damaged variants of them.
func helloSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	for _, h := range []Hello{
		{Version: Version, Capabilities: CapZstd, AgentID: 0x0123456789abcdef, AgentName: "probe-1", Token: "s3cret"},
		{Version: Version, AgentID: 1, AgentName: "edge-router-paris.example.net"},
		{Version: 2, Capabilities: 0xffff, AgentID: ^uint64(0), AgentName: string(bytes.Repeat([]byte{'a'}, MaxNameLen)), Token: string(bytes.Repeat([]byte{'t'}, MaxTokenLen))},
	} {
		b, err := AppendHello(nil, &h)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b, b[:HelloFixedLen], b[:len(b)-1], append(bytes.Clone(b), "next frame"...))
	}
	return seeds
}

// FuzzCaptureWireHello feeds arbitrary bytes to the Hello parsers, which the server runs before
// authenticating the peer. A Hello that parses re-encodes to exactly the bytes it was parsed
// from; ReadHello reads exactly those bytes and no more, and agrees with ParseHello.
func FuzzCaptureWireHello(f *testing.F) {
	for _, s := range helloSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHello(data)
		r := bytes.NewReader(data)
		rh, rerr := ReadHello(r)
		consumed := len(data) - r.Len()
		if (err == nil) != (rerr == nil) {
			t.Fatalf("ParseHello: %v, ReadHello: %v", err, rerr)
		}
		if err != nil {
			if consumed > HelloFixedLen+MaxNameLen+MaxTokenLen {
				t.Fatalf("ReadHello read %d bytes of a bad hello", consumed)
			}
			return
		}
		if rh != h {
			t.Fatalf("ReadHello %+v, ParseHello %+v", rh, h)
		}
		n := HelloFixedLen + len(h.AgentName) + len(h.Token)
		if consumed != n {
			t.Fatalf("ReadHello read %d bytes of a %d-byte hello", consumed, n)
		}
		if len(h.AgentName) == 0 || len(h.AgentName) > MaxNameLen || len(h.Token) > MaxTokenLen {
			t.Fatalf("out-of-bounds hello accepted: name %d bytes, token %d bytes", len(h.AgentName), len(h.Token))
		}
		enc, err := AppendHello(nil, &h)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", h, err)
		}
		if !bytes.Equal(enc, data[:n]) {
			t.Fatalf("re-encoded % x, parsed from % x", enc, data[:n])
		}
		again, err := ParseHello(enc)
		if err != nil || again != h {
			t.Fatalf("re-parsed %+v %v, want %+v", again, err, h)
		}
	})
}

// FuzzCaptureWireWelcome feeds arbitrary bytes to the agent's Welcome parser: a Welcome that
// parses re-encodes to the bytes it was parsed from (but the reserved field, written as 0)
// and parses again to the same value.
func FuzzCaptureWireWelcome(f *testing.F) {
	for _, w := range []Welcome{
		{Version: Version, Status: StatusOK, Capabilities: CapZstd, LastSeq: 42},
		{Version: Version, Status: StatusBusy},
		{Version: 7, Status: 99, Capabilities: 0xffff, LastSeq: ^uint64(0)},
	} {
		b := AppendWelcome(nil, &w)
		f.Add(b)
		f.Add(b[:WelcomeLen-1])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWelcome(data)
		if err != nil {
			if len(data) >= WelcomeLen && [4]byte(data[:4]) == welcomeMagic {
				t.Fatalf("whole welcome refused: %v", err)
			}
			return
		}
		enc := AppendWelcome(nil, &w)
		want := bytes.Clone(data[:WelcomeLen])
		want[10], want[11] = 0, 0
		if !bytes.Equal(enc, want) {
			t.Fatalf("re-encoded % x, parsed from % x", enc, data[:WelcomeLen])
		}
		if again, err := ParseWelcome(enc); err != nil || again != w {
			t.Fatalf("re-parsed %+v %v, want %+v", again, err, w)
		}
	})
}
