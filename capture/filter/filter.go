// Package filter compiles the packet filters of live capture into classic BPF without libpcap
// (which needs cgo and libpcap-dev): tcpdump -ddd output, or an expression in a subset of the
// tcpdump language compiled for the interface's link type.
package filter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"
)

// Compile returns the BPF program for expr on an interface of the given link type (Ethernet
// or raw IP); "" gives nil: no filter. Accepted packets are truncated to snapLen.
//
// expr is either raw classic BPF as printed by `tcpdump -ddd EXPR` (a count line, then one
// "code jt jf k" line per instruction; the comma-separated one-line form also works), returned
// as is since tcpdump compiled it for one link type, or an expression in this subset of the
// tcpdump language:
//
//	expr      = not { ("or" | "||" | ["and" | "&&"]) not }   (juxtaposition means "and")
//	not       = ("not" | "!") not | "(" expr ")" | primitive
//	primitive = "ip" | "ip6" | "arp" | "tcp" | "udp" | "sctp" | "icmp" | "icmp6" | "proto" N
//	          | [dir] "host" ADDR | [dir] "net" CIDR | [dir] "port" N
//	dir       = "src" | "dst"
//
// As in tcpdump (pcap-filter(7)), "not" binds tightest while "and" and "or" have equal
// precedence and associate left to right: "tcp or udp and port 53" is "(tcp or udp) and port
// 53". On Ethernet (AF_PACKET on Ethernet, veth and loopback devices) frames are matched
// without VLAN tags; on raw IP (tun, wireguard) the version nibble tells IPv4 from IPv6 and
// "arp" never matches. IPv6 extension headers are not followed (tcpdump does not either).
func Compile(expr string, snapLen int, link layers.LinkType) ([]bpf.RawInstruction, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, nil
	}
	if isRawBPF(expr) {
		return parseRawBPF(expr)
	}
	l, err := linkLayerOf(link)
	if err != nil {
		return nil, err
	}
	return compileExpr(expr, snapLen, l)
}

// isRawBPF tells tcpdump -ddd output (it starts with the instruction count) from an expression.
func isRawBPF(expr string) bool { return expr != "" && expr[0] >= '0' && expr[0] <= '9' }

// ForInterfaces returns the program for each interface, given its link type: the expression
// compiled for that link type, or nil when expr is empty. tcpdump -ddd output is refused when
// the interfaces do not all have the same link type, since it fits only one. Errors name the
// interface.
func ForInterfaces(expr string, snapLen int, names []string, links []layers.LinkType) ([][]bpf.RawInstruction, error) {
	progs := make([][]bpf.RawInstruction, len(names))
	for i, name := range names {
		if isRawBPF(strings.TrimSpace(expr)) && links[i] != links[0] {
			return nil, fmt.Errorf("tcpdump -ddd output fits one link type, but %s is %s and %s is %s: "+
				"use a built-in expression or one agent per link type", names[0], links[0], name, links[i])
		}
		prog, err := Compile(expr, snapLen, links[i])
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", name, err)
		}
		progs[i] = prog
	}
	return progs, nil
}

// parseRawBPF parses tcpdump -ddd output and refuses what the kernel would refuse.
func parseRawBPF(text string) ([]bpf.RawInstruction, error) {
	prog, err := readRawBPF(text)
	if err != nil {
		return nil, err
	}
	if err := checkProgram(prog); err != nil {
		return nil, err
	}
	return prog, nil
}

// readRawBPF reads the instructions of tcpdump -ddd output, unchecked.
func readRawBPF(text string) ([]bpf.RawInstruction, error) {
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
	return prog, nil
}

// portProtocols are the IP protocols whose headers start with source and destination ports:
// TCP, UDP and SCTP.
var portProtocols = []uint32{6, 17, 132}

// linkLayer says where the IP header starts and how the link tells IPv4 from IPv6.
type linkLayer struct {
	raw   bool   // raw IP: the version nibble (RFC 791, RFC 8200) gives the protocol
	ipOff uint32 // offset of the IP header
}

// Ethernet II (IEEE 802.3) ethertypes, at offset 12.
const (
	offEtherType = 12
	etherIPv4    = 0x0800
	etherIPv6    = 0x86dd
	etherARP     = 0x0806
)

func linkLayerOf(link layers.LinkType) (linkLayer, error) {
	switch link {
	case layers.LinkTypeEthernet:
		return linkLayer{ipOff: 14}, nil
	case layers.LinkTypeRaw:
		return linkLayer{raw: true}, nil
	}
	return linkLayer{}, fmt.Errorf("link type %s: the built-in filter knows Ethernet and raw IP only (use tcpdump -ddd output)", link)
}

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

// jeqAny jumps to match when A is one of vals, to fail otherwise.
func (a *assembler) jeqAny(vals []uint32, match, fail label) {
	for _, v := range vals {
		next := a.newLabel()
		a.jeq(v, match, next)
		a.mark(next)
	}
	a.ja(fail)
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

// filterNode is a node of a parsed expression: "and", "or" (left and right), "not" (left) or,
// when op is "", a primitive.
type filterNode struct {
	op          string
	left, right *filterNode
	prim        primitive
}

type primitive struct {
	kind string // ip ip6 arp proto host net port
	dir  string // "", src, dst
	// proto: IP protocol numbers (IPv4 and IPv6 alike unless v4only/v6only)
	proto          uint8
	v4only, v6only bool
	prefix         netip.Prefix
	port           uint16
}

// filterParser is a recursive-descent parser over the expression's tokens.
type filterParser struct {
	expr string
	toks []string
	i    int
}

func (p *filterParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *filterParser) next() string {
	tok := p.peek()
	if tok != "" {
		p.i++
	}
	return tok
}

func (p *filterParser) errorf(format string, args ...any) error {
	return fmt.Errorf("filter %q: %s", p.expr, fmt.Sprintf(format, args...))
}

func parseExpr(expr string) (*filterNode, error) {
	spaced := expr
	for _, op := range []string{"(", ")", "&&", "||", "!"} {
		spaced = strings.ReplaceAll(spaced, op, " "+op+" ")
	}
	p := &filterParser{expr: expr, toks: strings.Fields(spaced)}
	if len(p.toks) == 0 {
		return nil, p.errorf("empty")
	}
	n, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if tok := p.peek(); tok != "" {
		return nil, p.errorf("unexpected %q", tok)
	}
	return n, nil
}

// parseExpr parses nots joined by "and" and "or", which tcpdump gives equal precedence,
// left to right.
func (p *filterParser) parseExpr() (*filterNode, error) {
	left, err := p.parseNot()
	for err == nil {
		op := "and" // juxtaposition
		switch p.peek() {
		case "", ")":
			return left, nil
		case "or", "||":
			op = "or"
			p.next()
		case "and", "&&":
			p.next()
		}
		var right *filterNode
		if right, err = p.parseNot(); err == nil {
			left = &filterNode{op: op, left: left, right: right}
		}
	}
	return left, err
}

func (p *filterParser) parseNot() (*filterNode, error) {
	switch p.peek() {
	case "not", "!":
		p.next()
		n, err := p.parseNot()
		return &filterNode{op: "not", left: n}, err
	case "(":
		p.next()
		n, err := p.parseExpr()
		if err == nil && p.next() != ")" {
			err = p.errorf("missing )")
		}
		return n, err
	}
	prim, err := p.parsePrimitive()
	return &filterNode{prim: prim}, err
}

func (p *filterParser) parsePrimitive() (primitive, error) {
	var prim primitive
	if tok := p.peek(); tok == "src" || tok == "dst" {
		prim.dir = p.next()
	}
	kind := p.next()
	switch kind {
	case "":
		return prim, p.errorf("incomplete expression")
	case "and", "&&", "or", "||", ")":
		return prim, p.errorf("unexpected %q", kind)
	}
	arg := func() (string, error) {
		switch tok := p.next(); tok {
		case "", "(", ")", "!", "&&", "||", "and", "or", "not":
			return "", p.errorf("%s needs an argument", kind)
		default:
			return tok, nil
		}
	}
	if prim.dir != "" && kind != "host" && kind != "net" && kind != "port" {
		return prim, p.errorf("%s cannot follow %s", kind, prim.dir)
	}
	prim.kind = "proto"
	switch kind {
	case "ip", "ip6", "arp":
		prim.kind = kind
	case "tcp":
		prim.proto = 6
	case "udp":
		prim.proto = 17
	case "sctp":
		prim.proto = 132
	case "icmp":
		prim.proto, prim.v4only = 1, true
	case "icmp6":
		prim.proto, prim.v6only = 58, true
	case "proto":
		s, err := arg()
		if err != nil {
			return prim, err
		}
		n, err := strconv.ParseUint(s, 10, 8)
		if err != nil {
			return prim, p.errorf("proto %q: %v", s, err)
		}
		prim.proto = uint8(n)
	case "host", "net":
		s, err := arg()
		if err != nil {
			return prim, err
		}
		prim.kind = kind
		if kind == "host" {
			addr, err := netip.ParseAddr(s)
			if err != nil {
				return prim, p.errorf("host %q: %v", s, err)
			}
			prim.prefix = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		} else {
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				return prim, p.errorf("net %q: %v", s, err)
			}
			prim.prefix = pfx.Masked()
		}
	case "port":
		s, err := arg()
		if err != nil {
			return prim, err
		}
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return prim, p.errorf("port %q: %v", s, err)
		}
		prim.kind, prim.port = "port", uint16(n)
	default:
		return prim, p.errorf("%q is not in the built-in subset (use tcpdump -ddd output)", kind)
	}
	return prim, nil
}

func compileExpr(expr string, snapLen int, link linkLayer) ([]bpf.RawInstruction, error) {
	root, err := parseExpr(expr)
	if err != nil {
		return nil, err
	}
	var a assembler
	accept, reject := a.newLabel(), a.newLabel()
	root.gen(&a, link, accept, reject)
	a.mark(accept)
	a.emit(bpf.RetConstant{Val: uint32(snapLen)})
	a.mark(reject)
	a.emit(bpf.RetConstant{Val: 0})
	prog, err := a.assemble()
	if err != nil {
		return nil, fmt.Errorf("filter %q: %v", expr, err)
	}
	return prog, nil
}

// gen emits code that jumps to pass when the node matches and to fail otherwise: the
// operators only route the labels, so "a or b" tries b where a fails.
func (n *filterNode) gen(a *assembler, link linkLayer, pass, fail label) {
	switch n.op {
	case "not":
		n.left.gen(a, link, fail, pass)
	case "and":
		mid := a.newLabel()
		n.left.gen(a, link, mid, fail)
		a.mark(mid)
		n.right.gen(a, link, pass, fail)
	case "or":
		mid := a.newLabel()
		n.left.gen(a, link, pass, mid)
		a.mark(mid)
		n.right.gen(a, link, pass, fail)
	default:
		n.prim.gen(a, link, pass, fail)
	}
}

// ipVersion jumps to v4 for IPv4 packets, v6 for IPv6 ones and other for the rest: by
// ethertype on Ethernet, by the version nibble on raw IP.
func (a *assembler) ipVersion(link linkLayer, v4, v6, other label) {
	four, six := uint32(etherIPv4), uint32(etherIPv6)
	if link.raw {
		a.loadAbs(0, 1)
		a.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf0})
		four, six = 0x40, 0x60
	} else {
		a.loadAbs(offEtherType, 2)
	}
	switch {
	case v6 == other:
		a.jeq(four, v4, other)
	case v4 == other:
		a.jeq(six, v6, other)
	default:
		notV4 := a.newLabel()
		a.jeq(four, v4, notV4)
		a.mark(notV4)
		a.jeq(six, v6, other)
	}
}

// gen emits code that jumps to pass when the primitive matches and to fail otherwise.
func (p primitive) gen(a *assembler, link linkLayer, pass, fail label) {
	offIP := link.ipOff
	switch p.kind {
	case "ip":
		a.ipVersion(link, pass, fail, fail)
	case "ip6":
		a.ipVersion(link, fail, pass, fail)
	case "arp":
		if link.raw {
			a.ja(fail) // raw IP links carry no ARP (libpcap compiles it to false too)
			return
		}
		a.loadAbs(offEtherType, 2)
		a.jeq(etherARP, pass, fail)
	case "proto":
		v4, v6 := a.newLabel(), a.newLabel()
		switch {
		case p.v4only:
			a.ipVersion(link, v4, fail, fail)
		case p.v6only:
			a.ipVersion(link, fail, v6, fail)
		default:
			a.ipVersion(link, v4, v6, fail)
		}
		a.mark(v4)
		a.loadAbs(offIP+9, 1) // RFC 791 protocol
		a.jeq(uint32(p.proto), pass, fail)
		a.mark(v6)
		a.loadAbs(offIP+6, 1) // RFC 8200 next header
		a.jeq(uint32(p.proto), pass, fail)
	case "host", "net":
		ok := a.newLabel()
		if p.prefix.Addr().Is4() {
			a.ipVersion(link, ok, fail, fail)
			a.mark(ok)
			p.genAddrMatch(a, pass, fail, offIP+12, offIP+16)
		} else {
			a.ipVersion(link, fail, ok, fail)
			a.mark(ok)
			p.genAddrMatch(a, pass, fail, offIP+8, offIP+24)
		}
	case "port":
		v4, v6, ports4, ports6 := a.newLabel(), a.newLabel(), a.newLabel(), a.newLabel()
		a.ipVersion(link, v4, v6, fail)
		a.mark(v4)
		a.loadAbs(offIP+9, 1)
		a.jeqAny(portProtocols, ports4, fail)
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
		a.jeqAny(portProtocols, ports6, fail)
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
