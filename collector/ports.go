package collector

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
)

// Port sharing. The listeners bind with SO_REUSEPORT so that a listener's workers share its
// port; the kernel then also lets any other socket of the same user join the port, and
// splits every exporter's datagrams with it without a word (issue 24: a second `flowzero
// collect` took 40% of the flows). So the collector looks, at start and every second after,
// for sockets bound to its listeners' ports on an overlapping address (sharePort) that are
// not its own, in /proc/net/udp and /proc/net/udp6 (the network namespace's sockets, by
// inode), and for the processes holding them in /proc/PID/fd.

// foreignSocket is a socket that takes part of a listener's datagrams.
type foreignSocket struct {
	listener string // protocol/address
	socket   udpSocket
	owners   []string // "pid 1234 (flowzero)"; empty when no readable process holds it
}

func (f foreignSocket) String() string {
	who := "held by no process this one can see (another user's? ss -ulpn tells)"
	if len(f.owners) > 0 {
		who = "held by " + strings.Join(f.owners, ", ")
	}
	return fmt.Sprintf("listener %s: socket inode %d bound to %s (uid %d) shares the port, %s",
		f.listener, f.socket.inode, f.socket.local, f.socket.uid, who)
}

// listenerAddr is a listener's name and the address its sockets are bound to, dual-stack or
// not.
type listenerAddr struct {
	name string
	addr netip.AddrPort
	dual bool
}

// foreignSockets returns the sockets among socks, not in own, that share a port with one of
// listeners, with the processes holding them (taken from known when there, so that a socket
// that stays does not cost a walk of /proc every second).
func foreignSockets(socks []udpSocket, listeners []listenerAddr, own map[uint64]bool, known map[uint64]foreignSocket) []foreignSocket {
	var out []foreignSocket
	inodes := map[uint64]bool{}
	for _, l := range listeners {
		for _, s := range socks {
			// A foreign socket on [::] is taken as dual-stack: /proc does not say.
			if !own[s.inode] && sharePort(l.addr, l.dual, s.local, true) {
				f := foreignSocket{listener: l.name, socket: s}
				if k, ok := known[s.inode]; ok {
					f.owners = k.owners
				} else {
					inodes[s.inode] = true
				}
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	if len(inodes) > 0 {
		owners := socketOwners(inodes)
		for i := range out {
			if inodes[out[i].socket.inode] {
				out[i].owners = owners[out[i].socket.inode]
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].listener != out[j].listener {
			return out[i].listener < out[j].listener
		}
		return out[i].socket.inode < out[j].socket.inode
	})
	return out
}

// describeForeign joins the sockets found into one message.
func describeForeign(found []foreignSocket) string {
	parts := make([]string, len(found))
	for i, f := range found {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}

// plannedListeners returns the addresses the listeners will bind (those with a port: port
// 0 is a free one, which nobody holds).
func (c *Collector) plannedListeners() []listenerAddr {
	var out []listenerAddr
	for _, l := range c.cfg.Listeners {
		ap, err := netip.ParseAddrPort(withHost(l.Address))
		if err == nil && ap.Port() != 0 {
			out = append(out, listenerAddr{l.Protocol + "/" + ap.String(), ap, bothFamilies(l.Address)})
		}
	}
	return out
}

// boundListeners returns the address of each listener's sockets and the inodes of every
// socket of the collector.
func (c *Collector) boundListeners() ([]listenerAddr, map[uint64]bool) {
	var out []listenerAddr
	own := map[uint64]bool{}
	last := -1
	for _, w := range c.workers {
		own[w.inode] = true
		if w.listener != last {
			last = w.listener
			ap := w.conn.LocalAddr().(*net.UDPAddr).AddrPort()
			out = append(out, listenerAddr{w.name, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()),
				bothFamilies(c.cfg.Listeners[w.listener].Address)})
		}
	}
	return out, own
}

// checkPortSharing looks for foreign sockets on the listeners' ports at start: found ones
// are an error under port-sharing: refuse, and logged under warn.
func (c *Collector) checkPortSharing(listeners []listenerAddr, own map[uint64]bool) error {
	found := foreignSockets(procUDPSockets(), listeners, own, nil)
	if len(found) > 0 && c.cfg.PortSharing == "refuse" {
		return fmt.Errorf("collector: %s: the kernel would split every exporter's datagrams between them "+
			"(stop the other socket, or set collector.port-sharing: warn to start anyway)", describeForeign(found))
	}
	c.watchForeign(found) // logs them and reports them until they go
	return nil
}

// watchForeign updates what the collector reports of foreign sockets: each new one is
// logged as an error, each one gone as an info line; the gauge and the health report
// follow. Called at start and by the poller every second.
func (c *Collector) watchForeign(found []foreignSocket) {
	c.foreignMu.Lock()
	defer c.foreignMu.Unlock()
	now := map[uint64]foreignSocket{}
	perListener := map[string]int{}
	for _, f := range found {
		now[f.socket.inode] = f
		perListener[f.listener]++
	}
	for ino, f := range now {
		if _, known := c.foreign[ino]; !known {
			c.log.Error("another socket shares a listener's port: the kernel splits every exporter's datagrams with it",
				"listener", f.listener, "inode", ino, "address", f.socket.local.String(), "uid", f.socket.uid,
				"process", strings.Join(f.owners, ", "))
		}
	}
	for ino, f := range c.foreign {
		if _, still := now[ino]; !still {
			c.log.Info("the socket sharing a listener's port is gone", "listener", f.listener, "inode", ino)
		}
	}
	c.foreign = now
	for _, l := range c.listenerNames() {
		c.metrics.foreignSockets.WithLabelValues(l).Set(float64(perListener[l]))
	}
	if len(found) > 0 {
		c.health.Set("port-sharing", describeForeign(found))
	} else {
		c.health.Clear("port-sharing")
	}
}

// listenerNames returns the name of each listener, as the metrics label them.
func (c *Collector) listenerNames() []string {
	var out []string
	last := -1
	for _, w := range c.workers {
		if w.listener != last {
			last = w.listener
			out = append(out, w.name)
		}
	}
	return out
}
