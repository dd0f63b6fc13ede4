//go:build race

package rib

// raceEnabled makes TestFlat4 run fewer rounds under the race detector, which slows each
// rebuild of the 64 MiB array tenfold.
const raceEnabled = true
