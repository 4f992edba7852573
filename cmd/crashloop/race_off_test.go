//go:build !race && unix

package main

// raceEnabled reports whether the tests run under the race detector; the
// tests then build crashloop with it too.
const raceEnabled = false
