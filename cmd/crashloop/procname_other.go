//go:build unix && !linux

package main

// setProcessName does nothing where crashloop runs its keeper and shim
// from its executable's own path: they show under its name already.
func setProcessName(string) {}
