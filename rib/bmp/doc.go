// Package bmp is a BGP Monitoring Protocol listener (RFC 7854): routers connect over TCP and
// report their BGP peers' routes, which this package applies to the RIB (flowzero/rib) live.
//
// # Design
//
// One goroutine per router session reads the stream with Reader, which returns each message
// in place from a 64 KiB buffer (a message may span TCP segments and a segment may hold
// several messages), and handles it at once: a BMP message becomes one RIB transaction, so
// lookups see it all or nothing and never wait. Route monitoring is decoded by rib/bgp into
// reusable storage and its attributes are interned once per UPDATE; the session keeps its
// per-peer header, decoder and metric handles, so a route update allocates nothing in this
// package (the RIB's transaction object is the one allocation per message).
//
// Messages: the initiation must come first (its sysName is logged); peer up notifications
// give the Add-Path families negotiated by the two OPEN messages (RFC 7911: the sender
// announced Send, the receiver Receive); route monitoring carries IPv4/IPv6 unicast,
// labelled unicast, L3VPN (RFC 4364/4659) and EVPN IP prefix routes (RFC 9136), with
// withdrawals and End-of-RIB markers (RFC 4724) counted per peer; statistics reports feed
// per-peer gauges; peer down removes the peer's routes at once; termination ends the session.
// Route mirroring is never parsed. Other families (VPLS, flowspec, unknown AFIs) are counted
// in ignored_nlri_total and skipped. Malformed messages are counted and skipped; the stream
// framing (the common header's length) keeps the session in sync.
//
// Views: pre- and post-policy Adj-RIB-In (the L flag) are separate RIB peers and
// Configuration.AdjRIBIn keeps either or both; Loc-RIB (RFC 9069) is kept; Adj-RIB-Out
// (RFC 8671) is ignored. Both views belong to one BGP session, which the router reports with
// a single peer up and peer down (L=0): the Add-Path families it negotiated parse the NLRI of
// both views, and its peer down removes both.
//
// VPN routes follow Akvorado: with no RD filter every route is kept, VPN ones under their
// route distinguisher; with Configuration.RDs only routes whose RD is listed are, where plain
// routes have RD 0:0 and every route of an RD instance peer (a VRF's peer) has the peer's
// distinguisher. Since the RIB keys a path by (peer, prefix, path ID), each (peer, RD) pair is
// its own RIB peer, so the same prefix in two VRFs does not collide.
//
// Connections: a source outside Configuration.AllowedRouters, or beyond MaxSessions when
// every connection is an initiated session, is closed at accept and counted in
// refused_connections_total (reason label only: the address goes to the rate-limited log,
// never to a label); below that, at MaxSessions the oldest connection still waiting for its
// initiation message is closed for the new one. A listener reachable from beyond the
// routers wants AllowedRouters all the same. A new connection must deliver its
// initiation message within InitiationTimeout. Until it is accepted the connection has no
// per-router series and no "session up" log line: one that ends before is counted in
// uninitiated_connections_total or session_timeouts_total by reason only and named in the
// rate-limited log, so hosts that connect and leave add no series. After it, a session is
// closed only after IdleTimeout without a byte (long: a router whose routes do not change is
// silent), while TCP keepalives find dead routers within minutes. A message larger than Reader's buffer is
// copied into a buffer that grows as its bytes arrive, so a header announcing 1 MiB costs
// nothing until the megabyte comes.
//
// Sessions that end: a peer down removes the peer's routes at once, those a closed session of
// the same router still keeps included (the router reports, once reconnected, the peers that
// went down while it was away); a connection that drops
// (or terminates) keeps its routes for Configuration.Keep (Akvorado's behaviour), so a BMP
// flap does not empty the table. The RIB names peers by router address, not by TCP session:
// when the router reconnects, the first route monitoring of a peer takes the RIB peer over
// from the old session and drops the old routes, which the router is sending again. Routes
// restored from a RIB snapshot at start are treated the same way.
package bmp
