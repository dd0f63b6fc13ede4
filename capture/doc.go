// Package capture is flowzero's capture forwarder: agents capture packets and stream them to
// one server, which writes pcapng and can turn them into flows. It holds no code; data flows
// through its packages in this order:
//
//   - agent: live capture (AF_PACKET) or replay of capture files, sent to the server;
//   - filter: the agent's packet filters, compiled to classic BPF without libpcap;
//   - wire: the framing between agent and server (hello, frames of records, acknowledgements);
//   - server: accepts agents, authenticates them, writes their packets, acknowledges frames;
//   - pcapng: the server's output files (rotation, per agent, stdout, FIFO);
//   - flows: the server's packets turned into flows for the collector's pipeline.
//
// The design, its delivery guarantees and the measurements behind it are in
// docs/design/capture.md.
package capture
