// Package pbwire writes and reads the Protocol Buffers wire format without allocating, in the
// manner of Perfetto's ProtoZero.
//
// # Design
//
// Serializing and parsing are different code with different goals, so they live in different
// files and share nothing but the wire format.
//
// The writer (writer.go) is append-only: Append*Field functions take a caller-owned dst and
// return it, like strconv.Append*. Field keys are encoded once at setup into a Tag (the key
// bytes and their count), so a field starts with one 8-byte store of the whole key instead of
// re-encoding it. The scalar field writers check once that dst has 16 spare bytes (growing it
// otherwise), then store without further capacity checks; they are small enough for the Go
// compiler to inline, which removes the call, the frame and the argument shuffling per field
// (docs/design/pbwire.md has the figures, bench/protozero the benchmark). The price is that
// they may scribble over dst's spare capacity past the field. No schema, no reflection, no
// intermediate struct: the caller writes fields in the order it likes.
//
// Buffer (buffer.go) is the writer for hot paths that write many small messages, one at a
// time, into one reused array (flowzero's flows): the end of the message is an integer, so a
// field costs one integer store rather than a slice header, with the room for the length
// prefix kept in front (Delimited). Its fast paths are inlined or leaf functions, its slow
// paths (growing, long or invalid strings) out of line. Two ways write without a check per
// field: AppendVarintFieldReserved writes into a reserve kept past the array's length, for a
// caller that knows how many such fields it writes; Room is the room checked once (Grow) for
// a run of small fields written back to back, the message's end in a register.
//
// A nested message's size is not known when it begins. Rather than computing sizes in a first
// pass (vtprotobuf, proto.Marshal) or buffering children (easyproto), BeginNested reserves 4
// bytes and EndNested back-patches them with a redundant varint (7 is 87 80 80 00), which
// every protobuf parser accepts. Nesting is a stack of marks held by the caller (or by Writer),
// to any depth. The price is up to 3 bytes per nested message and non-canonical bytes;
// Compact rewrites a message with minimal sizes (recognizing nested messages by their
// redundant size) when canonical bytes matter, at the cost of one more pass.
//
// ScatteredWriter writes into fixed-size chunks from a Delegate (HeapDelegate, or
// PooledDelegate to recycle them), so that a long stream never copies to grow. A field may
// span chunks; the 4 size bytes of a nested message are kept within one chunk and patched
// through a slice kept on the writer's stack, even once the payload has moved on to later
// chunks.
//
// Length-delimited framing (a varint length then the message, as Kafka consumers and
// ClickHouse's Protobuf format expect) needs the length before the payload. FinishDelimited
// avoids copying the payload: the caller reserves ReserveDelimited bytes in front of it, and
// the minimal length is written right before the payload at the end.
//
// The reader (reader.go) is a zero-copy iterator: Reader.Next decodes one key and its value,
// and a bytes value is a sub-slice of the message. Packed iterates over packed repeated
// fields, DelimitedReader and SplitDelimited over length-delimited streams. Every malformed
// input (truncated varint or value, length past the end, wire types 3, 4, 6 and 7, varints
// over 10 bytes, field number 0) gives an error wrapping one of the Err* values; nothing
// panics and nothing reads past the input.
package pbwire
