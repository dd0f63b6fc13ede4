package app

import "flowzero/internal/pcapfile"

// sflowReady tells the tests whether the sFlow decoder is wired in.
const sflowReady = true

var readUDP = pcapfile.ReadUDP
