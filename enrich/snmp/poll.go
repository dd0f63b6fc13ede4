package snmp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gosnmp/gosnmp"
)

// The OIDs polled (RFC 3418 SNMPv2-MIB, RFC 2863 IF-MIB), without the instance.
const (
	oidSysName     = "1.3.6.1.2.1.1.5.0"
	oidIfDescr     = "1.3.6.1.2.1.2.2.1.2"
	oidIfName      = "1.3.6.1.2.1.31.1.1.1.1"
	oidIfAlias     = "1.3.6.1.2.1.31.1.1.1.18"
	oidIfHighSpeed = "1.3.6.1.2.1.31.1.1.1.15"
)

// interfaceOIDs are the columns asked for each interface, in this order.
var interfaceOIDs = [...]string{oidIfDescr, oidIfName, oidIfAlias, oidIfHighSpeed}

// snmpPoll asks target for the sysName and the interfaces in one GET request, trying each
// community in turn for SNMPv2c.
func (c *Cache) snmpPoll(ctx context.Context, target netip.AddrPort, creds *Credentials, indexes []uint32) (pollResult, error) {
	oids := make([]string, 0, 1+len(interfaceOIDs)*len(indexes))
	oids = append(oids, oidSysName)
	for _, index := range indexes {
		for _, oid := range interfaceOIDs {
			oids = append(oids, oid+"."+strconv.FormatUint(uint64(index), 10))
		}
	}
	g := &gosnmp.GoSNMP{
		Context:                 ctx,
		Target:                  target.Addr().String(),
		Port:                    target.Port(),
		Transport:               "udp",
		Timeout:                 c.cfg.PollerTimeout,
		Retries:                 c.cfg.PollerRetries,
		MaxOids:                 len(oids),
		UseUnconnectedUDPSocket: true, // agents may answer from another of their addresses
	}
	communities := []string{""}
	if creds.UserName != "" {
		g.Version = gosnmp.Version3
		g.SecurityModel = gosnmp.UserSecurityModel
		g.ContextName = creds.ContextName
		g.MsgFlags = gosnmp.NoAuthNoPriv
		if creds.AuthenticationProtocol > AuthNone {
			g.MsgFlags = gosnmp.AuthNoPriv
			if creds.PrivacyProtocol > PrivNone {
				g.MsgFlags = gosnmp.AuthPriv
			}
		}
		g.SecurityParameters = &gosnmp.UsmSecurityParameters{
			UserName:                 creds.UserName,
			AuthenticationProtocol:   authOrNone(creds.AuthenticationProtocol),
			AuthenticationPassphrase: creds.AuthenticationPassphrase,
			PrivacyProtocol:          privOrNone(creds.PrivacyProtocol),
			PrivacyPassphrase:        creds.PrivacyPassphrase,
		}
	} else {
		g.Version = gosnmp.Version2c
		communities = creds.Communities
	}
	if err := g.Connect(); err != nil {
		return pollResult{}, fmt.Errorf("connect: %w", err)
	}
	defer g.Conn.Close()
	var errs []string
	for i, community := range communities {
		g.Community = community
		pkt, err := g.Get(oids)
		if err != nil {
			if ctx.Err() != nil {
				return pollResult{}, ctx.Err()
			}
			errs = append(errs, tried(i, len(communities), err.Error()))
			continue
		}
		if pkt.Error == gosnmp.TooBig {
			// The community was accepted: the request is too large, whichever is tried.
			return pollResult{}, errTooBig
		}
		if pkt.Error != gosnmp.NoError {
			errs = append(errs, tried(i, len(communities), fmt.Sprintf("agent answered %s (index %d)", pkt.Error, pkt.ErrorIndex)))
			continue
		}
		return decodeAnswer(pkt.Variables, indexes), nil
	}
	return pollResult{}, errors.New(strings.Join(errs, "; "))
}

// tried names a failed try by the community's rank, never the community: it is a secret.
func tried(i, n int, msg string) string {
	if n == 1 {
		return msg
	}
	return fmt.Sprintf("community %d of %d: %s", i+1, n, msg)
}

func authOrNone(p AuthProtocol) gosnmp.SnmpV3AuthProtocol {
	if p == 0 {
		return gosnmp.NoAuth
	}
	return gosnmp.SnmpV3AuthProtocol(p)
}

func privOrNone(p PrivProtocol) gosnmp.SnmpV3PrivProtocol {
	if p == 0 {
		return gosnmp.NoPriv
	}
	return gosnmp.SnmpV3PrivProtocol(p)
}

// decodeAnswer reads the variables of a GET answer for the sysName and the interfaces
// asked. Variables are matched by name, not position; unknown names are ignored. An
// interface whose ifName and ifDescr are both noSuchObject or noSuchInstance is not found;
// one with a column of the wrong type, or missing from the answer, is bad (the caller keeps
// its previous answer), as is a sysName of the wrong type.
func decodeAnswer(vars []gosnmp.SnmpPDU, indexes []uint32) pollResult {
	res := pollResult{interfaces: make(map[uint32]polledInterface, len(indexes))}
	type columns struct {
		descr, name, alias string
		hasDescr, hasName  bool
		noDescr, noName    bool // noSuchObject, noSuchInstance
		speed              uint32
		bad                bool
	}
	got := make(map[uint32]*columns, len(indexes))
	for _, index := range indexes {
		got[index] = &columns{}
	}
	// text reads a string column: its value, or whether the agent has none.
	text := func(v gosnmp.SnmpPDU, col *columns) (s string, ok, none bool) {
		if s, ok := octets(v); ok {
			return s, true, false
		}
		if absent(v) {
			return "", false, true
		}
		col.bad = true
		return "", false, false
	}
	for _, v := range vars {
		name := strings.TrimPrefix(v.Name, ".")
		if name == oidSysName {
			switch s, ok := octets(v); {
			case ok:
				res.sysName, res.hasSysName = s, true
			case !absent(v):
				res.badSysName = true
			}
			continue
		}
		dot := strings.LastIndexByte(name, '.')
		if dot < 0 {
			continue
		}
		n, err := strconv.ParseUint(name[dot+1:], 10, 32)
		if err != nil {
			continue
		}
		col, ok := got[uint32(n)]
		if !ok {
			continue
		}
		switch name[:dot] {
		case oidIfDescr:
			col.descr, col.hasDescr, col.noDescr = text(v, col)
		case oidIfName:
			col.name, col.hasName, col.noName = text(v, col)
		case oidIfAlias:
			col.alias, _, _ = text(v, col)
		case oidIfHighSpeed:
			switch v.Type {
			case gosnmp.Gauge32, gosnmp.Counter32, gosnmp.Uinteger32, gosnmp.Integer:
				if s := gosnmp.ToBigInt(v.Value); s.IsUint64() && s.Uint64() <= 1<<32-1 {
					col.speed = uint32(s.Uint64())
				} else {
					col.bad = true
				}
			default:
				if !absent(v) {
					col.bad = true
				}
			}
		}
	}
	for index, col := range got {
		var p polledInterface
		switch {
		case col.bad:
			p.bad = true
		case col.hasName || col.hasDescr:
			p.found = true
			p.iface.Name = col.descr
			if col.hasName {
				p.iface.Name = col.name
			}
			switch {
			case col.alias != "" && col.alias != p.iface.Name:
				p.iface.Description = col.alias
			case col.descr != p.iface.Name:
				p.iface.Description = col.descr
			}
			p.iface.Speed = col.speed
		case !col.noName || !col.noDescr:
			// Neither a name nor the agent saying it has none: an incomplete answer.
			p.bad = true
		}
		res.interfaces[index] = p
	}
	return res
}

// absent reports whether the agent answered that it has no such object or instance.
func absent(v gosnmp.SnmpPDU) bool {
	return v.Type == gosnmp.NoSuchObject || v.Type == gosnmp.NoSuchInstance || v.Type == gosnmp.EndOfMibView
}

// octets returns an OctetString value.
func octets(v gosnmp.SnmpPDU) (string, bool) {
	if v.Type != gosnmp.OctetString {
		return "", false
	}
	b, ok := v.Value.([]byte)
	if !ok {
		return "", false
	}
	return string(b), true
}
