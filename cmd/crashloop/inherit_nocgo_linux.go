//go:build !cgo && linux

package main

// startSigState would return the signal state the process was started
// with, as read before the Go runtime changed it; that takes cgo (see
// inherit_cgo_linux.go). Without it, crashloop reads what the Go runtime
// left of it (see readSigState).
func startSigState() (st sigState, ok bool) { return sigState{}, false }
