package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"flowzero/internal/lograte"
)

// reason is why a connection was refused or ended badly, or why part of an agent's stream was
// dropped: the label of errors_total, and the key of a log limiter.
type reason uint8

const (
	reasonAccept             reason = iota // accepting failed (out of descriptors...)
	reasonTooManyConnections               // max-agents + maxExtraHandshakes open, none in its handshake
	reasonEvicted                          // closed before its hello to make room for a newer connection
	reasonHandshakeTimeout                 // no complete hello (or TLS handshake) in time
	reasonBadHello                         // not a hello, or a malformed one
	reasonNotTLS                           // a client without TLS on a TLS listener
	reasonUnexpectedTLS                    // a TLS client on a listener without TLS
	reasonTLSHandshake                     // the TLS handshake failed (certificates...)
	reasonVersion                          // a wire version the server does not speak
	reasonUnauthorized                     // a token not in tokens
	reasonTooManyAgents                    // answered busy: max-agents connected
	reasonTruncatedFrame                   // the agent disconnected in the middle of a frame
	reasonIdleTimeout                      // nothing, or no whole frame, for idle-timeout
	reasonFrameTooLong                     // a frame header beyond wire.MaxFramePayload
	reasonBadFrame                         // a malformed frame (refused whole) or frame header
	reasonConnection                       // the connection failed (reset, write error)
	reasonOutput                           // writing the output failed
	reasonTooManyInterfaces                // an interface beyond max-interfaces-per-agent
	reasonOutputRepaired                   // an incomplete last block cut off an output file before appending
	numReasons
)

// reasonNames are the errors_total labels.
var reasonNames = [numReasons]string{
	reasonAccept:             "accept",
	reasonTooManyConnections: "too-many-connections",
	reasonEvicted:            "evicted",
	reasonHandshakeTimeout:   "handshake-timeout",
	reasonBadHello:           "bad-hello",
	reasonNotTLS:             "not-tls",
	reasonUnexpectedTLS:      "unexpected-tls",
	reasonTLSHandshake:       "tls-handshake",
	reasonVersion:            "version",
	reasonUnauthorized:       "unauthorized",
	reasonTooManyAgents:      "too-many-agents",
	reasonTruncatedFrame:     "truncated-frame",
	reasonIdleTimeout:        "idle-timeout",
	reasonFrameTooLong:       "frame-too-long",
	reasonBadFrame:           "bad-frame",
	reasonConnection:         "connection-error",
	reasonOutput:             "output",
	reasonTooManyInterfaces:  "too-many-interfaces",
	reasonOutputRepaired:     "output-repaired",
}

func (r reason) String() string { return reasonNames[r] }

// Connection log lines are limited per reason: connLogBurst lines per connLogWindow, the
// first burst included, whatever the number of connections; the next line allowed says how
// many were suppressed, and errors_total counts them all.
const (
	connLogBurst  = 3
	connLogWindow = 30 * time.Second
)

// reasonLog is a reason's counter and log limiter, shared by every connection.
type reasonLog struct {
	count prometheus.Counter
	limit *lograte.Limiter
}

// newReasonLogs returns the counters (created at 0, so that they exist from start) and
// limiters of every reason.
func newReasonLogs(errors *prometheus.CounterVec) [numReasons]reasonLog {
	var logs [numReasons]reasonLog
	for r := range numReasons {
		logs[r] = reasonLog{count: errors.WithLabelValues(reasonNames[r]), limit: lograte.New(connLogBurst, connLogWindow)}
	}
	return logs
}

// connError counts an event of reason r and logs it at level, rate-limited per reason.
func (s *Server) connError(r reason, level slog.Level, msg string, args ...any) {
	s.reasons[r].count.Inc()
	if ok, suppressed := s.reasons[r].limit.Allow(s.clock.Now()); ok {
		s.logReason(r, level, suppressed, msg, args...)
	}
}

// connErrorLocal is connError for a loop of one connection, through its Local of the reason's
// limiter.
func (s *Server) connErrorLocal(g *lograte.Local, r reason, level slog.Level, msg string, args ...any) {
	s.reasons[r].count.Inc()
	if ok, suppressed := g.Allow(s.clock.Now()); ok {
		s.logReason(r, level, suppressed, msg, args...)
	}
}

func (s *Server) logReason(r reason, level slog.Level, suppressed int, msg string, args ...any) {
	args = append(args, "reason", reasonNames[r])
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	s.log.Log(context.Background(), level, msg, args...)
}
