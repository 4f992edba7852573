//go:build unix

package main

import "runtime/debug"

// version returns the version of the module crashloop was built from, as
// the build recorded it, or "(devel)" when it recorded none.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
