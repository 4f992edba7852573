//go:build race

package faultrun

// raceEnabled: the replicas are built with -race too when the test runs
// under it.
const raceEnabled = true
