package filter

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// Classic BPF opcode fields (linux/bpf_common.h, linux/filter.h).
const (
	bpfLD, bpfLDX, bpfST, bpfSTX, bpfALU, bpfJMP, bpfRET, bpfMISC = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
	bpfW, bpfH, bpfB                                              = 0x00, 0x08, 0x10
	bpfIMM, bpfABS, bpfIND, bpfMEM, bpfLEN, bpfMSH                = 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0
	bpfADD, bpfSUB, bpfMUL, bpfDIV, bpfOR, bpfAND, bpfLSH, bpfRSH = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70
	bpfNEG, bpfMOD, bpfXOR                                        = 0x80, 0x90, 0xa0
	bpfJA, bpfJEQ, bpfJGT, bpfJGE, bpfJSET                        = 0x00, 0x10, 0x20, 0x30, 0x40
	bpfK, bpfX, bpfA                                              = 0x00, 0x08, 0x10
	bpfTAX, bpfTXA                                                = 0x00, 0x80

	bpfMemWords = 16         // BPF_MEMWORDS: scratch memory cells
	bpfMaxInsns = 4096       // BPF_MAXINSNS
	skfAdOff    = 0xfffff000 // SKF_AD_OFF: loads at and above it read ancillary data
	skfAdMax    = 64         // SKF_AD_MAX: end of the known ancillary offsets (SKF_AD_VLAN_TPID is 60)
)

// kernelCodes are the opcodes the kernel's classic BPF check accepts (codes[] in
// net/core/filter.c); any other value, even one x/net/bpf decodes, is refused with EINVAL.
var kernelCodes = func() (ok [256]bool) {
	for _, op := range []int{bpfADD, bpfSUB, bpfMUL, bpfDIV, bpfMOD, bpfAND, bpfOR, bpfXOR, bpfLSH, bpfRSH} {
		ok[bpfALU|op|bpfK], ok[bpfALU|op|bpfX] = true, true
	}
	ok[bpfALU|bpfNEG] = true
	for _, size := range []int{bpfW, bpfH, bpfB} {
		ok[bpfLD|size|bpfABS], ok[bpfLD|size|bpfIND] = true, true
	}
	for _, c := range []int{bpfLD | bpfW | bpfLEN, bpfLD | bpfIMM, bpfLD | bpfMEM,
		bpfLDX | bpfW | bpfLEN, bpfLDX | bpfB | bpfMSH, bpfLDX | bpfIMM, bpfLDX | bpfMEM,
		bpfST, bpfSTX, bpfMISC | bpfTAX, bpfMISC | bpfTXA, bpfRET | bpfK, bpfRET | bpfA, bpfJMP | bpfJA} {
		ok[c] = true
	}
	for _, j := range []int{bpfJEQ, bpfJGT, bpfJGE, bpfJSET} {
		ok[bpfJMP|j|bpfK], ok[bpfJMP|j|bpfX] = true, true
	}
	return ok
}()

// checkProgram refuses, as the kernel's bpf_check_classic does when the program is attached,
// unknown opcodes, division by a zero constant, shifts by 32 or more, scratch cells out of
// range or read before written, jumps past the end, unknown ancillary loads and a program
// that does not end with a return. Errors name the instruction (from 1, as tcpdump -ddd
// lists them).
func checkProgram(prog []bpf.RawInstruction) error {
	n := len(prog)
	if n == 0 || n > bpfMaxInsns {
		return fmt.Errorf("raw BPF: %d instructions, want 1 to %d", n, bpfMaxInsns)
	}
	for pc, ins := range prog {
		bad := func(why string) error {
			return fmt.Errorf("raw BPF: instruction %d (%d %d %d %d): %s", pc+1, ins.Op, ins.Jt, ins.Jf, ins.K, why)
		}
		if ins.Op > 0xff || !kernelCodes[ins.Op] {
			return bad("not an instruction the kernel accepts")
		}
		switch op := int(ins.Op); {
		case op == bpfALU|bpfDIV|bpfK || op == bpfALU|bpfMOD|bpfK:
			if ins.K == 0 {
				return bad("divides by zero")
			}
		case op == bpfALU|bpfLSH|bpfK || op == bpfALU|bpfRSH|bpfK:
			if ins.K >= 32 {
				return bad("shifts by 32 or more")
			}
		case op == bpfLD|bpfMEM || op == bpfLDX|bpfMEM || op == bpfST || op == bpfSTX:
			if ins.K >= bpfMemWords {
				return bad(fmt.Sprintf("scratch cell %d out of 0..%d", ins.K, bpfMemWords-1))
			}
		case op == bpfJMP|bpfJA:
			if ins.K >= uint32(n-pc-1) {
				return bad("jumps past the end")
			}
		case op&0x07 == bpfJMP:
			if pc+int(ins.Jt)+1 >= n || pc+int(ins.Jf)+1 >= n {
				return bad("jumps past the end")
			}
		case op == bpfLD|bpfW|bpfABS || op == bpfLD|bpfH|bpfABS || op == bpfLD|bpfB|bpfABS:
			if ins.K >= skfAdOff && (ins.K-skfAdOff >= skfAdMax || ins.K%4 != 0) {
				return bad("unknown ancillary load")
			}
		}
	}
	if last := prog[n-1].Op; last != bpfRET|bpfK && last != bpfRET|bpfA {
		return fmt.Errorf("raw BPF: instruction %d: the last instruction must be a return", n)
	}
	return checkScratch(prog)
}

// checkScratch refuses a program that may read a scratch cell before writing it on some path
// (check_load_and_stores in net/core/filter.c). Jumps only go forward, so one pass carrying
// the cells valid on every path into each instruction is enough.
func checkScratch(prog []bpf.RawInstruction) error {
	into := make([]uint16, len(prog)) // cells written on every path into pc, from jumps
	for i := range into {
		into[i] = 0xffff
	}
	var valid uint16
	for pc, ins := range prog {
		valid &= into[pc]
		switch op := int(ins.Op); {
		case op == bpfST || op == bpfSTX:
			valid |= 1 << ins.K
		case op == bpfLD|bpfMEM || op == bpfLDX|bpfMEM:
			if valid&(1<<ins.K) == 0 {
				return fmt.Errorf("raw BPF: instruction %d reads scratch cell %d, which may not have been written", pc+1, ins.K)
			}
		case op == bpfJMP|bpfJA:
			into[pc+1+int(ins.K)] &= valid
			valid = 0xffff
		case op&0x07 == bpfJMP:
			into[pc+1+int(ins.Jt)] &= valid
			into[pc+1+int(ins.Jf)] &= valid
			valid = 0xffff
		}
	}
	return nil
}
