//go:build !race

package crashloop

// raceEnabled reports whether the tests run under the race detector, which
// changes allocation counts.
const raceEnabled = false
