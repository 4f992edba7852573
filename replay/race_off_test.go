//go:build !race

package replay

// raceOn reports that the tests run under the race detector.
const raceOn = false
