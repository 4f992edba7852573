//go:build !unix

package main

import "errors"

// lockFile is not available on this platform: --state needs flock.
func lockFile(path string) (func(), error) {
	return nil, errors.New("--state needs a Unix system (flock)")
}
