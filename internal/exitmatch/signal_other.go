//go:build !unix

package exitmatch

import "os"

// signalOf returns "": only Unix tells the signal that killed a process.
func signalOf(*os.ProcessState) string { return "" }
