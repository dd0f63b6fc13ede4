//go:build !race

package netflow

// raceEnabled: see race_test.go.
const raceEnabled = false
