package ddl

// protocols are the IP protocol numbers the console names (IANA "Assigned Internet Protocol
// Numbers"), loaded into the protocols dictionary.
var protocols = []struct {
	num        uint8
	name, desc string
}{
	{0, "HOPOPT", "IPv6 Hop-by-Hop Option"},
	{1, "ICMP", "Internet Control Message"},
	{2, "IGMP", "Internet Group Management"},
	{4, "IPv4", "IPv4 encapsulation"},
	{6, "TCP", "Transmission Control"},
	{8, "EGP", "Exterior Gateway Protocol"},
	{9, "IGP", "any private interior gateway"},
	{17, "UDP", "User Datagram"},
	{27, "RDP", "Reliable Data Protocol"},
	{33, "DCCP", "Datagram Congestion Control Protocol"},
	{41, "IPv6", "IPv6 encapsulation"},
	{43, "IPv6-Route", "Routing Header for IPv6"},
	{44, "IPv6-Frag", "Fragment Header for IPv6"},
	{46, "RSVP", "Reservation Protocol"},
	{47, "GRE", "Generic Routing Encapsulation"},
	{50, "ESP", "Encap Security Payload"},
	{51, "AH", "Authentication Header"},
	{58, "IPv6-ICMP", "ICMP for IPv6"},
	{59, "IPv6-NoNxt", "No Next Header for IPv6"},
	{60, "IPv6-Opts", "Destination Options for IPv6"},
	{88, "EIGRP", "Enhanced Interior Gateway Routing Protocol"},
	{89, "OSPF", "Open Shortest Path First"},
	{94, "IPIP", "IP-within-IP Encapsulation Protocol"},
	{97, "ETHERIP", "Ethernet-within-IP Encapsulation"},
	{103, "PIM", "Protocol Independent Multicast"},
	{108, "IPComp", "IP Payload Compression Protocol"},
	{112, "VRRP", "Virtual Router Redundancy Protocol"},
	{115, "L2TP", "Layer Two Tunneling Protocol"},
	{132, "SCTP", "Stream Control Transmission Protocol"},
	{135, "Mobility Header", "Mobility Extension Header for IPv6"},
	{136, "UDPLite", "Lightweight User Datagram Protocol"},
	{137, "MPLS-in-IP", "MPLS in IP"},
	{139, "HIP", "Host Identity Protocol"},
	{140, "Shim6", "Shim6 Protocol"},
	{143, "Ethernet", "Ethernet (RFC 8986)"},
}
