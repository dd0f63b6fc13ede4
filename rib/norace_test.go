//go:build !race

package rib

// raceEnabled: see race_test.go.
const raceEnabled = false
