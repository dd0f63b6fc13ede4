// Package ribhttp_test compares flowzero's batch lookup API (POST /api/v0/rib/lookup, JSON over
// HTTP on loopback) with what the seed problem used: gobgpd's gRPC ListPath on loopback, one
// address per call and 20 per call. Both serve the same table: the real RIPE RIS dump of
// 2002 (112,988 IPv4 prefixes from 36 peers), loaded into flowzero's RIB from MRT, and the
// route flowzero selects for each prefix added to an in-process gobgp server with its gRPC
// listener. Every lookup is a random address inside a random prefix of the table.
package ribhttp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"flowzero/internal/testdata"
	"flowzero/rib"
	"flowzero/rib/mrt"
	"flowzero/rib/ribhttp"
)

type fixture struct {
	table  *rib.RIB
	addrs  []string
	gobgpd api.GoBgpServiceClient
}

var (
	once sync.Once
	fix  fixture
)

func load(b *testing.B) *fixture {
	path := testdata.Path(b, "rib", "ripe-bgpdump-bview.20020722.2337.gz")
	once.Do(func() {
		t := rib.NewTable(rib.DefaultConfiguration())
		if _, err := mrt.LoadFile(t, path, mrt.Options{}); err != nil {
			b.Fatal(err)
		}
		// gobgpd with its gRPC API on a free loopback port.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		grpcAddr := l.Addr().String()
		l.Close()
		s := server.NewBgpServer(server.GrpcListenAddress(grpcAddr),
			server.LoggerOption(slog.New(slog.NewTextHandler(io.Discard, nil)), nil))
		go s.Serve()
		if err := s.StartBgp(context.Background(), &api.StartBgpRequest{
			Global: &api.Global{Asn: 65000, RouterId: "10.255.255.254", ListenPort: -1},
		}); err != nil {
			b.Fatal(err)
		}
		var prefixes []netip.Prefix
		batch := make([]*apiutil.Path, 0, 1024)
		flush := func() {
			if len(batch) > 0 {
				if _, err := s.AddPath(apiutil.AddPathRequest{Paths: batch}); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		for p, rt := range t.All() {
			if !p.Addr().Is4() {
				continue
			}
			prefixes = append(prefixes, p)
			nlri, err := gobgp.NewIPAddrPrefix(p)
			if err != nil {
				b.Fatal(err)
			}
			a := rt.Attrs
			nh, err := gobgp.NewPathAttributeNextHop(a.NextHop)
			if err != nil {
				b.Fatal(err)
			}
			attrs := []gobgp.PathAttributeInterface{
				gobgp.NewPathAttributeOrigin(a.Origin),
				gobgp.NewPathAttributeAsPath([]gobgp.AsPathParamInterface{
					gobgp.NewAs4PathParam(gobgp.BGP_ASPATH_ATTR_TYPE_SEQ, a.ASPath)}),
				nh,
			}
			if len(a.Communities) > 0 {
				attrs = append(attrs, gobgp.NewPathAttributeCommunities(a.Communities))
			}
			batch = append(batch, &apiutil.Path{Family: gobgp.RF_IPv4_UC, Nlri: nlri, Attrs: attrs})
			if len(batch) == cap(batch) {
				flush()
			}
		}
		flush()
		conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		rnd := rand.New(rand.NewPCG(3, 4))
		for range 1 << 14 {
			p := prefixes[rnd.IntN(len(prefixes))]
			a := p.Addr().As4()
			host := rnd.Uint32() & (1<<(32-p.Bits()) - 1)
			if p.Bits() == 32 {
				host = 0
			}
			v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
			fix.addrs = append(fix.addrs, netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String())
		}
		fix.table = t
		fix.gobgpd = api.NewGoBgpServiceClient(conn)
	})
	if fix.table == nil {
		b.Fatal("fixture setup failed")
	}
	return &fix
}

// BenchmarkRIBLookupAPI reports lookups/s (one op is one call): flowzero-http-N posts N
// addresses per request; gobgpd-grpc-N asks ListPath for N addresses per call (the seed
// problem's "6k lookups/s, 36k batched").
func BenchmarkRIBLookupAPI(b *testing.B) {
	f := load(b)
	for _, n := range []int{1, 20, 1000} {
		b.Run(fmt.Sprintf("flowzero-http-%d", n), func(b *testing.B) {
			h, err := ribhttp.New(nil, f.table)
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			client := srv.Client()
			var body bytes.Buffer
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				body.Reset()
				body.WriteString(`{"addresses":[`)
				for k := range n {
					if k > 0 {
						body.WriteByte(',')
					}
					body.WriteByte('"')
					body.WriteString(f.addrs[i%len(f.addrs)])
					body.WriteByte('"')
					i++
				}
				body.WriteString(`]}`)
				resp, err := client.Post(srv.URL+ribhttp.Path, "application/json", &body)
				if err != nil {
					b.Fatal(err)
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || bytes.Count(out, []byte(`"found":true`)) != n {
					b.Fatalf("status %d, %d found of %d", resp.StatusCode, bytes.Count(out, []byte(`"found":true`)), n)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "lookups/s")
		})
	}
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("gobgpd-grpc-%d", n), func(b *testing.B) {
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				req := &api.ListPathRequest{
					TableType: api.TableType_TABLE_TYPE_GLOBAL,
					Family:    &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST},
				}
				for range n {
					req.Prefixes = append(req.Prefixes, &api.TableLookupPrefix{Prefix: f.addrs[i%len(f.addrs)]})
					i++
				}
				stream, err := f.gobgpd.ListPath(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				found := 0
				for {
					r, err := stream.Recv()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if r.Destination != nil && len(r.Destination.Paths) > 0 {
						found++
					}
				}
				if found == 0 {
					b.Fatalf("gobgpd found nothing for %d addresses", n)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "lookups/s")
		})
	}
}
