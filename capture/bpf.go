package capture

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// Packet filters without libpcap.
//
// libpcap's compiler needs cgo and libpcap-dev, which flowzero does not require. A filter is
// therefore either raw classic BPF as printed by `tcpdump -ddd EXPR` (a count line, then one
// "code jt jf k" line per instruction; the comma-separated one-line form also works), or an
// expression in a built-in subset of the tcpdump language compiled here:
//
//	expr      = primitive { ["and" | "&&"] primitive }     (juxtaposition means "and")
//	primitive = ["not" | "!"] ( "ip" | "ip6" | "arp" | "tcp" | "udp" | "sctp" | "icmp"
//	          | "icmp6" | "proto" N | [dir] "host" ADDR | [dir] "net" CIDR | [dir] "port" N )
//	dir       = "src" | "dst"
//
// It matches Ethernet frames (AF_PACKET on Ethernet, veth and loopback devices) without VLAN
// tags; IPv6 extension headers are not followed (tcpdump does not either). "or" and
// parentheses are not supported: use tcpdump -ddd for those.

// CompileFilter returns the BPF program for expr ("" gives nil: no filter). Accepted packets
// are truncated to snapLen.
func CompileFilter(expr string, snapLen int) ([]bpf.RawInstruction, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, nil
	}
	if expr[0] >= '0' && expr[0] <= '9' {
		return parseRawBPF(expr)
	}
	return compileExpr(expr, snapLen)
}

// parseRawBPF parses tcpdump -ddd output.
func parseRawBPF(text string) ([]bpf.RawInstruction, error) {
	lines := strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ',' })
	count, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		return nil, fmt.Errorf("raw BPF: instruction count %q: %v", lines[0], err)
	}
	lines = lines[1:]
	if count != len(lines) || count == 0 || count > 4096 /* BPF_MAXINSNS */ {
		return nil, fmt.Errorf("raw BPF: count %d but %d instructions", count, len(lines))
	}
	prog := make([]bpf.RawInstruction, 0, count)
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 4 {
			return nil, fmt.Errorf("raw BPF: instruction %d %q: want \"code jt jf k\"", i+1, l)
		}
		var v [4]uint64
		for j, s := range f {
			bits := []int{16, 8, 8, 32}[j]
			if v[j], err = strconv.ParseUint(s, 10, bits); err != nil {
				return nil, fmt.Errorf("raw BPF: instruction %d %q: %v", i+1, l, err)
			}
		}
		prog = append(prog, bpf.RawInstruction{Op: uint16(v[0]), Jt: uint8(v[1]), Jf: uint8(v[2]), K: uint32(v[3])})
	}
	if err := checkProgram(prog); err != nil {
		return nil, err
	}
	return prog, nil
}

// checkProgram rejects programs the kernel would refuse: jumps out of range, no return.
func checkProgram(prog []bpf.RawInstruction) error {
	ins, ok := bpf.Disassemble(prog)
	if !ok {
		return fmt.Errorf("raw BPF: unknown instruction")
	}
	if _, err := bpf.NewVM(ins); err != nil {
		return fmt.Errorf("raw BPF: %v", err)
	}
	return nil
}

// Ethernet offsets.
const (
	offEtherType = 12
	offIP        = 14
	etherIPv4    = 0x0800
	etherIPv6    = 0x86dd
	etherARP     = 0x0806
)

type label int

// insn is an instruction whose jumps name labels; the assembler turns them into skips.
type insn struct {
	ins         bpf.Instruction
	jump        bool
	cond        bpf.JumpTest
	val         uint32
	ifTrue, ifF label
}

type assembler struct {
	prog   []insn
	labels []int // label → instruction index
}

func (a *assembler) newLabel() label {
	a.labels = append(a.labels, -1)
	return label(len(a.labels) - 1)
}
func (a *assembler) mark(l label)              { a.labels[l] = len(a.prog) }
func (a *assembler) emit(i bpf.Instruction)    { a.prog = append(a.prog, insn{ins: i}) }
func (a *assembler) loadAbs(off uint32, n int) { a.emit(bpf.LoadAbsolute{Off: off, Size: n}) }
func (a *assembler) jeq(v uint32, t, f label) {
	a.prog = append(a.prog, insn{jump: true, cond: bpf.JumpEqual, val: v, ifTrue: t, ifF: f})
}
func (a *assembler) jset(v uint32, t, f label) {
	a.prog = append(a.prog, insn{jump: true, cond: bpf.JumpBitsSet, val: v, ifTrue: t, ifF: f})
}

// ja jumps to l unconditionally (a conditional jump with both branches to l keeps the
// label resolution in one place).
func (a *assembler) ja(l label) {
	a.prog = append(a.prog, insn{jump: true, cond: bpf.JumpEqual, ifTrue: l, ifF: l})
}

func (a *assembler) assemble() ([]bpf.RawInstruction, error) {
	out := make([]bpf.Instruction, len(a.prog))
	for i, in := range a.prog {
		if !in.jump {
			out[i] = in.ins
			continue
		}
		t, f := a.labels[in.ifTrue]-i-1, a.labels[in.ifF]-i-1
		if t < 0 || f < 0 || t > 255 || f > 255 {
			return nil, fmt.Errorf("filter too long for BPF jumps")
		}
		out[i] = bpf.JumpIf{Cond: in.cond, Val: in.val, SkipTrue: uint8(t), SkipFalse: uint8(f)}
	}
	return bpf.Assemble(out)
}

type primitive struct {
	kind string // ip ip6 arp proto host net port
	dir  string // "", src, dst
	not  bool
	// proto: IP protocol numbers (IPv4 and IPv6 alike unless v4only/v6only)
	proto          uint8
	v4only, v6only bool
	prefix         netip.Prefix
	port           uint16
}

func parseExpr(expr string) ([]primitive, error) {
	toks := strings.Fields(strings.ReplaceAll(expr, "!", " ! "))
	var out []primitive
	for i := 0; i < len(toks); {
		tok := toks[i]
		if tok == "and" || tok == "&&" {
			i++
			continue
		}
		if tok == "or" || tok == "||" || strings.ContainsAny(tok, "()") {
			return nil, fmt.Errorf("filter %q: %q is not in the built-in subset (use tcpdump -ddd output)", expr, tok)
		}
		var p primitive
		if tok == "not" || tok == "!" {
			p.not = true
			i++
		}
		if i < len(toks) && (toks[i] == "src" || toks[i] == "dst") {
			p.dir = toks[i]
			i++
		}
		if i >= len(toks) {
			return nil, fmt.Errorf("filter %q: incomplete primitive", expr)
		}
		kind := toks[i]
		i++
		arg := func() (string, error) {
			if i >= len(toks) {
				return "", fmt.Errorf("filter %q: %s needs an argument", expr, kind)
			}
			i++
			return toks[i-1], nil
		}
		if p.dir != "" && kind != "host" && kind != "net" && kind != "port" {
			return nil, fmt.Errorf("filter %q: %s cannot follow %s", expr, kind, p.dir)
		}
		p.kind = "proto"
		switch kind {
		case "ip", "ip6", "arp":
			p.kind = kind
		case "tcp":
			p.proto = 6
		case "udp":
			p.proto = 17
		case "sctp":
			p.proto = 132
		case "icmp":
			p.proto, p.v4only = 1, true
		case "icmp6":
			p.proto, p.v6only = 58, true
		case "proto":
			s, err := arg()
			if err != nil {
				return nil, err
			}
			n, err := strconv.ParseUint(s, 10, 8)
			if err != nil {
				return nil, fmt.Errorf("filter %q: proto %q: %v", expr, s, err)
			}
			p.proto = uint8(n)
		case "host", "net":
			s, err := arg()
			if err != nil {
				return nil, err
			}
			p.kind = kind
			if kind == "host" {
				addr, err := netip.ParseAddr(s)
				if err != nil {
					return nil, fmt.Errorf("filter %q: host %q: %v", expr, s, err)
				}
				p.prefix = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
			} else {
				pfx, err := netip.ParsePrefix(s)
				if err != nil {
					return nil, fmt.Errorf("filter %q: net %q: %v", expr, s, err)
				}
				p.prefix = pfx.Masked()
			}
		case "port":
			s, err := arg()
			if err != nil {
				return nil, err
			}
			n, err := strconv.ParseUint(s, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("filter %q: port %q: %v", expr, s, err)
			}
			p.kind, p.port = "port", uint16(n)
		default:
			return nil, fmt.Errorf("filter %q: %q is not in the built-in subset (use tcpdump -ddd output)", expr, kind)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("filter %q: empty", expr)
	}
	return out, nil
}

func compileExpr(expr string, snapLen int) ([]bpf.RawInstruction, error) {
	prims, err := parseExpr(expr)
	if err != nil {
		return nil, err
	}
	var a assembler
	reject := a.newLabel()
	for _, p := range prims {
		next := a.newLabel()
		if p.not {
			p.gen(&a, reject, next)
		} else {
			p.gen(&a, next, reject)
		}
		a.mark(next)
	}
	a.emit(bpf.RetConstant{Val: uint32(snapLen)})
	a.mark(reject)
	a.emit(bpf.RetConstant{Val: 0})
	return a.assemble()
}

// gen emits code that jumps to pass when the primitive matches and to fail otherwise.
func (p primitive) gen(a *assembler, pass, fail label) {
	a.loadAbs(offEtherType, 2)
	switch p.kind {
	case "ip":
		a.jeq(etherIPv4, pass, fail)
	case "ip6":
		a.jeq(etherIPv6, pass, fail)
	case "arp":
		a.jeq(etherARP, pass, fail)
	case "proto":
		v4, v6 := a.newLabel(), a.newLabel()
		switch {
		case p.v4only:
			a.jeq(etherIPv4, v4, fail)
		case p.v6only:
			a.jeq(etherIPv6, v6, fail)
		default:
			notV4 := a.newLabel()
			a.jeq(etherIPv4, v4, notV4)
			a.mark(notV4)
			a.jeq(etherIPv6, v6, fail)
		}
		a.mark(v4)
		a.loadAbs(offIP+9, 1) // RFC 791 protocol
		a.jeq(uint32(p.proto), pass, fail)
		a.mark(v6)
		a.loadAbs(offIP+6, 1) // RFC 8200 next header
		a.jeq(uint32(p.proto), pass, fail)
	case "host", "net":
		addr := p.prefix.Addr()
		if addr.Is4() {
			ok := a.newLabel()
			a.jeq(etherIPv4, ok, fail)
			a.mark(ok)
			p.genAddrMatch(a, pass, fail, offIP+12, offIP+16)
		} else {
			ok := a.newLabel()
			a.jeq(etherIPv6, ok, fail)
			a.mark(ok)
			p.genAddrMatch(a, pass, fail, offIP+8, offIP+24)
		}
	case "port":
		v4, notV4, v6, ports4, ports6 := a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel()
		a.jeq(etherIPv4, v4, notV4)
		a.mark(notV4)
		a.jeq(etherIPv6, v6, fail)
		a.mark(v4)
		a.loadAbs(offIP+9, 1)
		for _, proto := range []uint32{6, 17, 132} {
			n := a.newLabel()
			a.jeq(proto, ports4, n)
			a.mark(n)
		}
		a.ja(fail)
		a.mark(ports4)
		// Only first fragments carry the ports (RFC 791 fragment offset).
		notFrag := a.newLabel()
		a.loadAbs(offIP+6, 2)
		a.jset(0x1fff, fail, notFrag)
		a.mark(notFrag)
		a.emit(bpf.LoadMemShift{Off: offIP})
		p.genPortMatch(a, pass, fail, func(off uint32) { a.emit(bpf.LoadIndirect{Off: offIP + off, Size: 2}) })
		a.mark(v6)
		a.loadAbs(offIP+6, 1)
		for _, proto := range []uint32{6, 17, 132} {
			n := a.newLabel()
			a.jeq(proto, ports6, n)
			a.mark(n)
		}
		a.ja(fail)
		a.mark(ports6)
		p.genPortMatch(a, pass, fail, func(off uint32) { a.loadAbs(offIP+40+off, 2) })
	}
}

func (p primitive) genPortMatch(a *assembler, pass, fail label, load func(off uint32)) {
	if p.dir != "dst" {
		next := fail
		if p.dir == "" {
			next = a.newLabel()
		}
		load(0)
		a.jeq(uint32(p.port), pass, next)
		if p.dir == "" {
			a.mark(next)
		}
	}
	if p.dir != "src" {
		load(2)
		a.jeq(uint32(p.port), pass, fail)
	}
}

// genAddrMatch compares the source and/or destination address word by word with the prefix.
func (p primitive) genAddrMatch(a *assembler, pass, fail label, srcOff, dstOff uint32) {
	addr := p.prefix.Addr().AsSlice()
	bits := p.prefix.Bits()
	match := func(off uint32, onFail label) {
		for w := 0; w*32 < bits; w++ {
			val := uint32(addr[4*w])<<24 | uint32(addr[4*w+1])<<16 | uint32(addr[4*w+2])<<8 | uint32(addr[4*w+3])
			mask := ^uint32(0)
			if rem := bits - w*32; rem < 32 {
				mask = ^uint32(0) << (32 - rem)
			}
			a.loadAbs(off+uint32(4*w), 4)
			if mask != ^uint32(0) {
				a.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mask})
			}
			next := pass
			if (w+1)*32 < bits {
				next = a.newLabel()
			}
			a.jeq(val&mask, next, onFail)
			if next != pass {
				a.mark(next)
			}
		}
		if bits == 0 {
			a.ja(pass)
		}
	}
	switch p.dir {
	case "src":
		match(srcOff, fail)
	case "dst":
		match(dstOff, fail)
	default:
		tryDst := a.newLabel()
		match(srcOff, tryDst)
		a.mark(tryDst)
		match(dstOff, fail)
	}
}
