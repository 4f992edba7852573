//go:build !unix

package main

import (
	"fmt"
	"os"
)

// main says that crashloop needs process groups and Unix signals.
func main() {
	fmt.Fprintln(os.Stderr, "crashloop: needs a Unix system (process groups and signals)")
	os.Exit(1)
}
