//go:build !cgo && unix

package main

// cgoEnabled reports whether crashloop is built with cgo, as the tests
// build it with the same environment: on Linux, it then sees the whole
// signal state it was started with (see sigState).
const cgoEnabled = false
