package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"flowzero/rib"
	"flowzero/rib/bgp"
	"flowzero/rib/mrt"
)

func init() {
	register("rib", "load MRT dumps or a RIB snapshot and look up addresses (rib load|lookup)", runRIB)
}

func runRIB(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "Usage: flowzero rib load [flags] FILE...\n       flowzero rib lookup [flags] -f FILE ADDR...\n")
		return errUsage
	}
	switch args[0] {
	case "load":
		return ribLoad(args[1:], stdout, stderr)
	case "lookup":
		return ribLookup(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "flowzero rib: unknown subcommand %q (want load or lookup)\n", args[0])
		return errUsage
	}
}

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(s string) error { *f = append(*f, s); return nil }

// ribFlags are the flags shared by load and lookup.
type ribFlags struct {
	selection, peer string
	quiet           bool
}

func (rf *ribFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&rf.selection, "selection", "first", "route selection for lookups: first, best or peer")
	fs.StringVar(&rf.peer, "peer", "", "peer address for -selection peer")
	fs.BoolVar(&rf.quiet, "q", false, "no progress line")
}

func (rf *ribFlags) table() (*rib.RIB, error) {
	cfg := rib.DefaultConfiguration()
	cfg.Selection, cfg.Peer = rf.selection, rf.peer
	return rib.New(nil, cfg)
}

// loadInto loads an MRT file or a snapshot (recognized by its magic) into r.
func loadInto(r *rib.RIB, path string, progress io.Writer) (mrt.Stats, error) {
	f, err := os.Open(path)
	if err != nil {
		return mrt.Stats{}, err
	}
	var magic [8]byte
	n, _ := io.ReadFull(f, magic[:])
	f.Close()
	if bytes.Equal(magic[:n], []byte("FZRIBSNP")) {
		start := time.Now()
		err := r.LoadSnapshotFile(path)
		return mrt.Stats{Duration: time.Since(start)}, err
	}
	return mrt.LoadFile(r, path, mrt.Options{Progress: progress, GCPercent: 400})
}

func ribLoad(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rib load", stderr)
	var rf ribFlags
	rf.register(fs)
	save := fs.String("save", "", "write a snapshot of the loaded table to this file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flowzero rib load [flags] FILE...\n\nLoads MRT dumps (TABLE_DUMP, TABLE_DUMP_V2, BGP4MP; gzip/bzip2) or snapshots in order and\nreports prefixes, peers, time and memory.\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	r, err := rf.table()
	if err != nil {
		return err
	}
	var progress io.Writer = stderr
	if rf.quiet {
		progress = nil
	}
	start := time.Now()
	for _, path := range fs.Args() {
		st, err := loadInto(r, path, progress)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fmt.Fprintf(stdout, "%s: %d records, %d RIB entries, %d updates (%d announced, %d withdrawn), %d state changes, %d corrupt, %d skipped, %s\n",
			path, st.Records, st.RIBEntries, st.Updates, st.Announcements, st.Withdrawals, st.StateChanges,
			st.Corrupt, st.Unsupported, st.Duration.Round(time.Millisecond))
	}
	elapsed := time.Since(start)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := r.Stats()
	perRoute := 0.0
	if st.Routes > 0 {
		perRoute = float64(ms.HeapAlloc) / float64(st.Routes)
	}
	fmt.Fprintf(stdout, "prefixes: %d (IPv4 %d, IPv6 %d)\nroutes: %d\npeers: %d\nattribute sets: %d\ntime: %s\nheap after GC: %.1f MiB (%.1f bytes/route)\n",
		st.Prefixes4+st.Prefixes6, st.Prefixes4, st.Prefixes6, st.Routes, st.Peers, st.AttributeSets,
		elapsed.Round(time.Millisecond), float64(ms.HeapAlloc)/(1<<20), perRoute)
	if *save != "" {
		t := time.Now()
		if err := r.SaveSnapshotFile(*save); err != nil {
			return err
		}
		fi, _ := os.Stat(*save)
		fmt.Fprintf(stdout, "snapshot: %s, %d bytes, %s\n", *save, fi.Size(), time.Since(t).Round(time.Millisecond))
	}
	return nil
}

func ribLookup(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rib lookup", stderr)
	var rf ribFlags
	rf.register(fs)
	var files fileList
	fs.Var(&files, "f", "MRT dump or snapshot to load first (repeatable)")
	all := fs.Bool("all", false, "print every path of the matched prefix, not only the selected one")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: flowzero rib lookup [flags] -f FILE ADDR...\n\nLongest-prefix match of each address with the selected route's attributes.\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(files) == 0 || fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	r, err := rf.table()
	if err != nil {
		return err
	}
	var progress io.Writer = stderr
	if rf.quiet {
		progress = nil
	}
	for _, path := range files {
		if _, err := loadInto(r, path, progress); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	peers := r.Peers()
	for _, s := range fs.Args() {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("not an address: %q", s)
		}
		rt, ok := r.Lookup(a)
		if !ok {
			fmt.Fprintf(stdout, "%s: no route\n", a)
			continue
		}
		if !*all {
			fmt.Fprintf(stdout, "%s: %s %s\n", a, rt.Prefix(a), formatRoute(peers, rt.Peer, rt.Attrs))
			continue
		}
		for _, p := range r.Paths(a) {
			mark := " "
			if p.Selected {
				mark = "*"
			}
			fmt.Fprintf(stdout, "%s: %s%s %s\n", a, mark, p.Prefix, formatRoute(peers, p.Peer, p.Attrs))
		}
	}
	return nil
}

func formatRoute(peers []rib.PeerInfo, id rib.PeerID, a *bgp.Attributes) string {
	var b strings.Builder
	if int(id) < len(peers) {
		fmt.Fprintf(&b, "peer %s AS%d", peers[id].Address, peers[id].AS)
	}
	fmt.Fprintf(&b, " origin-as %d as-path [", a.OriginAS())
	for i, as := range a.ASPath {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatUint(uint64(as), 10))
	}
	b.WriteString("]")
	if a.NextHop.IsValid() {
		fmt.Fprintf(&b, " next-hop %s", a.NextHop)
	}
	if len(a.Communities) > 0 {
		b.WriteString(" communities [")
		for i, c := range a.Communities {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d:%d", c>>16, c&0xffff)
		}
		b.WriteString("]")
	}
	if len(a.LargeCommunities) > 0 {
		b.WriteString(" large-communities [")
		for i, c := range a.LargeCommunities {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d:%d:%d", c.GlobalAdmin, c.LocalData1, c.LocalData2)
		}
		b.WriteString("]")
	}
	if a.HasLocalPref {
		fmt.Fprintf(&b, " local-pref %d", a.LocalPref)
	}
	if a.HasMED {
		fmt.Fprintf(&b, " med %d", a.MED)
	}
	return b.String()
}
