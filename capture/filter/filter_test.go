package filter

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"flowzero/capture/internal/capturetest"
)

// runFilter compiles expr for a link type and runs it in x/net/bpf's VM over packets (nil
// ones are skipped), returning which were accepted.
func runFilter(t *testing.T, expr string, link layers.LinkType, packets [][]byte) []bool {
	t.Helper()
	raw, err := Compile(expr, 1500, link)
	if err != nil {
		t.Fatal(err)
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("disassemble")
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make([]bool, len(packets))
	for i, data := range packets {
		if data == nil {
			continue
		}
		n, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 && n != 1500 {
			t.Fatalf("accepted %d bytes of %d", n, len(data))
		}
		accepted[i] = n > 0
	}
	return accepted
}

// TestCompileFilter runs the built-in compiler's programs in x/net/bpf's VM over every real
// frame and compares with what gopacket decodes; the program compiled for raw IP must accept
// the same packets once their Ethernet header is stripped.
func TestCompile(t *testing.T) {
	frames, rawFrames, facts := capturetest.FilterFrames(t)
	// Addresses and ports taken from the captures.
	var v4, v6 netip.Addr
	var v4dst netip.Addr
	var udpPort, udpSrc, tcpPort uint16
	for _, f := range facts {
		if !v4dst.IsValid() && f.Dst.Is4() {
			v4dst = f.Dst
		}
		if udpSrc == 0 && f.HasPorts && f.Proto == 17 {
			udpSrc = f.SrcPort
		}
		if !v4.IsValid() && f.Src.Is4() {
			v4 = f.Src
		}
		if !v6.IsValid() && f.Src.Is6() {
			v6 = f.Dst
		}
		if udpPort == 0 && f.HasPorts && f.Proto == 17 {
			udpPort = f.DstPort
		}
		if tcpPort == 0 && f.HasPorts && f.Proto == 6 {
			tcpPort = f.DstPort
		}
	}
	v4net := netip.PrefixFrom(v4, 16).Masked()
	v6net := netip.PrefixFrom(v6, 48).Masked()
	inNet := func(p netip.Prefix, a netip.Addr) bool { return a.IsValid() && p.Contains(a) }
	isIP := func(f capturetest.FrameFacts) bool {
		return f.EtherType == layers.EthernetTypeIPv4 || f.EtherType == layers.EthernetTypeIPv6
	}
	isTCP := func(f capturetest.FrameFacts) bool { return isIP(f) && f.Proto == 6 }
	isUDP := func(f capturetest.FrameFacts) bool { return isIP(f) && f.Proto == 17 }
	hasPort := func(f capturetest.FrameFacts, port uint16) bool {
		return f.HasPorts && (f.SrcPort == port || f.DstPort == port)
	}
	cases := []struct {
		expr string
		want func(f capturetest.FrameFacts) bool
	}{
		{"ip", func(f capturetest.FrameFacts) bool { return f.EtherType == layers.EthernetTypeIPv4 }},
		{"ip6", func(f capturetest.FrameFacts) bool { return f.EtherType == layers.EthernetTypeIPv6 }},
		{"tcp", isTCP},
		{"udp", isUDP},
		{"not udp", func(f capturetest.FrameFacts) bool { return !isUDP(f) }},
		{"proto 4", func(f capturetest.FrameFacts) bool { return isIP(f) && f.Proto == 4 }},
		{"proto 47", func(f capturetest.FrameFacts) bool { return isIP(f) && f.Proto == 47 }},
		{fmt.Sprintf("udp port %d", udpPort), func(f capturetest.FrameFacts) bool { return f.Proto == 17 && hasPort(f, udpPort) }},
		{fmt.Sprintf("udp and dst port %d", udpPort), func(f capturetest.FrameFacts) bool { return f.Proto == 17 && f.HasPorts && f.DstPort == udpPort }},
		{fmt.Sprintf("src port %d", udpSrc), func(f capturetest.FrameFacts) bool { return f.HasPorts && f.SrcPort == udpSrc }},
		{fmt.Sprintf("tcp port %d", tcpPort), func(f capturetest.FrameFacts) bool { return f.Proto == 6 && hasPort(f, tcpPort) }},
		{"host " + v4.String(), func(f capturetest.FrameFacts) bool { return f.Src == v4 || f.Dst == v4 }},
		{"src host " + v4.String(), func(f capturetest.FrameFacts) bool { return f.Src == v4 }},
		{"! dst host " + v4dst.String(), func(f capturetest.FrameFacts) bool { return f.Dst != v4dst }},
		{"net " + v4net.String(), func(f capturetest.FrameFacts) bool { return inNet(v4net, f.Src) || inNet(v4net, f.Dst) }},
		{"host " + v6.String(), func(f capturetest.FrameFacts) bool { return f.Src == v6 || f.Dst == v6 }},
		{"dst net " + v6net.String(), func(f capturetest.FrameFacts) bool { return inNet(v6net, f.Dst) }},
		{"ip && not tcp", func(f capturetest.FrameFacts) bool { return f.EtherType == layers.EthernetTypeIPv4 && f.Proto != 6 }},
		// or, parentheses and precedence: not first, then and and or alike, left to right.
		{"host " + v4.String() + " or host " + v6.String(), func(f capturetest.FrameFacts) bool {
			return f.Src == v4 || f.Dst == v4 || f.Src == v6 || f.Dst == v6
		}},
		{fmt.Sprintf("not port %d", tcpPort), func(f capturetest.FrameFacts) bool { return !hasPort(f, tcpPort) }},
		{fmt.Sprintf("(tcp or udp) and (port %d or port %d)", tcpPort, udpPort), func(f capturetest.FrameFacts) bool {
			return (isTCP(f) || isUDP(f)) && (hasPort(f, tcpPort) || hasPort(f, udpPort))
		}},
		{fmt.Sprintf("tcp or udp and port %d", udpPort), func(f capturetest.FrameFacts) bool { return (isTCP(f) || isUDP(f)) && hasPort(f, udpPort) }},
		{fmt.Sprintf("port %d and tcp or udp", tcpPort), func(f capturetest.FrameFacts) bool { return hasPort(f, tcpPort) && isTCP(f) || isUDP(f) }},
		{fmt.Sprintf("udp or not tcp and port %d", udpPort), func(f capturetest.FrameFacts) bool { return (isUDP(f) || !isTCP(f)) && hasPort(f, udpPort) }},
		{fmt.Sprintf("udp and port %d or tcp", udpPort), func(f capturetest.FrameFacts) bool { return isUDP(f) && hasPort(f, udpPort) || isTCP(f) }},
		{fmt.Sprintf("(tcp or udp) and port %d", udpPort), func(f capturetest.FrameFacts) bool { return (isTCP(f) || isUDP(f)) && hasPort(f, udpPort) }},
		{"not tcp and not udp", func(f capturetest.FrameFacts) bool { return !isTCP(f) && !isUDP(f) }},
		{"ip and !(tcp||udp)", func(f capturetest.FrameFacts) bool {
			return f.EtherType == layers.EthernetTypeIPv4 && !isTCP(f) && !isUDP(f)
		}},
		{"not (ip6 or (ip and udp))", func(f capturetest.FrameFacts) bool {
			return f.EtherType != layers.EthernetTypeIPv6 && !(f.EtherType == layers.EthernetTypeIPv4 && isUDP(f))
		}},
		{"ip6 or arp", func(f capturetest.FrameFacts) bool {
			return f.EtherType == layers.EthernetTypeIPv6 || f.EtherType == layers.EthernetTypeARP
		}},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			onEth := runFilter(t, tc.expr, layers.LinkTypeEthernet, frames)
			onRaw := runFilter(t, tc.expr, layers.LinkTypeRaw, rawFrames)
			matched, matchedRaw, raws := 0, 0, 0
			for i := range frames {
				if want := tc.want(facts[i]); onEth[i] != want {
					t.Fatalf("frame %d (%+v): filter says %v, gopacket %v", i, facts[i], onEth[i], want)
				}
				if onEth[i] {
					matched++
				}
				if rawFrames[i] == nil {
					continue
				}
				raws++
				if onRaw[i] != onEth[i] {
					t.Fatalf("frame %d (%+v): the filter says %v on Ethernet, %v on raw IP", i, facts[i], onEth[i], onRaw[i])
				}
				if onRaw[i] {
					matchedRaw++
				}
			}
			// Each case must separate the packets on both link types (all or nothing proves nothing).
			if matched == 0 || matched == len(frames) && tc.expr != "not udp" || matchedRaw == 0 || matchedRaw == raws {
				t.Fatalf("%d of %d frames matched, %d of %d raw IP packets: the case does not discriminate", matched, len(frames), matchedRaw, raws)
			}
		})
	}
}

// TestInterfaceFilters checks the per-interface programs: an expression is compiled for each
// link type, tcpdump -ddd output (compiled for one link type) is refused across link types
// with an error naming the key and the interfaces.
func TestForInterfaces(t *testing.T) {
	names := []string{"eth0", "wg0"}
	links := []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeRaw}
	progs, err := ForInterfaces("udp", 128, names, links)
	if err != nil {
		t.Fatal(err)
	}
	for i, link := range links {
		if want, _ := Compile("udp", 128, link); !slices.Equal(progs[i], want) {
			t.Errorf("%s: not the program for %s", names[i], link)
		}
	}
	if slices.Equal(progs[0], progs[1]) {
		t.Error("the same program for Ethernet and raw IP")
	}
	if progs, err := ForInterfaces("", 128, names, links); err != nil || progs[0] != nil || progs[1] != nil {
		t.Errorf("no filter: %v, %v", progs, err)
	}
	ddd := "4\n40 0 0 12\n21 0 1 2048\n6 0 0 128\n6 0 0 0\n"
	if _, err := ForInterfaces(ddd, 128, names[:1], links[:1]); err != nil {
		t.Errorf("tcpdump -ddd on one Ethernet interface: %v", err)
	}
	_, err = ForInterfaces(ddd, 128, names, links)
	if err == nil || !strings.Contains(err.Error(), "eth0") || !strings.Contains(err.Error(), "wg0") {
		t.Errorf("tcpdump -ddd across link types: %v", err)
	}
	_, err = ForInterfaces("udp", 128, []string{"sit0"}, []layers.LinkType{layers.LinkTypeLinuxSLL})
	if err == nil || !strings.Contains(err.Error(), "sit0") {
		t.Errorf("unknown link type: %v", err)
	}
}

func TestRawFilter(t *testing.T) {
	prog, err := Compile("udp port 53", 262144, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	var ddd strings.Builder
	fmt.Fprintf(&ddd, "%d\n", len(prog))
	for _, in := range prog {
		fmt.Fprintf(&ddd, "%d %d %d %d\n", in.Op, in.Jt, in.Jf, in.K)
	}
	for _, text := range []string{ddd.String(), strings.ReplaceAll(strings.TrimSpace(ddd.String()), "\n", ",")} {
		got, err := Compile(text, 0, layers.LinkTypeEthernet)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, prog) {
			t.Fatalf("raw program differs")
		}
	}
	for bad, msg := range map[string]string{
		"2\n6 0 0 0\n": "count 2 but 1", "1\n21 5 0 2048\n": "raw BPF", "1\n6 0 0\n": "code jt jf k",
		"1\n99999 0 0 0\n": "value out of range", "port": "port needs an argument", "port 70000": "port \"70000\"",
		"host 1.2.3": "host \"1.2.3\"", "src tcp": "tcp cannot follow src", "frobnicate": `"frobnicate" is not in the built-in subset`,
		"tcp or": "incomplete expression", "or tcp": `unexpected "or"`, "(tcp or udp": "missing )", "tcp)": `unexpected ")"`,
		"()": `unexpected ")"`, "tcp and": "incomplete expression", "not": "incomplete expression",
		"host 192.0.2.1 or 192.0.2.2": `"192.0.2.2" is not in the built-in subset`, "port (": "port needs an argument",
		"vlan and tcp": `"vlan" is not in the built-in subset`,
	} {
		if _, err := Compile(bad, 1500, layers.LinkTypeEthernet); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want one saying %q", bad, err, msg)
		}
	}
}

// kernelCheck attaches prog to a UDP socket, so that the kernel's classic BPF check
// (bpf_check_classic) says whether it accepts it.
func kernelCheck(t *testing.T, prog []bpf.RawInstruction) error {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	filter := make([]unix.SockFilter, len(prog))
	for i, ins := range prog {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter))}
	if len(filter) > 0 {
		fprog.Filter = &filter[0]
	}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog)
}

// vmRuns tells whether x/net/bpf's VM can run ins: it has no negation and knows only the
// packet length among the ancillary loads.
func vmRuns(ins []bpf.Instruction) bool {
	for _, i := range ins {
		switch i := i.(type) {
		case bpf.NegateA:
			return false
		case bpf.LoadExtension:
			if i.Num != bpf.ExtLen {
				return false
			}
		}
	}
	return true
}

func TestCheckProgram(t *testing.T) {
	for text, want := range map[string]string{
		"1\n6 0 0 262144":                 "",
		"3\n0 0 0 2\n132 0 0 0\n22 0 0 0": "", // ld #2; neg; ret a
		"3\n0 0 0 2\n140 0 0 0\n22 0 0 0": "instruction 2 (140 0 0 0): not an instruction the kernel accepts",
		"1\n14 0 0 0":                     "instruction 1 (14 0 0 0): not an instruction",
		"6\n48 0 0 4294963248\n21 2 0 1\n40 0 0 12\n21 0 1 33024\n6 0 0 262144\n6 0 0 0": "", // vlan
		"2\n48 0 0 4294963264\n6 0 0 0":                    "instruction 1 (48 0 0 4294963264): unknown ancillary load",
		"2\n48 0 0 4294963249\n6 0 0 0":                    "unknown ancillary load",
		"2\n48 0 0 4293918720\n6 0 0 0":                    "", // SKF_NET_OFF
		"2\n52 0 0 0\n6 0 0 0":                             "divides by zero",
		"2\n148 0 0 0\n6 0 0 0":                            "divides by zero",
		"2\n100 0 0 32\n6 0 0 0":                           "shifts by 32 or more",
		"2\n2 0 0 16\n6 0 0 0":                             "scratch cell 16 out of 0..15",
		"2\n5 0 0 1\n6 0 0 0":                              "jumps past the end",
		"2\n21 1 0 0\n6 0 0 0":                             "jumps past the end",
		"1\n0 0 0 0":                                       "instruction 1: the last instruction must be a return",
		"2\n96 0 0 3\n22 0 0 0":                            "instruction 1 reads scratch cell 3",
		"3\n2 0 0 3\n96 0 0 3\n22 0 0 0":                   "",
		"5\n21 0 1 0\n2 0 0 3\n96 0 0 3\n6 0 0 1\n6 0 0 0": "instruction 3 reads scratch cell 3",
		"4\n5 0 0 1\n2 0 0 3\n96 0 0 3\n22 0 0 0":          "instruction 3 reads scratch cell 3",
	} {
		prog, err := readRawBPF(text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		err = checkProgram(prog)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
		if kerr := kernelCheck(t, prog); (kerr == nil) != (err == nil) {
			t.Errorf("%q: the kernel says %v, checkProgram %v", text, kerr, err)
		}
	}
}

// FuzzCompile checks that any filter text gives an error or a program the kernel accepts,
// that checkProgram agrees with the kernel on every raw program, and that the programs run
// over IPv4 and IPv6 packets on both link types in x/net/bpf's VM.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{"udp port 2055", "not (ip6 or (ip and udp))", "host 192.0.2.1 or host 2001:db8::1",
		"src net 10.0.0.0/8 && !tcp || arp", "(tcp or", "1\n21 5 0 2048\n", "4\n40 0 0 12\n21 0 1 2048\n6 0 0 128\n6 0 0 0\n",
		"proto 47 and dst port 53", "3\n2 0 0 3\n96 0 0 3\n22 0 0 0", "3\n0 0 0 2\n132 0 0 0\n22 0 0 0"} {
		f.Add(seed)
	}
	v4 := []byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0x30, 0x39, 0x08, 0x07, 0, 8, 0, 0}
	v6 := append([]byte{0x60, 0, 0, 0, 0, 8, 17, 64}, make([]byte, 40)...)
	ether := func(etherType uint16, ip []byte) []byte {
		return append(append(make([]byte, 12), byte(etherType>>8), byte(etherType)), ip...)
	}
	packets := map[layers.LinkType][][]byte{
		layers.LinkTypeEthernet: {ether(0x0800, v4), ether(0x86dd, v6), ether(0x0806, nil)},
		layers.LinkTypeRaw:      {v4, v6, v4[:3]},
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if text := strings.TrimSpace(expr); isRawBPF(text) {
			if prog, err := readRawBPF(text); err == nil {
				cerr, kerr := checkProgram(prog), kernelCheck(t, prog)
				if (cerr == nil) != (kerr == nil) {
					t.Fatalf("%q: the kernel says %v, checkProgram %v", expr, kerr, cerr)
				}
			}
		}
		for link, pkts := range packets {
			prog, err := Compile(expr, 1500, link)
			if err != nil || prog == nil {
				continue
			}
			if err := kernelCheck(t, prog); err != nil {
				t.Fatalf("%q on %s: the kernel refuses it: %v", expr, link, err)
			}
			ins, ok := bpf.Disassemble(prog)
			if !ok {
				t.Fatalf("%q on %s: undecodable program", expr, link)
			}
			if !vmRuns(ins) {
				continue
			}
			vm, err := bpf.NewVM(ins)
			if err != nil {
				t.Fatalf("%q on %s: %v", expr, link, err)
			}
			for _, p := range pkts {
				if _, err := vm.Run(p); err != nil {
					t.Fatalf("%q on %s: %v", expr, link, err)
				}
			}
		}
	})
}
