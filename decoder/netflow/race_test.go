//go:build race

package netflow

// raceEnabled tells the exhaustive tests to sample their cases under the race detector,
// which slows them tenfold; the run without it (and the fuzz targets) covers them all.
const raceEnabled = true
