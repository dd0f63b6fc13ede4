// Package pbwire writes and reads the Protocol Buffers wire format without allocating.
package pbwire
