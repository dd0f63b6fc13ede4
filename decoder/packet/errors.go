package packet

// Error is a parsing error. The values are fixed (no allocation when returned); Reason is a
// short stable string meant for a metric label.
type Error struct {
	Reason string
	msg    string
}

func (e *Error) Error() string { return e.msg }

// Reasons, as found in Error.Reason.
const (
	ReasonTruncated       = "truncated header"
	ReasonBadIPHeader     = "bad IP header"
	ReasonMPLSPayload     = "unknown MPLS payload"
	ReasonNotEncapsulated = "not encapsulated"
	ReasonTooDeep         = "too many nested headers"
)

var (
	// ErrTruncated is returned when an L2 or L3 header is cut short.
	ErrTruncated = &Error{ReasonTruncated, "packet: L2/L3 header truncated"}
	// ErrBadIPHeader is returned for an IP header that contradicts itself (wrong version,
	// header length below the minimum).
	ErrBadIPHeader = &Error{ReasonBadIPHeader, "packet: malformed IP header"}
	// ErrMPLSPayload is returned when the payload of an MPLS label stack is neither IPv4,
	// IPv6 nor Ethernet behind a zero control word.
	ErrMPLSPayload = &Error{ReasonMPLSPayload, "packet: unknown payload after MPLS label stack"}
	// ErrNotEncapsulated is returned when decapsulation is configured and the packet does
	// not carry the configured tunnel.
	ErrNotEncapsulated = &Error{ReasonNotEncapsulated, "packet: not encapsulated as configured"}
	// ErrTooDeep is returned when Ethernet frames nest (through MPLS pseudowires, VXLAN or
	// GRE bridging) deeper than the parser follows.
	ErrTooDeep = &Error{ReasonTooDeep, "packet: too many nested Ethernet headers"}
)
